from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch
from torch import nn

from composer.model import build_model
from composer.presets import get_preset
from primitives.base import InitScheme, Primitive
from primitives.registry import REGISTRY, PrimitiveRegistry


@dataclass(frozen=True)
class _ScaleConfig:
    d_model: int

    @classmethod
    def from_arch(cls, arch, **options):
        return cls(d_model=arch.d_model, **options)


class _Scale(Primitive):
    """A toy element-wise primitive, registered by a user."""

    symbol = "Z"
    name = "scale"
    Config = _ScaleConfig

    def __init__(self, config):
        super().__init__(config)
        self.gain = nn.Parameter(torch.empty(config.d_model))

    def reset_parameters(self, init: InitScheme) -> None:
        nn.init.ones_(self.gain)

    def no_weight_decay(self):
        return {"gain"}

    def forward(self, x):
        return x * self.gain

    @classmethod
    def param_count(cls, config):
        return config.d_model

    @classmethod
    def flops_per_token(cls, config, seq_len):
        return 0


def test_builtins_are_registered_by_symbol_and_name():
    assert REGISTRY.symbols.startswith("AM")
    assert REGISTRY.get("A") is REGISTRY.get("attention")
    assert REGISTRY.get("M").name == "mlp"
    with pytest.raises(KeyError, match="A \\(attention\\), M \\(mlp\\)"):
        REGISTRY.get("Q")


def test_user_primitive_registers_and_builds():
    registry_before = dict(REGISTRY._by_symbol)
    try:
        REGISTRY.register(_Scale)
        arch = get_preset("tiny").arch.with_pattern("AZM")
        model = build_model(arch)
        assert [layer.symbol for layer in model.layers] == ["A", "Z", "M"]
        assert "layers.1.primitive.gain" in model.no_weight_decay()
        assert model(torch.randint(0, 256, (1, 5))).logits.shape == (1, 5, 256)
    finally:
        REGISTRY._by_symbol.clear()
        REGISTRY._by_symbol.update(registry_before)


def test_registration_rejects_bad_and_duplicate_symbols():
    registry = PrimitiveRegistry()
    registry.register(_Scale)
    with pytest.raises(ValueError, match="already uses Z/scale"):
        registry.register(_Scale)

    class Lower(_Scale):
        symbol = "z"

    with pytest.raises(ValueError, match="one upper-case ASCII letter"):
        registry.register(Lower)
