"""Gated DeltaNet (``D``): the chunked delta rule against the token-by-token recurrence, the layer against a
step-by-step re-implementation of fla's layer, its config, own initialisation and accounting, and that it learns
in-context recall (which an MLP-only model cannot)."""

from __future__ import annotations

import json

import pytest
import torch
import torch.nn.functional as F

from composer.accounting import analyze
from composer.cli import main
from composer.errors import ConfigError
from composer.model import build_model
from composer.presets import get_preset
from primitives import gated_deltanet
from primitives.attention import GroupedQueryAttention
from primitives.base import InitScheme
from primitives.gated_deltanet import (
    GatedDeltaNet,
    GatedDeltaNetConfig,
    gated_delta_rule_chunked,
    gated_delta_rule_recurrent_reference,
    gated_delta_rule_step,
)
from primitives.registry import REGISTRY

TINY = get_preset("tiny").arch


def rule_inputs(batch=2, seq=13, heads=3, d_k=4, d_v=5, dtype=torch.float64, max_decay=2.0):
    """Random rule inputs as the layer makes them: unit-norm q and k, g <= 0, beta in (0, 1)."""
    return {
        "q": F.normalize(torch.randn(batch, seq, heads, d_k, dtype=dtype), dim=-1),
        "k": F.normalize(torch.randn(batch, seq, heads, d_k, dtype=dtype), dim=-1),
        "v": torch.randn(batch, seq, heads, d_v, dtype=dtype),
        "g": -max_decay * torch.rand(batch, seq, heads, dtype=dtype),
        "beta": torch.rand(batch, seq, heads, dtype=dtype),
    }


def layer(dtype=torch.float32, **options) -> GatedDeltaNet:
    config = GatedDeltaNetConfig(**{"d_model": 16, "n_heads": 2, "head_dim": 4, "chunk_size": 4, **options})
    module = GatedDeltaNet(config).to(dtype)
    module.reset_parameters(InitScheme(std=0.3, n_layers=1))
    return module


