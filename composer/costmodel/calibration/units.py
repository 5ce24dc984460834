"""One key (a primitive's residual layer, or the head) at one width, as the fit times it (:class:`Unit`), and the
cost model's work for what it times (:func:`unit_work`), so that a timing and its row of the fit describe the
same calls.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from composer.accounting import DTYPE_BYTES
from composer.config import ArchConfig
from composer.costmodel import step_work
from composer.precision import device_has_native_bf16
from composer.presets import get_preset

COLD_BYTES = 64 * 2**20  # above this CPU's last-level cache (32 MiB): what a layer's weights must exceed to be cold
MAX_COPIES = 64
FP32 = 4


def train_precision_of(requested: str) -> str:
    """The precision fit and validate train in: ``auto`` is bf16 autocast over fp32 weights where this CPU has
    native bf16 (what ``composer search`` trains its candidates in there: ``composer.precision``), else fp32."""
    if requested == "auto":
        return "bf16" if device_has_native_bf16("cpu") else "fp32"
    return requested


def training_autocast(precision: str) -> Callable[[], contextlib.AbstractContextManager]:
    """What a training step's forward (and loss) runs under: bf16 autocast on the CPU (Lightning's bf16-mixed:
    the backward outside it) or nothing."""
    if precision == "bf16":
        return lambda: torch.autocast("cpu", dtype=torch.bfloat16)
    return contextlib.nullcontext


def arch_for(preset: str, pattern: str) -> ArchConfig:
    return get_preset(preset).arch.with_pattern(pattern)


class Unit:
    """One key (a primitive's residual layer, or the head) at one width, and its four measured calls.

    Every call runs the next of ``copies`` identical modules, enough that their weights together exceed the
    last-level cache (``COLD_BYTES``): inside a model a layer's weights come from memory, evicted by the layers
    between two of its steps, and a single layer called again and again would read them from cache instead (at
    demo-4m widths a warm A and M layer decoded in 0.31 ms, cold copies in 0.52 ms, and a whole (AM)x8 model
    in 0.54 ms per pair: 2026-11-29, one thread)."""

    def __init__(self, arch: ArchConfig, key: str, copies: int | None = None, train_precision: str = "fp32") -> None:
        torch.manual_seed(0)
        self.arch, self.key = arch, key
        self.autocast = training_autocast(train_precision)
        first = self._build()
        weight_bytes = sum(p.numel() * p.element_size() for p in first.parameters())
        n = copies or max(1, min(MAX_COPIES, -(-COLD_BYTES // weight_bytes)))
        self.modules = [first, *(self._build() for _ in range(n - 1))]
        self.next = 0

    def _build(self) -> nn.Module:
        from composer.model import ResidualLayer
        from primitives.base import InitScheme
        from primitives.registry import REGISTRY

        arch = self.arch
        if self.key == "head":
            module = nn.ModuleDict({"embed": nn.Embedding(arch.vocab_size, arch.d_model),
                                    "norm": nn.RMSNorm(arch.d_model, eps=arch.norm_eps)})
            nn.init.normal_(module["embed"].weight, std=arch.init_std)
            return module
        config = arch.with_pattern(self.key).primitive_configs()[self.key]
        module = ResidualLayer(REGISTRY.get(self.key)(config), arch.d_model, arch.norm_eps)
        module.primitive.reset_parameters(InitScheme(std=arch.init_std, n_layers=1))
        return module

    def _rotate(self, steps: list[Callable[[], Any]]) -> Callable[[], None]:
        """One call of the next copy's step."""

        def call() -> None:
            self.next = (self.next + 1) % len(steps)
            steps[self.next]()

        return call

    # -- the calls ------------------------------------------------------------------------------------------
    def train_call(self, batch: int, seq: int) -> Callable[[], None]:
        gen = torch.Generator().manual_seed(1)
        if self.key == "head":
            ids = torch.randint(0, self.arch.vocab_size, (batch, seq + 1), generator=gen)

            def head_step(module: nn.Module) -> Callable[[], None]:
                def step() -> None:
                    module.zero_grad(set_to_none=True)
                    with self.autocast():
                        h = module["norm"](module["embed"](ids[:, :-1]))
                        logits = F.linear(h, module["embed"].weight)
                        loss = F.cross_entropy(logits.flatten(0, 1), ids[:, 1:].flatten())
                    loss.backward()

                return step

            return self._rotate([head_step(m) for m in self.modules])
        # Every copy forward, then every copy backward in reverse, each on its own input, as the layers of a model
        # train: a layer's backward reads the activations its forward saved long before, from memory. Forward and
        # backward of one layer back to back read them from cache, and a deep S/D stack then trained 30-50% slower
        # than the single layers predicted (validate, 2026-11-29). One call is every copy: seconds per layer are
        # the call's over ``layers_per_call``.
        inputs = [torch.randn(batch, seq, self.arch.d_model, generator=gen).requires_grad_(True)
                  for _ in self.modules]
        grad = torch.randn(batch, seq, self.arch.d_model, generator=gen)

        def stack_step() -> None:
            outputs = []
            with self.autocast():
                for module, x in zip(self.modules, inputs, strict=True):
                    module.zero_grad(set_to_none=True)
                    x.grad = None
                    outputs.append(module(x))
            for out in reversed(outputs):
                out.backward(grad)

        return stack_step

    def layers_per_call(self, phase: str) -> int:
        """How many layers one call of ``phase`` runs: every copy for a layer's training step, else one."""
        return len(self.modules) if phase == "train" and self.key != "head" else 1

    def optimizer_call(self) -> Callable[[], None]:
        def optimizer_step(module: nn.Module) -> Callable[[], None]:
            params = list(module.parameters())
            for p in params:
                p.grad = torch.randn_like(p) * 1e-3
            optimizer = torch.optim.AdamW(params, lr=1e-4, betas=(0.9, 0.95), weight_decay=0.1)

            def step() -> None:
                torch.nn.utils.clip_grad_norm_(params, 1.0)
                optimizer.step()

            return step

        return self._rotate([optimizer_step(m) for m in self.modules])

    def prefill_call(self, batch: int, seq: int) -> Callable[[], None]:
        gen = torch.Generator().manual_seed(2)
        if self.key == "head":
            ids = torch.randint(0, self.arch.vocab_size, (batch, seq), generator=gen)
            return self._rotate([lambda m=m: self._logits(m, ids) for m in self.modules])
        x = torch.randn(batch, seq, self.arch.d_model, generator=gen)

        def prefill_step(module: nn.Module) -> Callable[[], None]:
            cache = module.primitive.init_cache(batch, seq + 1)
            return torch.no_grad()(lambda: module.forward_cached(x, cache, 0))

        return self._rotate([prefill_step(m) for m in self.modules])

    def decode_call(self, batch: int, context: int) -> Callable[[], None]:
        """One decoding step at ``context`` (each copy's cache filled by a prefill first; every call writes the
        same position, so the cache never grows)."""
        gen = torch.Generator().manual_seed(3)
        if self.key == "head":
            ids = torch.randint(0, self.arch.vocab_size, (batch, 1), generator=gen)
            return self._rotate([lambda m=m: self._logits(m, ids) for m in self.modules])
        prompt = torch.randn(batch, context, self.arch.d_model, generator=gen)
        x = torch.randn(batch, 1, self.arch.d_model, generator=gen)

        def decode_step(module: nn.Module) -> Callable[[], None]:
            cache = module.primitive.init_cache(batch, context + 1)
            with torch.no_grad():
                module.forward_cached(prompt, cache, 0)
            return torch.no_grad()(lambda: module.forward_cached(x, cache, context))

        return self._rotate([decode_step(m) for m in self.modules])

    @staticmethod
    @torch.no_grad()
    def _logits(module: nn.Module, ids: torch.Tensor) -> torch.Tensor:
        """Embedding, final norm, LM head on the last position and the greedy pick (next_token_logits' head)."""
        h = module["norm"](module["embed"](ids)[:, -1:])
        return F.linear(h, module["embed"].weight)[:, -1].argmax(-1)

    def call(self, phase: str, batch: int, tokens: int) -> Callable[[], None]:
        if phase == "optimizer":
            return self.optimizer_call()
        return getattr(self, f"{phase}_call")(batch, tokens)


def unit_work(arch: ArchConfig, key: str, phase: str, batch: int, tokens: int, train_precision: str = "fp32"):
    """The cost model's units for what :class:`Unit` times: ``phase`` is a step phase or ``optimizer``."""
    symbol_arch = arch if key == "head" else arch.with_pattern(key)
    step_phase = "train" if phase == "optimizer" else phase
    activation_bytes = DTYPE_BYTES[train_precision] if step_phase == "train" else FP32
    units = step_work(symbol_arch, step_phase, batch, tokens, FP32, activation_bytes)
    if phase == "optimizer":
        return [u for u in units if u.key == "optimizer" and u.count_key == key]
    if key == "head" and phase == "train":  # the head's step includes the embedding's gradient
        return [u for u in units if u.key in ("head", "embedding")]
    return [u for u in units if u.key == key and u.count_phase == phase]
