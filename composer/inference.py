"""Incremental decoding of a :class:`~composer.model.ComposerModel`: the per-model inference cache, sampling and
the generation loop.

The cache holds one :class:`~primitives.base.LayerCache` per layer (``None`` for stateless layers such as ``M``
and ``E``) and the number of tokens it has seen. Every tensor is allocated once, by
:meth:`ComposerModel.init_cache <composer.model.ComposerModel.init_cache>`; prefill and decoding write into it in
place. Its :meth:`InferenceCache.nbytes` is exactly the analytic figure of :mod:`composer.accounting` for the
same batch, length and dtype: ``batch * analyze(arch, seq_len=max_len, cache_dtype_bytes=...)
.cache_bytes_per_sequence`` (``A`` preallocates ``max_len`` tokens, which is the analytic per-token cost at
``max_len``; ``W`` holds ``min(window, max_len)``; ``S`` and ``D`` their fixed states).

Typical use::

    cache = model.init_cache(batch=1, max_len=512)
    logits = model(prompt, cache=cache).logits          # prefill: logits of every prompt position
    logits = model(next_token, cache=cache).logits      # one decoding step
    tokens = model.generate(prompt, max_new_tokens=64)  # or the whole loop

Decoding as it is served: :func:`compile_decode_step` returns a :class:`DecodeStep`, a drop-in for
``model.next_token_logits`` on single tokens that runs :meth:`ComposerModel.decode_step
<composer.model.ComposerModel.decode_step>` (every shape fixed, the position a tensor) compiled: Inductor on the
CPU, CUDA graphs on CUDA. A decoding step at small batch costs its dispatched ops, not its arithmetic (about 80 a
layer), and compiling fuses them; its ``path`` names what runs, for the caller to print. Prefill stays eager::

    step = compile_decode_step(model)
    logits = model.next_token_logits(prompt, cache)     # prefill, eager
    logits = step(next_token[:, None], cache)           # one compiled decoding step; cache.pos advances
"""

from __future__ import annotations

import contextlib
import enum
import time
import warnings
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Protocol

import torch

from composer.compiling import recompile_limit_at_least
from primitives.base import LayerCache, Primitive


class Decoder(Protocol):
    """What the generation loop needs of a model; :class:`~composer.model.ComposerModel` is one. The loop depends
    on these two methods, not on the model's module, so that the model can import the loop."""

    def init_cache(self, batch: int, max_len: int, device: torch.device | str | None = None,
                   dtype: torch.dtype | None = None) -> InferenceCache: ...

    def next_token_logits(self, input_ids: torch.Tensor, cache: InferenceCache) -> torch.Tensor: ...