# -- the rule -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seq", [1, 7, 16, 37])
@pytest.mark.parametrize("chunk_size", [1, 4, 16, 64])
def test_chunked_rule_equals_recurrence(seq, chunk_size):
    inputs = rule_inputs(seq=seq)
    state = torch.randn(2, 3, 4, 5, dtype=torch.float64)
    expected, expected_state = gated_delta_rule_recurrent_reference(
        **inputs, initial_state=state, return_final_state=True
    )
    o, final_state = gated_delta_rule_chunked(
        **inputs, chunk_size=chunk_size, initial_state=state, return_final_state=True
    )
    torch.testing.assert_close(o, expected, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(final_state, expected_state, rtol=1e-10, atol=1e-10)


def test_the_decoding_step_is_the_recurrence_on_the_state_in_place():
    inputs = rule_inputs(seq=6)
    initial = torch.randn(2, 3, 4, 5, dtype=torch.float64)
    expected, expected_state = gated_delta_rule_recurrent_reference(**inputs, initial_state=initial,
                                                                    return_final_state=True)
    state = initial.clone()
    outputs = [gated_delta_rule_step(*(inputs[name][:, t] for name in ("q", "k", "v", "g", "beta")), state)
               for t in range(6)]
    torch.testing.assert_close(torch.stack(outputs, dim=1), expected, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(state, expected_state, rtol=1e-12, atol=1e-12)


def test_recurrence_is_the_papers_gated_delta_rule():
    """Yang et al. write S_t = S_{t-1} a_t (I - b_t k_t k_t^T) + b_t v_t k_t^T, o_t = S_t q_t with S as [V, K]."""
    inputs = rule_inputs(batch=1, seq=9, heads=2)
    q, k, v, g, beta = inputs.values()
    state = torch.zeros(1, 2, 5, 4, dtype=torch.float64)  # [B, H, V, K]
    eye = torch.eye(4, dtype=torch.float64)
    outputs = []
    for t in range(9):
        alpha, b = g[:, t].exp()[..., None, None], beta[:, t, :, None, None]
        erase = eye - b * k[:, t, :, :, None] * k[:, t, :, None, :]
        state = alpha * state @ erase + b * v[:, t, :, :, None] * k[:, t, :, None, :]
        outputs.append((state @ q[:, t, :, :, None]).squeeze(-1) * 4**-0.5)
    torch.testing.assert_close(
        gated_delta_rule_recurrent_reference(**inputs), torch.stack(outputs, dim=1), rtol=1e-12, atol=1e-12
    )


def test_chunked_rule_carries_state_across_calls():
    """Running a sequence in two calls, handing the state on, equals one call (what generation relies on)."""
    inputs = rule_inputs(seq=20)
    whole = gated_delta_rule_chunked(**inputs, chunk_size=8)
    first, state = gated_delta_rule_chunked(
        **{k: v[:, :11] for k, v in inputs.items()}, chunk_size=8, return_final_state=True
    )
    second = gated_delta_rule_chunked(
        **{k: v[:, 11:] for k, v in inputs.items()}, chunk_size=8, initial_state=state
    )
    torch.testing.assert_close(torch.cat([first, second], dim=1), whole, rtol=1e-10, atol=1e-10)


def test_chunked_rule_in_float32_matches_float64_with_fast_decays():
    """Heads that forget within a few tokens (decays far below float32's range) stay exact and finite."""
    inputs = rule_inputs(seq=150, heads=2, max_decay=8.0)
    expected = gated_delta_rule_recurrent_reference(**inputs)
    o = gated_delta_rule_chunked(**{k: v.float() for k, v in inputs.items()}, chunk_size=64)
    assert o.dtype == torch.float32
    torch.testing.assert_close(o.double(), expected, rtol=1e-4, atol=1e-4)


def test_chunked_rule_gradcheck():
    inputs = rule_inputs(batch=1, seq=6, heads=2, d_k=3, d_v=2)
    inputs["initial_state"] = torch.randn(1, 2, 3, 2, dtype=torch.float64)
    names = list(inputs)
    tensors = [t.requires_grad_() for t in inputs.values()]

    def rule(*args):
        return gated_delta_rule_chunked(**dict(zip(names, args)), chunk_size=4, return_final_state=True)

    assert torch.autograd.gradcheck(rule, tensors)


# -- the layer ------------------------------------------------------------------------------------------------


def fla_style_reference(module: GatedDeltaNet, x: torch.Tensor) -> torch.Tensor:
    """fla's GatedDeltaNet forward written out step by step: separate projections and convolutions, the
    token-by-token rule, fla's l2norm and its normalise-then-gate RMSNorm."""
    c = module.config
    width = c.conv_size

    def short_conv(h, conv):
        out = F.conv1d(F.pad(h.transpose(1, 2), (width - 1, 0)), conv.weight, groups=h.shape[-1])
        return F.silu(out.transpose(1, 2))

    def l2norm(h):
        return h / torch.sqrt(h.square().sum(-1, keepdim=True) + 1e-6)

    q = short_conv(module.q_proj(x), module.q_conv1d).unflatten(-1, (c.n_heads, c.head_dim))
    k = short_conv(module.k_proj(x), module.k_conv1d).unflatten(-1, (c.n_heads, c.head_dim))
    v = short_conv(module.v_proj(x), module.v_conv1d).unflatten(-1, (c.n_heads, c.head_v_dim))
    beta = module.b_proj(x).sigmoid() * (2 if c.allow_neg_eigval else 1)
    g = -module.A_log.exp() * F.softplus(module.a_proj(x) + module.dt_bias)
    o = gated_delta_rule_recurrent_reference(l2norm(q), l2norm(k), v, g, beta)
    gate = module.g_proj(x).unflatten(-1, (c.n_heads, c.head_v_dim))
    o = o * torch.rsqrt(o.square().mean(-1, keepdim=True) + c.norm_eps) * module.o_norm.weight * F.silu(gate)
    return module.o_proj(o.flatten(-2))


@pytest.mark.parametrize("options", [{}, {"allow_neg_eigval": True}, {"expand_v": 1.5}, {"conv_size": 2}])
def test_layer_equals_fla_style_reference(options):
    module = layer(torch.float64, **options)
    x = torch.randn(2, 11, 16, dtype=torch.float64)
    with torch.no_grad():
        torch.testing.assert_close(module(x), fla_style_reference(module, x), rtol=1e-10, atol=1e-10)


def test_layer_gradcheck_over_the_input_and_every_parameter():
    """The whole layer's backward (the joined projections and convolutions, the short convolution's taps, the
    gates, the WY solve's hand-written backward, the gated norm) against finite differences in float64, over two
    chunks: the input's gradient and every parameter's (about 200 numbers, 1 s of one core)."""
    torch.manual_seed(0)
    module = layer(torch.float64, d_model=6, head_dim=2, expand_v=1, conv_size=2, chunk_size=3,
                   allow_neg_eigval=True)
    names = [name for name, _ in module.named_parameters()]
    params = [p.detach().clone().requires_grad_() for p in module.parameters()]
    x = torch.randn(1, 5, 6, dtype=torch.float64, requires_grad=True)

    def run(x, *weights):
        return torch.func.functional_call(module, dict(zip(names, weights, strict=True)), (x,))

    assert torch.autograd.gradcheck(run, (x, *params))


def test_the_cpu_path_at_a_realistic_length_matches_the_reference_values_and_gradients(parity_in_float64):
    """What the CUDA test checks of fla's kernel, on the CPU path: 200 tokens (four chunks of 64, the last padded),
    float32, against the step-by-step reference in float64 (same weights): the output and the gradients of the input
    and of every parameter."""
    torch.manual_seed(0)
    module = GatedDeltaNet(GatedDeltaNetConfig(d_model=64, n_heads=2, head_dim=16, backend="torch"))
    module.reset_parameters(InitScheme(std=0.1, n_layers=2))
    parity_in_float64(module, fla_style_reference, torch.randn(2, 200, 64))


def tensors_kept(module: torch.nn.Module) -> list[str]:
    """Tensors a module and its submodules hold outside their parameters and buffers (attributes, and tensors in
    dicts, lists and tuples among them)."""
    kept = []
    for prefix, sub in module.named_modules():
        for name, value in vars(sub).items():
            if name in ("_parameters", "_buffers", "_modules"):
                continue
            stack = [value]
            while stack:
                item = stack.pop()
                if isinstance(item, torch.Tensor):
                    kept.append(f"{prefix}.{name}" if prefix else name)
                elif isinstance(item, dict):
                    stack += item.values()
                elif isinstance(item, (list, tuple)):
                    stack += item
    return kept


def test_inference_keeps_no_copy_of_the_weights():
    """The projections and convolutions are joined at each call: after no-grad calls (a forward, a prompt and a
    decoding step) the layer holds nothing beside its parameters (a join kept between calls held three quarters of
    its weights a second time)."""
    module = layer().eval()
    x = torch.randn(1, 5, 16)
    cache = module.init_cache(1, 8)
    with torch.no_grad():
        module(x)
        module.forward_cached(x[:, :4], cache, start_pos=0)
        module.decode_step(x[:, 4:], cache, torch.tensor(4))
    assert tensors_kept(module) == []


def test_a_weight_changed_in_place_is_what_the_next_no_grad_call_uses():
    """An optimizer step or ``load_state_dict`` changes a weight in place (same tensor and data pointer, a new
    version): the next inference call computes with the new values, as a fresh layer with them does."""
    module = layer().eval()
    x = torch.randn(1, 5, 16)
    with torch.no_grad():
        module(x)
        for weight in (module.k_proj.weight, module.v_conv1d.weight):
            pointer = weight.data_ptr()
            weight.mul_(1.5)
            assert weight.data_ptr() == pointer
            fresh = layer()
            fresh.load_state_dict(module.state_dict())
            torch.testing.assert_close(module(x), fresh(x), rtol=0, atol=0)


def test_layer_shape_dtype_and_causality_across_chunks():
    module = layer().eval()
    x = torch.randn(2, 19, 16)
    changed = x.clone()
    changed[:, 9:] = torch.randn(2, 10, 16)  # position 9 is inside the third chunk of 4
    with torch.no_grad():
        y, y_changed = module(x), module(changed)
        assert module.to(torch.bfloat16)(x.bfloat16()).dtype == torch.bfloat16
    assert y.shape == x.shape
    torch.testing.assert_close(y[:, :9], y_changed[:, :9])
    assert not torch.allclose(y[:, 9:], y_changed[:, 9:])


def test_without_short_conv():
    module = layer(use_short_conv=False)
    assert not any("conv" in name for name, _ in module.named_parameters())
    assert GatedDeltaNet.param_count(module.config) == sum(p.numel() for p in module.parameters())
    assert module(torch.randn(1, 6, 16)).shape == (1, 6, 16)


def test_cuda_backend_without_kernel_is_a_clear_error():
    module = layer(backend="cuda")
    with pytest.raises(RuntimeError, match="backend 'cuda' needs CUDA tensors"):
        module(torch.randn(1, 4, 16))


class _CudaProbe:
    """What ``_use_kernel`` reads of its input (``is_cuda``, ``device``): the dispatch decided on a CPU machine."""

    is_cuda = True
    device = "cuda:0"


def test_a_refused_fla_backward_trains_on_the_torch_path(monkeypatch):
    """fla raises in *backward* on Hopper with Triton 3.4-3.7.0 (seen on an H200): training must not pick it."""
    monkeypatch.setattr(gated_deltanet, "_fla_chunk_gated_delta_rule", object())
    monkeypatch.setattr(gated_deltanet, "_FLA_BACKWARD_REFUSAL", "Triton 3.6.0 on Hopper")
    monkeypatch.setattr(gated_deltanet, "_WARNED", set())
    auto, strict = layer(backend="auto"), layer(backend="cuda")
    with pytest.warns(RuntimeWarning, match="PyTorch path.*Triton 3.6.0 on Hopper"):
        assert auto._use_kernel(_CudaProbe()) is False
    with torch.no_grad():  # the forward alone is fine: generation and evaluation keep the kernel
        assert auto._use_kernel(_CudaProbe()) is True
        assert strict._use_kernel(_CudaProbe()) is True
    with pytest.raises(RuntimeError, match="backend 'cuda' cannot train here: Triton 3.6.0 on Hopper"):
        strict._use_kernel(_CudaProbe())
    monkeypatch.setattr(gated_deltanet, "_FLA_BACKWARD_REFUSAL", None)
    assert auto._use_kernel(_CudaProbe()) is True


needs_fla = pytest.mark.skipif(
    not torch.cuda.is_available() or gated_deltanet._fla_chunk_gated_delta_rule is None,
    reason="needs CUDA and fla (pip install 'composer-hnas[cuda]')",
)


def _kernel_and_reference_pair():
    torch.manual_seed(0)
    fast = GatedDeltaNet(GatedDeltaNetConfig(d_model=128, n_heads=2, head_dim=64, backend="cuda")).cuda()
    reference = GatedDeltaNet(
        GatedDeltaNetConfig(d_model=128, n_heads=2, head_dim=64, backend="torch")
    ).cuda()
    reference.load_state_dict(fast.state_dict())
    return fast, reference, torch.randn(2, 200, 128, device="cuda")


@needs_fla
def test_fla_kernel_forward_matches_torch_path():
    """The same weights through fla's Triton kernel and through the pure-PyTorch chunked rule, in float32."""
    fast, reference, x = _kernel_and_reference_pair()
    with torch.no_grad():
        torch.testing.assert_close(fast(x), reference(x), rtol=2e-3, atol=2e-3)


@needs_fla
@pytest.mark.skipif(bool(gated_deltanet._FLA_BACKWARD_REFUSAL), reason=str(gated_deltanet._FLA_BACKWARD_REFUSAL))
def test_fla_kernel_gradients_match_torch_path():
    fast, reference, x = _kernel_and_reference_pair()
    outputs, grads = [], []
    for module in (fast, reference):
        y = module(x)
        y.square().mean().backward()
        outputs.append(y)
        grads.append({n: p.grad for n, p in module.named_parameters()})
    torch.testing.assert_close(outputs[0], outputs[1], rtol=2e-3, atol=2e-3)
    for name, grad in grads[1].items():
        torch.testing.assert_close(grads[0][name], grad, rtol=1e-2, atol=1e-3, msg=name)


# -- config ---------------------------------------------------------------------------------------------------


def test_defaults_match_the_attention_layer_budget():
    for preset in ("tiny", "search-1m", "llama-350m", "llama-3.2-1b", "llama-3.2-3b", "llama-3.1-8b"):
        arch = get_preset(preset).arch
        config = GatedDeltaNetConfig.from_arch(arch)
        assert (config.head_dim, config.head_v_dim) == (arch.head_dim, 2 * arch.head_dim)
        attention = GroupedQueryAttention.param_count(REGISTRY.get("A").config_from_arch(arch.widths))
        one_head = arch.d_model * (6 * arch.head_dim + 2)
        params = GatedDeltaNet.param_count(config)
        assert attention <= params < attention + one_head + 4 * config.conv_dim, preset
    assert GatedDeltaNetConfig.from_arch(TINY).n_heads == 2
    assert GatedDeltaNetConfig.from_arch(get_preset("llama-3.2-1b").arch).n_heads == 10


def test_options_come_from_arch():
    arch = TINY.replace(
        pattern="DM", options={"D": {"n_heads": 3, "head_dim": 8, "expand_v": 1, "chunk_size": 16}}
    )
    config = arch.primitive_configs()["D"]
    assert (config.n_heads, config.head_dim, config.head_v_dim, config.chunk_size) == (3, 8, 8, 16)
    assert config.d_model == 64 and config.norm_eps == TINY.norm_eps


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"heads": 2}, "unknown option"),
        ({"n_heads": 0}, "n_heads must be a positive integer"),
        ({"head_dim": 2.5}, "head_dim must be a positive integer"),
        ({"expand_v": 0.3}, "expand_v \\* head_dim must be a positive integer"),
        ({"expand_v": -1}, "expand_v must be a positive number"),
        ({"conv_size": 0}, "conv_size must be a positive integer"),
        ({"use_short_conv": "yes"}, "use_short_conv must be true or false"),
        ({"backend": "triton"}, "unknown gated_deltanet backend"),
    ],
)
def test_bad_options_are_one_line_config_errors(options, message):
    with pytest.raises(ConfigError, match=message):
        TINY.replace(pattern="DM", options={"D": options})


