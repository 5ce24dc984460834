"""``M``: SwiGLU feed-forward network (Llama style, no biases)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from primitives.base import InitScheme, Primitive


class _SwiGLU(torch.autograd.Function):
    """``silu(gate) * up`` on the fused gate/up projection ``[..., 2 * ffn]``.

    The backward pass writes d(gate) and d(up) straight into one buffer; autograd's backward of ``chunk`` would
    ``cat`` them into a fresh full-size tensor, which costs more than the fused matmul saves on CPU.
    """

    @staticmethod
    def forward(ctx, hidden: torch.Tensor) -> torch.Tensor:
        gate, up = hidden.chunk(2, dim=-1)
        activated = F.silu(gate)
        ctx.save_for_backward(hidden, activated)
        return activated * up

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:
        hidden, activated = ctx.saved_tensors
        gate, up = hidden.chunk(2, dim=-1)
        grad_hidden = torch.empty_like(hidden)
        grad_gate, grad_up = grad_hidden.chunk(2, dim=-1)
        torch.mul(grad, activated, out=grad_up)
        torch.ops.aten.silu_backward.grad_input(grad * up, gate, grad_input=grad_gate)
        return grad_hidden


def swiglu(hidden: torch.Tensor) -> torch.Tensor:
    """``silu(gate) * up`` where ``gate, up = hidden.chunk(2, -1)``.

    Under ``torch.compile`` the plain ops are traced instead: the hand-written backward writes into views with
    ``out=``, which dynamo cannot trace (a graph break in every MLP layer), and Inductor fuses the plain form.
    """
    if torch.compiler.is_compiling():
        gate, up = hidden.chunk(2, dim=-1)
        return F.silu(gate) * up
    return _SwiGLU.apply(hidden)


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
        return self.w2(swiglu(self.w13(x)))

    @classmethod
    def param_count(cls, config: SwiGLUConfig) -> int:
        return 3 * config.d_model * config.ffn_dim

    @classmethod
    def flops_per_token(cls, config: SwiGLUConfig, seq_len: int) -> int:
        return 6 * cls.param_count(config)