class InferenceCache:
    """Per-layer caches of one model for ``batch`` sequences of up to ``max_len`` tokens, and ``pos``, the number
    of tokens of each sequence the layers have seen (the next token's position; equal for all sequences).

    Reuse: :meth:`reset` (or a forward at ``pos == 0``) starts new sequences in the same memory; a later
    forward or :meth:`ComposerModel.generate` with the same cache continues the sequences where they stopped.
    """

    def __init__(self, layers: Sequence[LayerCache | None], batch: int, max_len: int) -> None:
        self.layers = list(layers)
        self.batch = batch
        self.max_len = max_len
        self.pos = 0

    @classmethod
    def for_layers(
        cls,
        primitives: Iterable[Primitive],
        batch: int,
        max_len: int,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> InferenceCache:
        if not (isinstance(batch, int) and batch > 0 and isinstance(max_len, int) and max_len > 0):
            raise ValueError(f"batch and max_len must be positive integers, got {batch!r} and {max_len!r}")
        layers = [primitive.init_cache(batch, max_len, device, dtype) for primitive in primitives]
        return cls(layers, batch, max_len)

    @property
    def remaining(self) -> int:
        """Tokens that still fit."""
        return self.max_len - self.pos

    def layer_nbytes(self) -> list[int]:
        """Bytes allocated per layer (0 for a stateless layer)."""
        return [0 if cache is None else cache.nbytes() for cache in self.layers]

    def nbytes(self) -> int:
        """Bytes allocated by the whole cache (all layers, all sequences)."""
        return sum(self.layer_nbytes())

    def reset(self) -> None:
        """Start new sequences: position 0. (The next forward ignores what the layers hold; the tensors are
        zeroed anyway, so that a reset cache also reads as empty.)"""
        self.pos = 0
        for cache in self.layers:
            if cache is not None:
                cache.reset()

    def check(self, batch: int, n_tokens: int) -> None:
        """Raise unless ``n_tokens`` more tokens of ``batch`` sequences fit."""
        if batch != self.batch:
            raise ValueError(f"batch of {batch} sequences for an inference cache allocated for {self.batch}")
        if n_tokens > self.remaining:
            raise ValueError(
                f"{n_tokens} more tokens do not fit the inference cache: it holds {self.pos} of max_len "
                f"{self.max_len}; allocate a longer one with model.init_cache(batch, max_len)"
            )

    def __repr__(self) -> str:
        return (
            f"InferenceCache(batch={self.batch}, max_len={self.max_len}, pos={self.pos}, "
            f"nbytes={self.nbytes()})"
        )


# -- the decoding step as it is served -------------------------------------------------------------------------

class StepKind(str, enum.Enum):
    """What a served decoding step (:class:`DecodeStep`) runs as: one value per path, so a label is chosen, never edited in place. A ``str``
    enum, so a result's JSON holds the label itself."""

    EAGER = "eager"
    COMPILED_CPU = "compiled (inductor, cpu)"
    CUDA_GRAPHS = "cuda graphs (reduce-overhead)"
    COMPILED_CUDA = "compiled (inductor, cuda; cuda graphs skipped: TORCH_LOGS=perf_hints says why)"

    def __str__(self) -> str:
        return self.value


EAGER, COMPILED_CPU, CUDA_GRAPHS = StepKind.EAGER, StepKind.COMPILED_CPU, StepKind.CUDA_GRAPHS
# Each batch size, cache length and dtype is a graph of its own (static shapes), and every model shares the one
# code object dynamo caches them on (ComposerModel.decode_step): a benchmark's grid of two models passes the
# default limit of 8, past which a fullgraph compile raises. Raised to this while a step may compile
# (DecodeStep._may_compile), and only then: the process's own limit, which governs every other compiled function
# (a search worker's training), is left as it was.
RECOMPILE_LIMIT = 64


class DecodeStep:
    """One decoding step of ``model``: ``step(token_ids [batch, 1], cache) -> logits [batch, vocab]``, advancing
    ``cache.pos`` by one, as :meth:`ComposerModel.next_token_logits
    <composer.model.ComposerModel.next_token_logits>` does for one token. Built by :func:`compile_decode_step`.

    ``kind`` (a :class:`StepKind`) names what runs; where compiling fails (no C++ compiler, an Inductor error)
    the step warns once and decodes eagerly from then on, and ``failure`` says why; ``path`` is the label a
    result records, the two together. ``compile_s``: the wall time of the first compiled call (compilation and one step; see
    :meth:`warm_up`). The position is one tensor on the model's device, refilled before each step (no host to
    device copy to wait for). A CUDA-graphs step's cache tensors and position are marked as static addresses
    (the graph writes the cache in place); its logits are copied out of the graph's memory, which the next
    replay overwrites; where Inductor skips the graphs after all, ``path`` says so."""

    def __init__(self, model, compiled: Callable | None = None, kind: StepKind = StepKind.EAGER) -> None:
        self.model = model
        self.kind = StepKind(kind)
        self.failure: str | None = None  # why compiling failed ("TypeError: ..."), once it has
        self.compile_s: float | None = None
        self._compiled = compiled
        self._cuda_graphs = self.kind is StepKind.CUDA_GRAPHS
        self._static_cache: InferenceCache | None = None
        self._pos: torch.Tensor | None = None
        self._compiled_for: weakref.ref | None = None  # the cache of the last call: the same one does not compile

    @property
    def path(self) -> str:
        """The label a result records: the path, and why compiling failed where it did."""
        return self.kind.value if self.failure is None else f"{self.kind.value} (compile failed: {self.failure})"

    @property
    def compiled(self) -> bool:
        """Whether the step runs compiled (not eager, not fallen back)."""
        return self._compiled is not None

    def __call__(self, token_ids: torch.Tensor, cache: InferenceCache) -> torch.Tensor:
        if token_ids.dim() != 2 or token_ids.shape[1] != 1:
            raise ValueError(f"a decoding step takes token_ids [batch, 1], got shape {tuple(token_ids.shape)}")
        cache.check(token_ids.shape[0], 1)
        pos = self._position(cache.pos, token_ids.device)
        logits = self._run(token_ids, cache, pos) if self.compiled else None
        if logits is None:  # eager, or the compiled step has just fallen back
            logits = self.model.decode_step(token_ids, cache, pos)
        cache.pos += 1
        return logits

    def warm_up(self, batch: int, max_len: int, dtype: torch.dtype | None = None) -> float:
        """Compile (and, for CUDA graphs, record) the step for caches of ``batch`` x ``max_len`` in ``dtype`` on a
        scratch cache, so that timed decoding does not include it; returns the seconds it took. A step compiles
        once per such shape: a cache of the same shape later reuses the graph."""
        device = next(self.model.parameters()).device
        cache = self.model.init_cache(batch, max_len, device=device, dtype=dtype)
        token = torch.zeros(batch, 1, dtype=torch.long, device=device)
        started = time.perf_counter()
        for _ in range(3 if self._cuda_graphs else 1):  # cudagraph trees: a warmup run, then the recording
            cache.pos = 0
            self(token, cache)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        return time.perf_counter() - started

    def _run(self, token_ids: torch.Tensor, cache: InferenceCache, pos: torch.Tensor) -> torch.Tensor | None:
        """The compiled step; ``None`` after falling back to eager (the cache untouched: a compilation fails
        before its graph runs)."""
        if self._cuda_graphs:
            self._mark_static(cache)
            torch.compiler.cudagraph_mark_step_begin()
        first = self.compile_s is None
        skips = _cudagraph_skips() if self._cuda_graphs else 0
        started = time.perf_counter()
        try:
            with self._may_compile(cache):
                logits = self._compiled(token_ids, cache, pos)
        except Exception as err:  # noqa: BLE001 (any compiler failure: decode eagerly, and say why)
            self._fall_back(err)
            return None
        if first:
            self.compile_s = time.perf_counter() - started
        if self._cuda_graphs and _cudagraph_skips() > skips:  # compiled, but run outside CUDA graphs
            self.kind = StepKind.COMPILED_CUDA
        return logits.clone() if self._cuda_graphs else logits

    def _may_compile(self, cache: InferenceCache) -> contextlib.AbstractContextManager:
        """Dynamo's recompile limit raised to :data:`RECOMPILE_LIMIT` for a call that may compile a graph (the
        first on a cache: a new batch, length or dtype is a new graph), and restored after it; a later call on the
        same cache replays its graph and runs unpatched (a patch costs ~10 us, a step at batch 1 ~100 us on a
        GPU)."""
        if self._compiled_for is not None and self._compiled_for() is cache:
            return contextlib.nullcontext()
        self._compiled_for = weakref.ref(cache)
        return recompile_limit_at_least(RECOMPILE_LIMIT)

    def _position(self, pos: int, device: torch.device) -> torch.Tensor:
        """``pos`` as the step's 0-d int64 tensor: one per step object, filled in place (a kernel on CUDA,
        where ``torch.tensor(pos, device=...)`` would be a copy from the host the CPU waits for)."""
        if self._pos is None or self._pos.device != device:
            self._pos = torch.zeros((), dtype=torch.long, device=device)
            if self._cuda_graphs:
                torch._dynamo.mark_static_address(self._pos, guard=False)
        return self._pos.fill_(pos)

    def _mark_static(self, cache: InferenceCache) -> None:
        """Tell the CUDA graphs that ``cache``'s tensors keep their addresses: mutated inputs that are not static
        would keep the step out of the graph. A new cache is re-recorded, not recompiled."""
        if cache is not self._static_cache:
            for layer in cache.layers:
                for tensor in [] if layer is None else layer.tensors():
                    torch._dynamo.mark_static_address(tensor, guard=False)
            self._static_cache = cache

    def _fall_back(self, err: Exception) -> None:
        first_line = str(err).strip().splitlines()[0] if str(err).strip() else ""
        reason = f"{type(err).__name__}: {first_line}"[:200]
        warnings.warn(f"compiled decoding step failed, decoding eagerly: {reason}", RuntimeWarning, stacklevel=3)
        self.failure, self.kind = reason, StepKind.EAGER
        self._compiled = None
        self._cuda_graphs = False

    def __repr__(self) -> str:
        return f"DecodeStep(path={self.path!r})"


def _cudagraph_skips() -> int:
    """How many times Inductor has run a compiled graph outside CUDA graphs (in this process)."""
    return torch._dynamo.utils.counters["inductor"]["cudagraph_skips"]


def compile_decode_step(model, enabled: bool = True) -> DecodeStep:
    """``model``'s decoding step as it is served (:class:`DecodeStep`): on CUDA through
    ``torch.compile(mode="reduce-overhead")``, which captures the step as CUDA graphs (a small model's step is
    kernel launches, state-spaces/mamba issue 90); elsewhere ``torch.compile(fullgraph=True)`` with Inductor,
    which fuses a step's ~80 small ops a layer. ``dynamic=False``: one graph per batch size and cache shape, for
    every position (:meth:`ComposerModel.decode_step <composer.model.ComposerModel.decode_step>` takes it as a
    tensor). Compilation is lazy: the first call (or :meth:`DecodeStep.warm_up`) pays it. ``enabled=False``
    gives the eager step, so a ``--compile`` flag is one argument."""
    if not enabled:
        return DecodeStep(model)
    if next(model.parameters()).device.type == "cuda":
        compiled = torch.compile(model.decode_step, mode="reduce-overhead", fullgraph=True, dynamic=False)
        return DecodeStep(model, compiled, CUDA_GRAPHS)
    return DecodeStep(model, torch.compile(model.decode_step, fullgraph=True, dynamic=False), COMPILED_CPU)


# -- sampling -------------------------------------------------------------------------------------------------


def sample_next(
    logits: torch.Tensor,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """One token per row of ``logits [batch, vocab]``: the argmax when ``temperature == 0``, otherwise a draw
    from ``softmax(logits / temperature)`` restricted to the ``top_k`` most likely tokens and then to the
    smallest set whose probability reaches ``top_p`` (nucleus; the most likely token is always kept).
    ``generator`` (on the logits' device) makes draws reproducible. Returns ``[batch]`` (int64)."""
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0, got {temperature}")
    if top_k is not None and top_k < 1:
        raise ValueError(f"top_k must be a positive integer, got {top_k}")
    if top_p is not None and not 0 < top_p <= 1:
        raise ValueError(f"top_p must be in (0, 1], got {top_p}")
    logits = logits.float()
    if temperature == 0:
        return logits.argmax(dim=-1)
    logits = logits / temperature
    if top_k is not None and top_k < logits.shape[-1]:
        kth = logits.topk(top_k, dim=-1).values[..., -1:]
        logits = logits.masked_fill(logits < kth, -torch.inf)
    if top_p is not None and top_p < 1:
        sorted_logits, order = logits.sort(dim=-1, descending=True)
        probs = sorted_logits.softmax(dim=-1)
        before = probs.cumsum(dim=-1) - probs  # probability of the tokens ranked above
        drop_sorted = before >= top_p  # the first token has before == 0 < top_p: always kept
        drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
        logits = logits.masked_fill(drop, -torch.inf)
    probs = logits.softmax(dim=-1)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)


# -- generation -----------------------------------------------------------------------------------------------


@torch.no_grad()
def stream(
    model: Decoder,
    input_ids: torch.Tensor,
    max_new_tokens: int,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    eos: int | Iterable[int] | None = None,
    cache: InferenceCache | None = None,
    generator: torch.Generator | None = None,
    vocab_limit: int | None = None,
    decode: Callable[[torch.Tensor, InferenceCache], torch.Tensor] | None = None,
) -> Iterator[torch.Tensor]:
    """The generation loop as it runs: yields the next token of every sequence (``[batch]``) as soon as it is
    drawn, for callers that show text while it is generated (``composer generate``). ``input_ids`` is
    ``[batch, seq]``; the other arguments as in :meth:`ComposerModel.generate
    <composer.model.ComposerModel.generate>`. ``vocab_limit``: ids from there on are never drawn (the rows
    ``composer train`` pads the vocabulary with, which no tokenizer decodes). ``decode``: the step that feeds
    each drawn token (a :class:`DecodeStep`; default ``model.next_token_logits``, eager); the prompt is always
    prefilled by ``model.next_token_logits``."""
    if input_ids.dim() != 2 or input_ids.shape[1] == 0:
        raise ValueError(f"input_ids must be [batch, seq] with seq >= 1, got shape {tuple(input_ids.shape)}")
    if max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be >= 0, got {max_new_tokens}")
    if max_new_tokens == 0:
        return
    batch, prompt_len = input_ids.shape
    fed = prompt_len + max_new_tokens - 1  # the last token is returned, never fed
    if cache is None:
        cache = model.init_cache(batch, fed, device=input_ids.device)
    cache.check(batch, fed)
    eos_ids = None
    if eos is not None:
        eos_ids = torch.tensor([eos] if isinstance(eos, int) else list(eos), device=input_ids.device)
    finished = torch.zeros(batch, dtype=torch.bool, device=input_ids.device)

    step_input = input_ids
    decode = model.next_token_logits if decode is None else decode
    for step in range(max_new_tokens):
        logits = (model.next_token_logits if step == 0 else decode)(step_input, cache)
        if vocab_limit is not None and vocab_limit < logits.shape[-1]:
            logits[:, vocab_limit:] = -torch.inf
        token = sample_next(logits, temperature, top_k, top_p, generator)
        if eos_ids is not None:  # a finished sequence repeats its eos
            token = torch.where(finished, eos_ids[0], token)
            finished |= torch.isin(token, eos_ids)
        yield token
        if eos_ids is not None and bool(finished.all()):
            return
        if step + 1 < max_new_tokens:
            step_input = token[:, None]


def generate(
    model: Decoder,
    input_ids: torch.Tensor,
    max_new_tokens: int,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    eos: int | Iterable[int] | None = None,
    cache: InferenceCache | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """See :meth:`ComposerModel.generate <composer.model.ComposerModel.generate>`: :func:`stream`, collected."""
    squeeze = input_ids.dim() == 1
    batched = input_ids.unsqueeze(0) if squeeze else input_ids
    tokens = list(stream(model, batched, max_new_tokens, temperature, top_k, top_p, eos, cache, generator))
    out = torch.stack(tokens, dim=1) if tokens else batched.new_empty(batched.shape[0], 0)
    return out[0] if squeeze else out
