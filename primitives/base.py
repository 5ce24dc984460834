"""The contract every primitive fulfils.

A primitive is one kind of layer body (attention, MLP, later state-space blocks). The composer wraps each
primitive in a pre-RMSNorm residual layer, so a primitive only maps ``[batch, seq, d_model]`` to the same shape.

Everything the rest of the framework needs to know about a primitive lives on its class, so that search,
accounting and extrapolation can reason about multi-billion parameter models without building them:

* ``symbol`` / ``name`` / ``Config``: how patterns and configs refer to it;
* ``param_count``, ``flops_per_token``, ``inference_cache``: analytic accounting from the config alone;
* ``reset_parameters``: its own initialisation (a global init must never overwrite e.g. Mamba's dt init);
* ``no_weight_decay``: which of its parameters the optimiser must not decay (norms, biases, SSM A/D, ...);
* ``init_cache`` / ``forward_cached`` / ``decode_step``: incremental decoding (below).

Incremental decoding. ``forward(x)`` is the training path and stays free of any cache logic. Generation uses two
more methods, which every primitive with an inference cache implements:

* ``init_cache(batch, max_len, device=None, dtype=None)`` allocates, once, everything one layer keeps between
  calls for ``batch`` sequences of up to ``max_len`` tokens: a :class:`LayerCache` (a dataclass of tensors), or
  ``None`` for a stateless primitive (``M``, ``E``). Its ``nbytes()`` is ``batch`` times the analytic
  ``inference_cache(config, dtype_bytes).bytes_at(max_len)`` of the same dtype: ``A`` preallocates ``max_len``
  tokens of keys and values (``n_kv_heads`` wide), ``W`` a ring of ``min(window, max_len)`` tokens, ``S`` and
  ``D`` their recurrent state plus the last inputs of their short convolutions.
* ``forward_cached(x, cache, start_pos)`` maps the ``n`` new tokens ``x [batch, n, d_model]`` at absolute
  positions ``start_pos .. start_pos + n - 1`` to the same output ``forward`` gives them in the full sequence,
  and updates ``cache`` in place. ``start_pos == 0`` starts a new sequence (whatever the cache holds is ignored):
  prefill is one call with the whole prompt, run in the chunked (parallel) form, and decoding is one call per
  token (or a few) with the recurrent form. The caller tracks ``start_pos`` (one counter for all layers, see
  ``composer.inference.InferenceCache``); ``start_pos + n`` must not exceed the cache's ``max_len``.
* ``decode_step(x, cache, pos)`` is ``forward_cached`` of one token ``x [batch, 1, d_model]`` continuing a
  started sequence, with the position a tensor (0-d or ``[1]``, int64, on ``x``'s device) and every shape
  fixed: what ``torch.compile`` and CUDA graphs need to build one step for all positions (a Python int
  position is a constant to them, so each new token would recompile, and a captured graph could not move on).
  ``A`` writes at ``pos`` and attends over its whole preallocated cache, later keys masked; ``W`` writes slot
  ``pos % slots``; ``S`` and ``D`` ignore ``pos`` (their state carries the context); ``E`` gathers its
  routed experts' weights instead of sorting tokens by expert. The sequence starts with a prefill (or at
  ``pos`` 0 on a fresh or reset cache); the range is the caller's to check (a check would read ``pos``).

The defaults below fit a stateless primitive: no cache, and ``forward_cached`` and ``decode_step`` are
``forward``. A primitive whose ``inference_cache`` declares memory but that does not implement them refuses to
decode rather than silently forgetting its context.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

import torch
from torch import nn

from primitives.rope import RopeScaling


@dataclass(frozen=True)
class Widths:
    """What a primitive's config is built from: the widths all layers of a model share, and per-symbol options.

    ``options`` maps a primitive's symbol to the extras its config accepts, e.g. ``{"A": {"backend": "sdpa"}}``.
    :class:`composer.config.ArchConfig` provides one as ``arch.widths``; a primitive never sees the rest of the
    architecture (its pattern, vocabulary or initialisation), so this package needs nothing from ``composer``.
    """

    d_model: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    ffn_dim: int
    norm_eps: float = 1e-5
    rope_theta: float = 500_000.0
    rope_scaling: RopeScaling | None = None
    options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def options_for(self, symbol: str) -> dict[str, Any]:
        """The options given for ``symbol`` (a copy: a config may consume them)."""
        return dict(self.options.get(symbol, {}))


@dataclass(frozen=True)
class CacheSpec:
    """Inference memory one layer of a primitive holds for one sequence.

    ``bytes_per_token`` grows with the context (a KV cache); ``window`` bounds the number of tokens it is kept
    for (sliding-window attention); ``fixed_bytes`` does not depend on the context (a recurrent state).
    """

    bytes_per_token: int = 0
    fixed_bytes: int = 0
    window: int | None = None

    def bytes_at(self, seq_len: int) -> int:
        """Cache bytes of one sequence after ``seq_len`` tokens."""
        tokens = seq_len if self.window is None else min(seq_len, self.window)
        return self.bytes_per_token * tokens + self.fixed_bytes


class LayerCache:
    """Base of one layer's inference cache: a dataclass whose tensor fields ``init_cache`` allocates once and
    ``forward_cached`` updates in place (the tensors never change shape or storage while decoding)."""

    def tensors(self) -> list[torch.Tensor]:
        """The tensors this cache holds, in field order."""
        values = (getattr(self, f.name) for f in fields(self))
        return [value for value in values if isinstance(value, torch.Tensor)]

    def nbytes(self) -> int:
        """Bytes allocated for this layer (all sequences of the batch)."""
        return sum(t.nbytes for t in self.tensors())

    def reset(self) -> None:
        """Zero every tensor. Not needed to start a new sequence (``start_pos == 0`` ignores the contents)."""
        for t in self.tensors():
            t.zero_()


@dataclass(frozen=True)
class InitScheme:
    """Initialisation shared by all layers of one model.

    ``std`` is used for input projections and ``out_std`` for projections that write into the residual stream,
    scaled down with depth (GPT-2 / Megatron: std / sqrt(number of residual branches)) so that the residual
    stream's variance does not grow with the number of layers.
    """

    std: float = 0.02
    n_layers: int = 1

    @property
    def out_std(self) -> float:
        return self.std / math.sqrt(max(1, self.n_layers))


class Primitive(nn.Module, ABC):
    """Base class of all primitives; see the module docstring for the contract."""

    symbol: ClassVar[str]
    name: ClassVar[str]
    Config: ClassVar[type]
    description: ClassVar[str] = ""

    def __init__(self, config: Any) -> None:
        super().__init__()
        self.config = config

    # -- construction -------------------------------------------------------------------------------------
    @classmethod
    def config_from_arch(cls, arch: Widths) -> Any:
        """Build this primitive's config from the shared widths and this symbol's options (``arch.widths`` of an
        :class:`~composer.config.ArchConfig`)."""
        return cls.Config.from_arch(arch, **arch.options_for(cls.symbol))

    @abstractmethod
    def reset_parameters(self, init: InitScheme) -> None:
        """(Re-)initialise every parameter and buffer; called after construction and after ``to_empty``."""

    def no_weight_decay(self) -> set[str]:
        """Names (relative to this module) of parameters that must not be weight-decayed."""
        return set()

    # -- analytic accounting ------------------------------------------------------------------------------
    @classmethod
    @abstractmethod
    def param_count(cls, config: Any) -> int:
        """Exact number of parameters of one layer body (the residual layer's norm is counted by the model)."""

    @classmethod
    def active_param_count(cls, config: Any) -> int:
        """Parameters one token actually uses (sparse layers such as MoE use fewer than they hold); the default,
        for dense primitives, is all of them."""
        return cls.param_count(config)

    @classmethod
    @abstractmethod
    def flops_per_token(cls, config: Any, seq_len: int) -> int:
        """Training FLOPs per token (forward + backward = 3x forward) at sequence length ``seq_len``.

        Matrix multiplies count 2 FLOPs per multiply-add; norms, activations and softmax are not counted.
        """

    @classmethod
    def inference_cache(cls, config: Any, dtype_bytes: int = 2) -> CacheSpec:
        """Memory one layer keeps per sequence during generation; none by default (e.g. an MLP)."""
        return CacheSpec()

    # The four below are what composer.costmodel needs to carry a layer to a device: FLOPs and bytes moved per
    # phase (training, prefill, decode). Their defaults fit a layer without token mixing (M); a mixer overrides
    # what it reads from its context.
    @classmethod
    def forward_flops_per_token(cls, config: Any, seq_len: int) -> int:
        """Forward FLOPs per token at ``seq_len``: a prefill of a ``seq_len``-token prompt, per token. Training
        is counted as 3x the forward (:meth:`flops_per_token`), so the default is a third of that."""
        return cls.flops_per_token(config, seq_len) // 3

    @classmethod
    def decode_flops_per_token(cls, config: Any, context: int) -> int:
        """FLOPs of one decoding step of one sequence whose cache holds ``context`` tokens: 2 per weight the
        token uses (every matmul once), by default; a mixer adds the work of reading its cache or state."""
        return 2 * cls.active_param_count(config)

    @classmethod
    def weight_bytes(cls, config: Any, dtype_bytes: int = 2, tokens: int | None = None) -> int:
        """Bytes of weights one pass over ``tokens`` tokens reads (one decoding step of a batch, or a whole
        training step): every weight, by default. ``tokens`` matters to a sparse layer (``E``), which reads only
        the experts its tokens are routed to; ``None`` is every weight."""
        return cls.param_count(config) * dtype_bytes

    @classmethod
    def cpu_batch_slices(cls, config: Any, batch: int, seq_len: int, activation_bytes: int = 4) -> dict[str, int]:
        """Kernels of this layer's whole-sequence CPU path (training, prefill) that run the batch a slice at a
        time, each with its number of slices at ``batch x seq_len`` tokens (activations of ``activation_bytes``):
        every slice runs that kernel's ops again, so the layer's op count grows with these numbers, not with the
        batch. None by default (every op runs once over the whole batch)."""
        return {}

    @classmethod
    def decode_cache_bytes(cls, config: Any, context: int, dtype_bytes: int = 2) -> int:
        """Cache bytes one decoding step of one sequence reads and writes when the cache holds ``context``
        tokens, from :meth:`inference_cache`: the keys and values still in the window read (``bytes_at``) and
        the new token's written; a fixed state read and written whole. 0 for a stateless layer."""
        spec = cls.inference_cache(config, dtype_bytes)
        return spec.bytes_at(context) + spec.bytes_per_token + spec.fixed_bytes

    # -- incremental decoding (see the module docstring) --------------------------------------------------
    def init_cache(
        self,
        batch: int,
        max_len: int,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> LayerCache | None:
        """This layer's inference cache for ``batch`` sequences of up to ``max_len`` tokens; ``None`` when the
        primitive is stateless. ``device`` and ``dtype`` default to those of the primitive's parameters."""
        self._refuse_if_stateful("init_cache")
        return None

    def forward_cached(self, x: torch.Tensor, cache: LayerCache | None, start_pos: int) -> torch.Tensor:
        """``forward`` of the new tokens ``x`` at positions ``start_pos ..``, reading and updating ``cache``."""
        self._refuse_if_stateful("forward_cached")
        return self(x)

    def decode_step(self, x: torch.Tensor, cache: LayerCache | None, pos: torch.Tensor) -> torch.Tensor:
        """``forward_cached`` of one token ``x [batch, 1, d_model]`` at position ``pos``, a tensor, with fixed
        shapes (module docstring): the step a compiled decoder runs."""
        self._refuse_if_stateful("decode_step")
        return self(x)

    def _refuse_if_stateful(self, method: str) -> None:
        spec = type(self).inference_cache(self.config)
        if spec.bytes_per_token or spec.fixed_bytes:
            raise NotImplementedError(
                f"{type(self).__name__} ({self.symbol}) declares an inference cache but does not implement "
                f"{method}; see primitives/base.py (incremental decoding)"
            )

    def _cache_placement(
        self, device: torch.device | str | None, dtype: torch.dtype | None
    ) -> tuple[torch.device, torch.dtype]:
        """``device`` and ``dtype``, each defaulting to that of the primitive's first parameter."""
        param = next(self.parameters(), None)
        default_device = param.device if param is not None else torch.device("cpu")
        default_dtype = param.dtype if param is not None else torch.get_default_dtype()
        return torch.device(device) if device is not None else default_device, dtype or default_dtype


def check_cache_range(cache_len: int, start_pos: int, n: int, batch: int, cache_batch: int) -> None:
    """Raise when ``n`` tokens from ``start_pos`` do not fit a cache of ``cache_len`` tokens and batch size."""
    if start_pos < 0 or start_pos + n > cache_len:
        raise ValueError(
            f"tokens {start_pos}..{start_pos + n - 1} do not fit an inference cache of max_len {cache_len}"
        )
    if batch != cache_batch:
        raise ValueError(f"batch of {batch} sequences for an inference cache allocated for {cache_batch}")
