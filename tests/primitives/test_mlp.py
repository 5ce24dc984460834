from __future__ import annotations

import torch
import torch.nn.functional as F

from primitives.mlp import SwiGLU, SwiGLUConfig, swiglu


def test_fused_swiglu_matches_the_plain_formula_and_its_gradient():
    hidden = torch.randn(3, 5, 8, dtype=torch.float64, requires_grad=True)
    gate, up = hidden.chunk(2, dim=-1)
    torch.testing.assert_close(swiglu(hidden), F.silu(gate) * up)
    assert torch.autograd.gradcheck(swiglu, (hidden,))


def test_flops_are_six_per_weight():
    config = SwiGLUConfig(d_model=64, ffn_dim=256)
    assert SwiGLU.flops_per_token(config, 4096) == 6 * 3 * 64 * 256