# -- parameters, initialisation -------------------------------------------------------------------------------


@pytest.mark.parametrize("options", [{}, {"expand_v": 1.5, "conv_size": 3}, {"use_short_conv": False}])
def test_param_count_equals_numel(options):
    module = layer(**options)
    assert GatedDeltaNet.param_count(module.config) == sum(p.numel() for p in module.parameters())


def test_init_is_its_own_and_no_weight_decay_names_exist():
    module = layer()
    module.reset_parameters(InitScheme(std=0.02, n_layers=16))
    names = dict(module.named_parameters())
    assert module.no_weight_decay() == {"A_log", "dt_bias", "o_norm.weight"} <= set(names)
    assert ((module.A_log.exp() >= 1) & (module.A_log.exp() <= 16)).all()
    dt = F.softplus(module.dt_bias)
    assert ((dt >= 1e-3 * (1 - 1e-5)) & (dt <= 0.1 * (1 + 1e-5))).all()
    assert module.o_proj.weight.std().item() == pytest.approx(0.02 / 4, rel=0.3)
    assert module.q_proj.weight.std().item() == pytest.approx(0.02, rel=0.3)
    assert torch.equal(module.o_norm.weight, torch.ones(8))


def test_meta_build_to_empty_and_init_gives_finite_weights():
    arch = TINY.with_pattern("DMDM")
    model = build_model(arch, device="meta")
    model.to_empty(device="cpu")
    model.init_weights()
    for name, param in model.named_parameters():
        assert torch.isfinite(param).all(), name
    assert (model.layers[0].primitive.A_log.exp() >= 1).all()
    assert {"layers.0.primitive.A_log", "layers.2.primitive.dt_bias"} <= model.no_weight_decay()


