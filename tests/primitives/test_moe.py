"""MoE SwiGLU: routing against a per-token reference, the load-balancing loss by hand, and its path to training."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from composer.config import ArchConfig
from composer.errors import ConfigError
from composer.model import build_model
from composer.presets import get_preset
from composer.training.parallelize import apply_activation_checkpointing
from primitives.base import InitScheme
from primitives.mlp import SwiGLU, SwiGLUConfig
from primitives.moe import MoEConfig, MoESwiGLU


def make(**overrides) -> MoESwiGLU:
    config = MoEConfig(**{"d_model": 16, "expert_ffn_dim": 24, "n_experts": 4, "top_k": 2, **overrides})
    module = MoESwiGLU(config)
    module.reset_parameters(InitScheme(std=0.2, n_layers=1))
    with torch.no_grad():  # a decisive router, so that routing differs between tokens
        module.router.weight.normal_(std=1.0)
    return module


def expert(module: MoESwiGLU, e: int, x: torch.Tensor) -> torch.Tensor:
    gate, up = F.linear(x, module.w13[e]).chunk(2, dim=-1)
    return F.linear(F.silu(gate) * up, module.w2[e])


def per_token_reference(module: MoESwiGLU, x: torch.Tensor) -> torch.Tensor:
    """One token at a time: softmax router, top-k, (renormalise), weighted sum of the chosen experts."""
    c = module.config
    rows = []
    for token in x.reshape(-1, c.d_model):
        probs = (module.router.weight @ token).softmax(-1)
        weights, chosen = probs.topk(c.top_k)
        if c.norm_topk_prob:
            weights = weights / weights.sum()
        rows.append(sum(w * expert(module, int(e), token) for w, e in zip(weights, chosen)))
    return torch.stack(rows).view_as(x)


def test_output_shape():
    module = make()
    x = torch.randn(3, 5, 16)
    assert module(x).shape == x.shape


@pytest.mark.parametrize("norm_topk_prob, top_k", [(True, 2), (False, 2), (False, 1), (True, 3)])
def test_matches_per_token_reference(norm_topk_prob, top_k):
    module = make(norm_topk_prob=norm_topk_prob, top_k=top_k)
    x = torch.randn(2, 9, 16)
    torch.testing.assert_close(module(x), per_token_reference(module, x), atol=1e-5, rtol=1e-5)


def test_each_token_uses_exactly_its_top_k_experts():
    """Changing the weights of experts a token is not routed to leaves its output unchanged."""
    module = make(n_experts=6, top_k=2)
    x = torch.randn(1, 12, 16)
    with torch.no_grad():
        chosen = module.router(x[0]).topk(2, dim=-1).indices
        base = module(x)[0]
        assert torch.bincount(chosen.flatten(), minlength=6).sum() == 12 * 2
        others = [e for e in range(6) if e not in chosen[0].tolist()]
        module.w2[others] += 1.0
        after = module(x)[0]
    torch.testing.assert_close(after[0], base[0])
    users = [t for t in range(12) if set(chosen[t].tolist()) & set(others)]
    assert users and not torch.allclose(after[users], base[users])


def test_load_balancing_loss_by_hand():
    """3 tokens, 3 experts, top-1 (Switch): aux = coef * n_experts * sum_i f_i * P_i."""
    module = MoESwiGLU(
        MoEConfig(d_model=3, expert_ffn_dim=4, n_experts=3, top_k=1, norm_topk_prob=False, aux_loss_coef=0.1)
    )
    logits = [[2.0, 0.0, 0.0], [1.0, 0.5, 0.0], [0.0, 0.0, 3.0]]
    with torch.no_grad():
        module.router.weight.copy_(torch.eye(3))  # logits = tokens
    module(torch.tensor([logits]))
    probs = [[math.exp(v) / sum(math.exp(u) for u in row) for v in row] for row in logits]
    share = [2 / 3, 0.0, 1 / 3]  # tokens 0 and 1 pick expert 0, token 2 picks expert 2
    mean_prob = [sum(p[i] for p in probs) / 3 for i in range(3)]
    expected = 0.1 * 3 * sum(f * p for f, p in zip(share, mean_prob))
    assert module.aux_loss.item() == pytest.approx(expected, rel=1e-6)


def test_uniform_router_probabilities_give_exactly_the_coefficient():
    """P_i = 1/n makes n * sum_i f_i P_i = sum_i f_i = 1 whatever the (tie-broken) assignment shares are."""
    module = MoESwiGLU(MoEConfig(d_model=8, expert_ffn_dim=8, n_experts=4, top_k=2, aux_loss_coef=0.3))
    with torch.no_grad():
        module.router.weight.zero_()
    module(torch.randn(1, 5, 8))
    assert module.aux_loss.item() == pytest.approx(0.3)


def test_z_loss_by_hand():
    module = MoESwiGLU(
        MoEConfig(d_model=2, expert_ffn_dim=4, n_experts=2, aux_loss_coef=0.0, z_loss_coef=0.5)
    )
    with torch.no_grad():
        module.router.weight.copy_(torch.eye(2))
    module(torch.tensor([[[1.0, 2.0], [0.0, 0.0]]]))
    lse = [math.log(math.exp(1) + math.exp(2)), math.log(2.0)]
    assert module.aux_loss.item() == pytest.approx(0.5 * (lse[0] ** 2 + lse[1] ** 2) / 2, rel=1e-6)


def test_router_gets_gradient_from_the_output_and_from_the_aux_loss():
    module = make()
    x = torch.randn(2, 8, 16)
    (from_output,) = torch.autograd.grad(module(x).square().sum(), module.router.weight)
    module(x)
    (from_aux,) = torch.autograd.grad(module.aux_loss, module.router.weight)
    assert from_output.abs().sum() > 0 and from_aux.abs().sum() > 0


def tiny(pattern: str, **options) -> ArchConfig:
    return get_preset("tiny").arch.with_pattern(pattern).replace(options={"E": options} if options else {})


def test_aux_loss_is_added_to_the_model_loss_and_the_val_loss_is_pure():
    model = build_model(tiny("AEAE"))
    ids = torch.randint(0, 256, (2, 17))
    out = model(ids[:, :-1], targets=ids[:, 1:])
    layers = [model.layers[i].primitive.aux_loss for i in (1, 3)]
    torch.testing.assert_close(out.aux_loss, layers[0] + layers[1])
    torch.testing.assert_close(out.loss, out.lm_loss + out.aux_loss)
    expected = F.cross_entropy(out.logits.flatten(0, 1), ids[:, 1:].flatten())
    torch.testing.assert_close(out.lm_loss, expected)
    assert (
        0.01 <= out.aux_loss.item() < 0.04
    )  # 2 layers x 0.01 x (1 when balanced, at most n_experts / top_k)
    assert model.has_aux_loss


def test_aeae_tiny_model_lowers_the_loss():
    torch.manual_seed(0)
    model = build_model(tiny("AEAE"))
    ids = torch.randint(0, 256, (4, 33))
    optim = torch.optim.AdamW(model.parameter_groups(0.0), lr=3e-3)
    losses = []
    for _ in range(30):
        loss = model(ids[:, :-1], targets=ids[:, 1:]).loss
        optim.zero_grad()
        loss.backward()
        optim.step()
        losses.append(loss.item())
    assert losses[-1] < 0.7 * losses[0], losses


def test_activation_checkpointing_gives_the_same_loss_and_gradients():
    """Recomputation in backward overwrites the stored aux loss but must neither change nor double-count it."""
    ids = torch.randint(0, 256, (2, 17))
    results = []
    for checkpointing in (False, True):
        torch.manual_seed(0)
        model = build_model(tiny("AEAE", z_loss_coef=1e-3)).train()
        if checkpointing:
            apply_activation_checkpointing(model)
        out = model(ids[:, :-1], targets=ids[:, 1:])
        out.loss.backward()
        grads = {name: p.grad.clone() for name, p in model.named_parameters()}
        results.append((out.loss.detach(), out.aux_loss.detach(), grads))
    (loss, aux, grads), (loss_ac, aux_ac, grads_ac) = results
    torch.testing.assert_close(loss_ac, loss, rtol=0, atol=0)
    torch.testing.assert_close(aux_ac, aux, rtol=0, atol=0)
    for name, grad in grads.items():
        torch.testing.assert_close(grads_ac[name], grad, msg=name)


def test_default_expert_width_matches_the_dense_mlps_active_flops():
    arch = get_preset("llama-3.2-1b").arch
    config = MoESwiGLU.config_from_arch(arch.with_pattern("E").widths)
    assert config.expert_ffn_dim == arch.ffn_dim // 2
    dense = SwiGLUConfig(d_model=arch.d_model, ffn_dim=arch.ffn_dim)
    router = arch.d_model * config.n_experts
    assert MoESwiGLU.flops_per_token(config, 8192) == SwiGLU.flops_per_token(dense, 8192) + 6 * router
    assert MoESwiGLU.param_count(config) == 4 * SwiGLU.param_count(dense) + router
    wide = MoESwiGLU.config_from_arch(
        arch.replace(pattern="E", options={"E": {"expert_ffn_dim": arch.ffn_dim}}).widths
    )
    assert wide.expert_ffn_dim == arch.ffn_dim


def test_no_biases_and_stacked_experts():
    module = make()
    assert dict(module.named_parameters()).keys() == {"router.weight", "w13", "w2"}
    assert module.w13.shape == (4, 48, 16) and module.w2.shape == (4, 16, 24)
    assert module.no_weight_decay() == set()


@pytest.mark.parametrize(
    "options, message",
    [
        ({"top_k": 9}, "cannot exceed n_experts"),
        ({"n_experts": 0}, "n_experts must be a positive integer"),
        ({"top_k": 1}, "norm_topk_prob: false"),
        ({"aux_loss_coef": -0.1}, "must be >= 0"),
        ({"capacity": 2}, "unknown option 'capacity'"),
    ],
)
def test_invalid_options_are_one_line_config_errors(options, message):
    with pytest.raises(ConfigError, match=message) as err:
        tiny("EM", **options)
    assert "\n" not in str(err.value)
