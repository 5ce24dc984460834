"""``M``: SwiGLU feed-forward network (Llama style, no biases)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from primitives.base import InitScheme, Primitive


@dataclass(frozen=True)
class SwiGLUConfig:
    d_model: int
    ffn_dim: int

    def __post_init__(self) -> None:
        if self.d_model <= 0 or self.ffn_dim <= 0:
            raise ValueError(f"MLP widths must be positive, got {self}")

    @classmethod
    def from_arch(cls, arch, **options) -> SwiGLUConfig:
        return cls(d_model=arch.d_model, ffn_dim=options.pop("ffn_dim", arch.ffn_dim), **options)


class SwiGLU(Primitive):
    """``w2(silu(x w1) * (x w3))``."""

    symbol = "M"
    name = "mlp"
    Config = SwiGLUConfig
    description = "SwiGLU feed-forward network"

    def __init__(self, config: SwiGLUConfig) -> None:
        super().__init__(config)
        # Gate (w1) and up (w3) projections fused into one matmul.
        self.w13 = nn.Linear(config.d_model, 2 * config.ffn_dim, bias=False)
        self.w2 = nn.Linear(config.ffn_dim, config.d_model, bias=False)

    def reset_parameters(self, init: InitScheme) -> None:
        nn.init.normal_(self.w13.weight, std=init.std)
        nn.init.normal_(self.w2.weight, std=init.out_std)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = self.w13(x).chunk(2, dim=-1)
        return self.w2(F.silu(gate) * up)

    @classmethod
    def param_count(cls, config: SwiGLUConfig) -> int:
        return 3 * config.d_model * config.ffn_dim

    @classmethod
    def flops_per_token(cls, config: SwiGLUConfig, seq_len: int) -> int:
        return 6 * cls.param_count(config)
