"""The MoE decoding step reads its experts' weights in place when run eagerly (issue 69): gathering
``w13[experts]`` copied ``top_k`` experts' weights for every token of every step. Traced into a graph (static
shapes) the experts are indexed inside the reductions' loads, so the compiled step copies none either; both paths
compute what :meth:`MoESwiGLU.forward` does."""

from __future__ import annotations

import re

import pytest
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


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not torch.cuda.is_available(), reason="needs CUDA"))])
@pytest.mark.parametrize("batch", [1, 4])
def test_the_compiled_decode_step_allocates_no_copy_of_an_expert(batch, device):
    """Inductor's generated code allocates no buffer as large as the gathered experts' weights
    (``batch * top_k`` experts), at batch 1 or 4. A ``w[experts] @ x`` batched matmul keeps such a buffer on CUDA,
    where Inductor decomposes a batched matmul into a reduction only under ``coordinate_descent_tuning``; on the
    CPU it fuses the gather into the matmul's loads in every form tried (``@``, ``einsum``, ``bmm``), so there this
    test guards the fused path rather than the form."""
    from torch._inductor.utils import run_and_get_code

    module = wide_moe().to(device)
    x = torch.randn(batch, 1, 64, device=device)
    step = torch.compile(module.decode_step, fullgraph=True, dynamic=False)
    with torch.no_grad():
        _, code = run_and_get_code(step, x, None, torch.tensor(0, device=device))
    shapes = re.findall(r"empty_strided\w*\(\(([^)]*)\)", "\n".join(code))
    assert shapes, "no allocation found in the generated code: the pattern no longer reads Inductor's output"
    sizes = [eval(f"[{shape}]") for shape in shapes]  # noqa: S307 - Inductor's own literal tuples of ints
    largest = max(int(torch.tensor(size).prod()) if size else 1 for size in sizes)
    gathered = batch * module.config.top_k * module.w2[0].numel()  # the smaller of the two gathered tensors
    assert largest < gathered / 4, f"the compiled step allocates {largest:,} elements: {shapes}"
