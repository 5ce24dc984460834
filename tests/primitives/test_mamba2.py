"""Mamba-2 (``S``): the chunked SSD scan against the token-by-token recurrence, the block's contract, its own
initialisation, its accounting, and that it learns in-context recall (which an MLP-only model cannot)."""

from __future__ import annotations

import math

import pytest
import torch

from composer.accounting import analyze
from composer.errors import ConfigError
from composer.model import build_model
from composer.presets import get_preset
from primitives import mamba2
from primitives.base import InitScheme
from primitives.mamba2 import Mamba2, Mamba2Config, ssd_chunked, ssd_recurrent_reference, ssd_step

TINY = get_preset("tiny").arch


def ssd_inputs(batch=2, seq=13, heads=4, head_dim=3, groups=2, d_state=5, dtype=torch.float64):
    """Random scan inputs with decays in the range trained models use (dt in (0, 1), A in [-4, 0))."""
    return {
        "x": torch.randn(batch, seq, heads, head_dim, dtype=dtype),
        "dt": torch.rand(batch, seq, heads, dtype=dtype),
        "A": -4 * torch.rand(heads, dtype=dtype) - 1e-3,
        "B": torch.randn(batch, seq, groups, d_state, dtype=dtype),
        "C": torch.randn(batch, seq, groups, d_state, dtype=dtype),
        "D": torch.randn(heads, dtype=dtype),
    }


def block(dtype=torch.float32, **options) -> Mamba2:
    config = Mamba2Config(**{"d_model": 16, "d_state": 8, "head_dim": 8, "chunk_size": 4, **options})
    module = Mamba2(config).to(dtype)
    module.reset_parameters(InitScheme(std=0.2, n_layers=1))
    return module


