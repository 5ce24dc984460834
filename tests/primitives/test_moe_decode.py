"""The MoE decoding step reads its experts' weights in place when run eagerly (issue 69): gathering
``w13[experts]`` copied ``top_k`` experts' weights for every token of every step. Traced into a graph it still
gathers (static shapes), and both paths compute what :meth:`MoESwiGLU.forward` does."""

from __future__ import annotations

import torch

from composer.evaluation.bench_cost import cpu_allocation_peak
from primitives.base import InitScheme
from primitives.moe import MoEConfig, MoESwiGLU


def wide_moe() -> MoESwiGLU:
    """Experts large beside a step's activations, so that one copied expert stands out in the allocations."""
    module = MoESwiGLU(MoEConfig(d_model=64, expert_ffn_dim=256, n_experts=8, top_k=2))
    module.reset_parameters(InitScheme(std=0.2, n_layers=1))
    with torch.no_grad():
        module.router.weight.normal_(std=1.0)
    return module.eval()


def test_an_eager_decode_step_copies_no_expert_weights():
    module = wide_moe()
    x = torch.randn(1, 1, 64)
    with torch.no_grad():
        module.decode_step(x, None, torch.tensor(0))  # the first call's one-off allocations, not the step's
        peak = cpu_allocation_peak(lambda: module.decode_step(x, None, torch.tensor(0)))
    one_expert = module.w13[0].numel() * module.w13.element_size()  # 128 KiB; a step's activations are ~10 KiB
    assert peak is not None and peak < one_expert / 4, f"a decode step allocated {peak:,} bytes"


def test_the_eager_and_the_traced_decode_step_equal_the_forward():
    module = wide_moe()
    x = torch.randn(3, 1, 64)
    with torch.no_grad():
        expected = module(x)
        eager = module.decode_step(x, None, torch.tensor(0))
        traced = torch.compile(module.decode_step, fullgraph=True, dynamic=False)(x, None, torch.tensor(0))
    torch.testing.assert_close(eager, expected, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(traced, expected, rtol=1e-4, atol=1e-4)