# -- accounting -----------------------------------------------------------------------------------------------


def test_flops_and_cache_formulas():
    c = GatedDeltaNetConfig(d_model=64, n_heads=2, head_dim=16)  # K 16, V 32, conv 4
    matmul = 64 * (2 * 32 + 2 * 64 + 2 * 2) + 64 * 64 + (32 + 32 + 64) * 4
    assert GatedDeltaNet.param_count(c) == matmul + 2 * 2 + 32
    rule = 2 * (64 * (3 * 16 + 2 * 32) + 6 * 16 * 32)
    assert GatedDeltaNet.flops_per_token(c, 4096) == 6 * matmul + 3 * rule
    short = 2 * (10 * (3 * 16 + 2 * 32) + 6 * 16 * 32)  # chunks never longer than the sequence
    assert GatedDeltaNet.flops_per_token(c, 10) == 6 * matmul + 3 * short
    cache = GatedDeltaNet.inference_cache(c, dtype_bytes=2)
    assert cache == type(cache)(fixed_bytes=(2 * 16 * 32 + 3 * 128) * 2)
    assert cache.bytes_at(1) == cache.bytes_at(1_000_000)


def test_info_reports_a_fixed_state_and_no_kv_cache(capsys):
    assert main(["info", "DMDM", "--preset", "tiny", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    config = GatedDeltaNetConfig.from_arch(TINY)
    assert info["counts"] == {"D": 2, "M": 2}
    assert info["kv_cache_bytes_per_token"] == 0
    assert info["state_bytes_per_sequence"] == 2 * GatedDeltaNet.inference_cache(config, 2).fixed_bytes > 0
    assert info["non_embedding_params"] == analyze(TINY.with_pattern("DMDM")).non_embedding_params
    model = build_model(TINY.with_pattern("DMDM"))
    assert (
        info["non_embedding_params"]
        == sum(p.numel() for p in model.parameters()) - model.tok_embeddings.weight.numel()
    )


# -- it learns what it is for ---------------------------------------------------------------------------------


@pytest.mark.slow
def test_deltanet_learns_in_context_recall_where_an_mlp_cannot(mlp_only_recall):
    """On MAD's in-context recall (cpu budget, search-1m widths) a hybrid with D layers is far above chance and
    above MLP-only. Measured seeds 0-2: DMDM 0.66-0.73 (AMAM 0.35-0.38), MMMM 0.12-0.14, chance 0.125. ~20 s."""
    from search.mad import BUDGETS, chance_accuracy, evaluate_pattern

    budget = BUDGETS["cpu"]
    recall = [task for task in budget.tasks if task.name == "in-context-recall"]
    threads = torch.get_num_threads()
    # One thread: these small tensors gain nothing from two, and OpenMP's barriers make many small ops up to 10x
    # slower when the cores are shared with other processes (measured 168 s instead of 12 s).
    torch.set_num_threads(1)
    try:
        hybrid = evaluate_pattern("DMDM", widths="search-1m", tasks=recall, budget=budget, seed=0)
    finally:
        torch.set_num_threads(threads)
    chance, mlp_only = chance_accuracy(recall[0]), mlp_only_recall  # MMMM, trained once for the A, S, D tests
    assert hybrid.score > 0.45, hybrid.accuracies
    assert mlp_only.score < 0.18, mlp_only.accuracies
    assert hybrid.score > 3 * chance > mlp_only.score