# -- the scan ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seq", [1, 7, 16, 37])
@pytest.mark.parametrize("chunk_size", [1, 4, 16, 64])
def test_chunked_scan_equals_recurrence(seq, chunk_size):
    inputs = ssd_inputs(seq=seq)
    state = torch.randn(2, 4, 3, 5, dtype=torch.float64)
    expected, expected_state = ssd_recurrent_reference(**inputs, initial_state=state, return_final_state=True)
    y, final_state = ssd_chunked(
        **inputs, chunk_size=chunk_size, initial_state=state, return_final_state=True
    )
    torch.testing.assert_close(y, expected, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(final_state, expected_state, rtol=1e-10, atol=1e-10)
    # without a state in or out (the one-chunk shortcut when seq <= chunk_size)
    expected = ssd_recurrent_reference(**inputs)
    torch.testing.assert_close(ssd_chunked(**inputs, chunk_size=chunk_size), expected, rtol=1e-10, atol=1e-10)


def test_the_cpu_scan_in_slices_of_the_batch_equals_the_recurrence(monkeypatch):
    monkeypatch.setattr(mamba2, "_CPU_SCAN_BLOCK_BYTES", 1)  # one sequence per slice
    inputs = ssd_inputs(batch=3, seq=11)
    state = torch.randn(3, 4, 3, 5, dtype=torch.float64)
    expected, expected_state = ssd_recurrent_reference(**inputs, initial_state=state, return_final_state=True)
    y, final_state = ssd_chunked(**inputs, chunk_size=4, initial_state=state, return_final_state=True)
    torch.testing.assert_close(y, expected, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(final_state, expected_state, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(ssd_chunked(**inputs, chunk_size=4), ssd_recurrent_reference(**inputs))


def test_the_decoding_step_is_the_recurrence_on_the_state_in_place():
    inputs = ssd_inputs(seq=6)
    expected, expected_state = ssd_recurrent_reference(**inputs, return_final_state=True)
    state = torch.zeros(2, 4, 3, 5, dtype=torch.float64)
    ys = [ssd_step(inputs["x"][:, t], inputs["dt"][:, t], inputs["A"], inputs["B"][:, t], inputs["C"][:, t],
                   inputs["D"], state) for t in range(6)]
    torch.testing.assert_close(torch.stack(ys, dim=1), expected, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(state, expected_state, rtol=1e-12, atol=1e-12)


def test_chunked_scan_carries_state_across_calls():
    """Scanning a sequence in two calls, passing the state on, equals one call (what generation relies on)."""
    inputs = ssd_inputs(seq=20)
    whole = ssd_chunked(**inputs, chunk_size=8)
    first = {k: v[:, :11] if k not in ("A", "D") else v for k, v in inputs.items()}
    second = {k: v[:, 11:] if k not in ("A", "D") else v for k, v in inputs.items()}
    y1, state = ssd_chunked(**first, chunk_size=8, return_final_state=True)
    y2 = ssd_chunked(**second, chunk_size=8, initial_state=state)
    torch.testing.assert_close(torch.cat([y1, y2], dim=1), whole, rtol=1e-10, atol=1e-10)


def test_chunked_scan_in_float32_matches_float64():
    inputs = ssd_inputs(seq=150, heads=2, groups=1)
    expected = ssd_chunked(**inputs, chunk_size=64)
    y = ssd_chunked(**{k: v.float() for k, v in inputs.items()}, chunk_size=64)
    assert y.dtype == torch.float32
    torch.testing.assert_close(y.double(), expected, rtol=1e-4, atol=1e-4)


def scan_of(inputs: dict[str, torch.Tensor], **kwargs):
    """``ssd_chunked`` as a function of ``inputs``' tensors in order (what gradcheck perturbs)."""
    names = list(inputs)
    return lambda *tensors: ssd_chunked(**dict(zip(names, tensors, strict=True)), **kwargs)


def test_scan_gradcheck():
    inputs = ssd_inputs(batch=1, seq=6, heads=2, head_dim=2, groups=1, d_state=3)
    tensors = [t.requires_grad_() for t in inputs.values()]
    assert torch.autograd.gradcheck(scan_of(inputs, chunk_size=4), tensors)


@pytest.mark.parametrize("heads_per_group", [1, 3], ids=["n_groups-equals-n_heads", "grouped"])
def test_decayed_scores_gradcheck(heads_per_group):
    """The SSD scores' hand-written backward (``_DecayedScores``) against finite differences in both of its
    branches: one head per B/C group (``C B^T``'s gradient is that head's) and several heads sharing a group's
    ``C B^T`` (its gradient summed over them). Inputs as the scan makes them: ``[batch, groups, 1, chunks, q, q]``
    scores, decreasing cumulative log decays ``[batch, groups, heads_per_group, chunks, q]``."""
    cb = torch.randn(1, 2, 1, 2, 3, 3, dtype=torch.float64, requires_grad=True)
    a_cum = (-2 * torch.rand(1, 2, heads_per_group, 2, 3, dtype=torch.float64)).cumsum(-1).requires_grad_()
    scores = mamba2._DecayedScores.apply(cb, a_cum)
    torch.testing.assert_close(scores, cb * mamba2._intra_chunk_decay(a_cum), rtol=0, atol=0)
    assert torch.autograd.gradcheck(mamba2._DecayedScores.apply, (cb, a_cum))


@pytest.mark.parametrize("groups", [2, 1], ids=["n_groups-equals-n_heads", "grouped"])
def test_scan_gradcheck_from_an_initial_state_over_several_chunks(groups):
    """Three chunks of 4 (the last padded by 3), entered with a state: the initial state's gradient passes through
    every chunk-to-chunk step (it decays through each chunk and is read by every position), and the final state's
    gradient flows back into every input."""
    inputs = ssd_inputs(batch=1, seq=9, heads=2, head_dim=2, groups=groups, d_state=2)
    inputs["initial_state"] = torch.randn(1, 2, 2, 2, dtype=torch.float64)
    tensors = [t.requires_grad_() for t in inputs.values()]
    assert torch.autograd.gradcheck(scan_of(inputs, chunk_size=4, return_final_state=True), tensors)


def test_scan_gradcheck_in_slices_of_the_batch(monkeypatch):
    """The CPU runs the scan a slice of the batch at a time (``_CPU_SCAN_BLOCK_BYTES``); under autograd the slices'
    gradients must reach each sequence's inputs and add up on the shared ``A`` and ``D``."""
    monkeypatch.setattr(mamba2, "_CPU_SCAN_BLOCK_BYTES", 1)  # one sequence per slice
    inputs = ssd_inputs(batch=3, seq=5, heads=2, head_dim=1, groups=1, d_state=2)
    inputs["initial_state"] = torch.randn(3, 2, 1, 2, dtype=torch.float64)
    assert mamba2.cpu_scan_slices(3, 5, 2, 4, torch.float64) == 3
    tensors = [t.requires_grad_() for t in inputs.values()]
    assert torch.autograd.gradcheck(scan_of(inputs, chunk_size=4, return_final_state=True), tensors)


def test_block_gradcheck():
    module = block(torch.float64, d_model=8, d_state=4, head_dim=4, expand=1)
    x = torch.randn(1, 5, 8, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(module, (x,))


# -- the block -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seq", [1, 5, 9])
def test_shape_preserved_and_causal(seq):
    module = block(n_groups=2).eval()
    x = torch.randn(3, seq, 16)
    y = module(x)
    assert y.shape == x.shape and torch.isfinite(y).all()
    cut = seq // 2
    changed = x.clone()
    changed[:, cut:] = torch.randn_like(changed[:, cut:])
    with torch.no_grad():
        torch.testing.assert_close(module(changed)[:, :cut], y[:, :cut].detach())


def test_block_output_does_not_depend_on_chunk_size():
    x = torch.randn(2, 19, 16, dtype=torch.float64)
    torch.manual_seed(3)
    reference = block(torch.float64, chunk_size=64)
    for chunk_size in (1, 4, 8):
        torch.manual_seed(3)
        module = block(torch.float64, chunk_size=chunk_size)
        torch.testing.assert_close(module(x), reference(x), rtol=1e-10, atol=1e-10)


def unfused_block(module: Mamba2, u: torch.Tensor) -> torch.Tensor:
    """The reference Mamba-2 block recomputed step by step from ``module``'s own parameters: separate ops, a plain
    ``conv1d`` and the token-by-token recurrence."""
    c = module.config
    seq = u.shape[1]
    z, xbc, dt = module.in_proj(u).split([c.d_inner, c.conv_dim, c.n_heads], dim=-1)
    conv = torch.nn.functional.conv1d(
        xbc.transpose(1, 2), module.conv1d.weight, module.conv1d.bias, padding=c.d_conv - 1, groups=c.conv_dim
    )[..., :seq]
    xbc = torch.nn.functional.silu(conv.transpose(1, 2))
    x, B, C = xbc.split([c.d_inner, c.n_groups * c.d_state, c.n_groups * c.d_state], dim=-1)
    y = ssd_recurrent_reference(
        x.unflatten(-1, (c.n_heads, c.head_dim)),
        torch.nn.functional.softplus(dt + module.dt_bias),
        -torch.exp(module.A_log),
        B.unflatten(-1, (c.n_groups, c.d_state)),
        C.unflatten(-1, (c.n_groups, c.d_state)),
        module.D,
    ).flatten(-2)
    gated = (y * torch.nn.functional.silu(z)).unflatten(-1, (c.n_groups, -1))
    normed = gated / torch.sqrt(gated.square().mean(-1, keepdim=True) + c.norm_eps)
    return module.out_proj(normed.flatten(-2) * module.norm.weight)


def test_block_matches_an_unfused_reimplementation():
    """The layer is the reference Mamba-2 block: recompute it step by step from its own parameters."""
    module = block(torch.float64, n_groups=2)
    u = torch.randn(2, 9, 16, dtype=torch.float64)
    torch.testing.assert_close(module(u), unfused_block(module, u), rtol=1e-10, atol=1e-10)


def test_the_cpu_path_at_a_realistic_length_matches_the_reference_values_and_gradients(parity_in_float64):
    """What the CUDA test checks of the kernels, on the CPU path: 200 tokens (four chunks of 64, the last padded),
    a batch of 4 that the scan and the short convolution each run in two slices, float32, against the unfused
    block in float64 (same weights): the output and the gradients of the input and of every parameter."""
    torch.manual_seed(0)
    module = Mamba2(Mamba2Config(d_model=64, d_state=16, head_dim=16, n_groups=2, backend="torch"))
    module.reset_parameters(InitScheme(std=0.1, n_layers=2))
    c = module.config
    assert mamba2.cpu_scan_slices(4, 200, c.n_heads, c.chunk_size) == 2
    assert mamba2.conv_batch_slices(4, 200, c.conv_dim, 4) == 2
    parity_in_float64(module, unfused_block, torch.randn(4, 200, 64))


def test_param_count_and_no_weight_decay_names():
    module = block(n_groups=2)
    names = dict(module.named_parameters())
    assert Mamba2.param_count(module.config) == sum(p.numel() for p in names.values())
    assert module.no_weight_decay() == {"A_log", "D", "dt_bias", "conv1d.bias", "norm.weight"}
    assert module.no_weight_decay() <= set(names)
    # and the model-level optimiser groups pick them up
    model = build_model(TINY.with_pattern("SM"))
    skip = model.no_weight_decay()
    assert {
        "layers.0.primitive.A_log",
        "layers.0.primitive.dt_bias",
        "layers.0.primitive.norm.weight",
    } <= skip


def test_reset_parameters_after_meta_build_and_to_empty():
    arch = TINY.with_pattern("SMS")
    model = build_model(arch, device="meta")
    model.to_empty(device="cpu")
    model.init_weights()
    config = Mamba2.config_from_arch(arch.widths)
    for layer in (model.layers[0], model.layers[2]):
        s = layer.primitive
        for name, param in s.named_parameters():
            assert torch.isfinite(param).all(), name
        dt = torch.nn.functional.softplus(s.dt_bias)
        assert ((dt >= config.dt_min * (1 - 1e-5)) & (dt <= config.dt_max * (1 + 1e-5))).all(), dt
        A = torch.exp(s.A_log)
        assert ((A >= 1 - 1e-5) & (A <= 16 + 1e-5)).all(), A
        torch.testing.assert_close(s.D, torch.ones_like(s.D))
        torch.testing.assert_close(s.norm.weight, torch.ones_like(s.norm.weight))
        assert s.out_proj.weight.std().item() == pytest.approx(arch.init_std / math.sqrt(3), rel=0.1)
        assert s.in_proj.weight.std().item() == pytest.approx(arch.init_std, rel=0.1)


def test_dt_floor_applies():
    module = block(dt_min=1e-6, dt_max=2e-6, dt_init_floor=1e-4)
    torch.testing.assert_close(
        torch.nn.functional.softplus(module.dt_bias), torch.full_like(module.dt_bias, 1e-4), rtol=1e-4, atol=0
    )


# -- config --------------------------------------------------------------------------------------------------


def test_head_dim_defaults_to_the_largest_divisor_up_to_64():
    assert Mamba2Config(d_model=2048).head_dim == 64
    assert Mamba2Config(d_model=64).head_dim == 64  # d_inner 128: 2 heads
    assert Mamba2Config(d_model=24).head_dim == 48  # d_inner 48
    assert Mamba2Config(d_model=40).head_dim == 40  # d_inner 80: largest divisor <= 64
    assert Mamba2Config(d_model=64, head_dim=16).n_heads == 8


@pytest.mark.parametrize(
    "options, message",
    [
        ({"d_state": 0}, "d_state must be a positive integer"),
        ({"head_dim": 48}, "must divide d_inner"),
        ({"head_dim": 32, "n_groups": 3}, "n_groups"),
        ({"dt_min": 0.2}, "dt_min <= dt_max"),
        ({"A_init_range": (0, 16)}, "0 < low <= high"),
        ({"backend": "triton"}, "unknown mamba2 backend"),
        ({"d_stat": 16}, "unknown option"),
    ],
)
def test_bad_options_give_a_config_error(options, message):
    with pytest.raises(ConfigError, match=message):
        TINY.replace(pattern="SM", options={"S": options})


def test_options_reach_the_layer():
    arch = TINY.replace(pattern="SM", options={"S": {"d_state": 16, "expand": 1, "A_init_range": [1, 2]}})
    model = build_model(arch)
    config = model.layers[0].primitive.config
    assert (config.d_state, config.d_inner, config.A_init_range) == (16, 64, (1.0, 2.0))


def test_cuda_backend_refuses_cpu_with_a_clear_message():
    module = block(backend="cuda")
    with pytest.raises(RuntimeError, match="backend 'auto'"):
        module(torch.randn(1, 4, 16))


# -- accounting ----------------------------------------------------------------------------------------------


def test_accounting_formulas():
    c = Mamba2Config(d_model=2048)  # Mamba-2 at Llama-3.2-1B width: d_inner 4096, 64 heads of 64, state 64
    assert (c.d_inner, c.n_heads, c.conv_dim, c.in_proj_dim) == (4096, 64, 4224, 8384)
    params = 2048 * 8384 + 4224 * 5 + 3 * 64 + 4096 + 4096 * 2048
    assert Mamba2.param_count(c) == params
    matmul = 2048 * 8384 + 4096 * 2048 + 4224 * 4
    ssd = 64 * (64 + 4096) + 4 * 64 * 64 * 64
    assert Mamba2.flops_per_token(c, 8192) == 6 * matmul + 3 * ssd
    # a sequence shorter than a chunk only pays for its own length inside the chunk
    assert Mamba2.flops_per_token(c, 16) == 6 * matmul + 3 * (16 * (64 + 4096) + 4 * 64**3)
    cache = Mamba2.inference_cache(c, dtype_bytes=2)
    assert cache.bytes_per_token == 0 and cache.window is None
    assert cache.fixed_bytes == 2 * (64 * 64 * 64 + 3 * 4224)
    assert cache.bytes_at(1) == cache.bytes_at(100_000)


def test_arch_stats_report_state_bytes():
    stats = analyze(TINY.with_pattern("SMSM"))
    c = Mamba2.config_from_arch(TINY.widths)
    assert stats.counts == {"S": 2, "M": 2}
    assert stats.kv_cache_bytes_per_token == 0
    assert stats.state_bytes_per_sequence == 2 * Mamba2.inference_cache(c, 2).fixed_bytes > 0
    model = build_model(TINY.with_pattern("SMSM"))
    assert stats.params == sum(p.numel() for p in model.parameters())


# -- learning ------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_mamba_learns_in_context_recall_where_an_mlp_cannot(mlp_only_recall):
    """On MAD's in-context recall (cpu budget, search-1m widths) a hybrid with S layers is well above chance
    and the MLP-only pattern. Measured, seed 0: SMSM 0.352, MMMM 0.122, chance 0.125, ~25 s on 2 CPU cores."""
    from search.mad import BUDGETS, chance_accuracy, evaluate_pattern

    budget = BUDGETS["cpu"]
    recall = [task for task in budget.tasks if task.name == "in-context-recall"]
    hybrid = evaluate_pattern("SMSM", widths="search-1m", tasks=recall, budget=budget, seed=0)
    mlp_only = mlp_only_recall  # MMMM, trained once for the A, S and D learning tests (tests/conftest.py)
    chance = chance_accuracy(recall[0])
    assert hybrid.score > 2 * chance, hybrid.accuracies
    assert hybrid.score > mlp_only.score + 0.1, (hybrid.accuracies, mlp_only.accuracies)


# -- CUDA kernels --------------------------------------------------------------------------------------------


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.skipif(
    mamba2._ssd_kernel is None or mamba2._gated_rmsnorm_kernel is None,
    reason="needs mamba-ssm's Triton kernels (the cuda extra, or the build of benchmarks/gpu_wheels.sh)",
)
def test_cuda_kernels_match_the_torch_path():
    """mamba_ssm's Triton SSD scan and gated RMSNorm, and causal_conv1d's convolution where that imports,
    against the PyTorch path: forward and every gradient. Without causal-conv1d the convolution runs in
    PyTorch on both sides and the SSD and norm kernels are still compared (the GPU machine's mamba-ssm comes
    from benchmarks/gpu_wheels.sh, without compiled extensions, loaded by primitives/mamba_ssm_triton.py)."""
    torch.manual_seed(0)
    config = Mamba2Config(d_model=256, d_state=64, n_groups=2)
    kernel = Mamba2(config).cuda()
    reference = Mamba2(Mamba2Config(d_model=256, d_state=64, n_groups=2, backend="torch")).cuda()
    reference.load_state_dict(kernel.state_dict())
    x = torch.randn(2, 200, 256, device="cuda", requires_grad=True)
    assert kernel._kernels(x) == {"ssd": True, "norm": True, "conv": mamba2._conv_kernel is not None}
    assert not any(reference._kernels(x).values())
    y, y_ref = kernel(x), reference(x)
    torch.testing.assert_close(y, y_ref, rtol=2e-3, atol=2e-3)
    grad = torch.randn_like(y)
    names = [name for name, _ in kernel.named_parameters()]
    grads = torch.autograd.grad(y, [x, *kernel.parameters()], grad)
    grads_ref = torch.autograd.grad(y_ref, [x, *reference.parameters()], grad)
    for name, g, g_ref in zip(["input", *names], grads, grads_ref):
        torch.testing.assert_close(g, g_ref, rtol=1e-2, atol=1e-2, msg=name)
