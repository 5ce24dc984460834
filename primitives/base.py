"""The contract every primitive fulfils.

A primitive is one kind of layer body (attention, MLP, later state-space blocks). The composer wraps each
primitive in a pre-RMSNorm residual layer, so a primitive only maps ``[batch, seq, d_model]`` to the same shape.

Everything the rest of the framework needs to know about a primitive lives on its class, so that search,
accounting and extrapolation can reason about multi-billion parameter models without building them:

* ``symbol`` / ``name`` / ``Config``: how patterns and configs refer to it;
* ``param_count``, ``flops_per_token``, ``inference_cache``: analytic accounting from the config alone;
* ``reset_parameters``: its own initialisation (a global init must never overwrite e.g. Mamba's dt init);
* ``no_weight_decay``: which of its parameters the optimiser must not decay (norms, biases, SSM A/D, ...).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from torch import nn

if TYPE_CHECKING:  # pragma: no cover - import only for type checkers
    from composer.config import ArchConfig


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
    def config_from_arch(cls, arch: ArchConfig) -> Any:
        """Build this primitive's config from the architecture's shared widths and its per-symbol options."""
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
