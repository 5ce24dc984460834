"""Every registered primitive honours the contract in primitives/base.py."""

from __future__ import annotations

import pytest
import torch

from composer.model import build_model
from composer.presets import get_preset
from primitives.base import InitScheme, Primitive
from primitives.registry import REGISTRY

# every primitive, and parallel layers (primitives/parallel.py): attention, SWA beside each state-space mixer, two
# state-space mixers, and attention beside an MoE (whose auxiliary loss must pass through)
PARALLEL = ["[AS]", "[WS]", "[AD]", "[SD]", "[AE]"]
SYMBOLS = list(REGISTRY.symbols) + PARALLEL


def make(symbol: str) -> Primitive:
    cls = REGISTRY.get(symbol)
    arch = get_preset("tiny").arch.with_pattern(symbol)
    return cls(cls.config_from_arch(arch.widths))


@pytest.mark.parametrize("symbol", SYMBOLS)
def test_shape_backward_no_nan(symbol):
    primitive = make(symbol)
    primitive.reset_parameters(InitScheme(std=0.02, n_layers=4))
    x = torch.randn(3, 17, primitive.config.d_model, requires_grad=True)
    y = primitive(x)
    assert y.shape == x.shape
    assert torch.isfinite(y).all()
    y.square().mean().backward()
    assert torch.isfinite(x.grad).all() and x.grad.abs().sum() > 0
    for name, param in primitive.named_parameters():
        assert param.grad is not None and torch.isfinite(param.grad).all(), name
        assert param.grad.abs().sum() > 0, f"{name} got no gradient"


@pytest.mark.parametrize("symbol", SYMBOLS)
def test_param_count_equals_numel(symbol):
    primitive = make(symbol)
    assert type(primitive).param_count(primitive.config) == sum(p.numel() for p in primitive.parameters())


@pytest.mark.parametrize("symbol", SYMBOLS)
def test_causal(symbol):
    primitive = make(symbol).eval()
    x = torch.randn(2, 12, primitive.config.d_model)
    changed = x.clone()
    changed[:, 7:] = torch.randn_like(changed[:, 7:])
    with torch.no_grad():
        y, y_changed = primitive(x), primitive(changed)
    torch.testing.assert_close(y[:, :7], y_changed[:, :7])
    assert not torch.allclose(y[:, 7:], y_changed[:, 7:])


@pytest.mark.parametrize("symbol", SYMBOLS)
def test_reset_parameters_is_its_own_and_deterministic(symbol):
    first, second = make(symbol), make(symbol)
    for module in (first, second):
        torch.manual_seed(123)
        module.reset_parameters(InitScheme(std=0.02, n_layers=8))
    for (name, a), (_, b) in zip(first.named_parameters(), second.named_parameters()):
        torch.testing.assert_close(a, b, msg=name)
    names = dict(first.named_parameters())
    assert first.no_weight_decay() <= set(names), "no_weight_decay names parameters the primitive lacks"


@pytest.mark.parametrize("symbol", SYMBOLS)
def test_accounting_is_positive_and_monotonic_in_seq_len(symbol):
    cls = REGISTRY.get(symbol)
    config = make(symbol).config
    short, long = cls.flops_per_token(config, 128), cls.flops_per_token(config, 4096)
    assert 0 < short <= long
    # every weight does work for every token, except in routed primitives (E counts only its top_k experts) and a
    # parallel layer's output scales (elementwise, not matmul weights)
    active = cls.active_param_count(config) - (config.d_model * (len(symbol) - 2) if symbol.startswith("[") else 0)
    assert 6 * active <= short
    cache = cls.inference_cache(config, dtype_bytes=2)
    assert cache.bytes_at(4096) >= cache.bytes_at(128) >= 0


@pytest.mark.parametrize("symbol", SYMBOLS)
def test_short_training_lowers_loss(symbol):
    """A two-layer model of the primitive (with an MLP for non-mixing ones) learns a fixed batch."""
    pattern = symbol * 2 if symbol == "M" else f"{symbol}M{symbol}M"
    model = build_model(get_preset("tiny").arch.with_pattern(pattern))
    ids = torch.randint(0, model.arch.vocab_size, (4, 33))
    optim = torch.optim.AdamW(model.parameter_groups(0.1), lr=3e-3)  # decay groups as training builds them
    losses = []
    for _ in range(30):
        loss = model(ids[:, :-1], targets=ids[:, 1:]).loss
        optim.zero_grad()
        loss.backward()
        optim.step()
        losses.append(loss.item())
    assert all(map(torch.isfinite, map(torch.tensor, losses)))
    assert losses[-1] < 0.7 * losses[0], losses
