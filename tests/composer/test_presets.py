from __future__ import annotations

import pytest
import torch

from composer.accounting import analyze
from composer.model import build_model
from composer.presets import PRESETS, get_preset
from composer.errors import ConfigError

OFFICIAL = {
    "llama-3.2-1b": 1_235_814_400,
    "llama-3.2-3b": 3_212_749_824,
    "llama-3.1-8b": 8_030_261_248,
}


@pytest.mark.parametrize("name, params", OFFICIAL.items())
def test_official_totals_are_exact(name, params):
    assert analyze(get_preset(name).arch).params == params


@pytest.mark.parametrize("name", list(PRESETS))
def test_meta_model_matches_analytic_count_without_allocating(name):
    arch = PRESETS[name].arch
    model = build_model(arch, device="meta")
    assert all(p.is_meta for p in model.parameters())
    assert sum(p.numel() for p in model.parameters()) == analyze(arch).params


def test_sizes_of_our_presets():
    assert 340e6 <= analyze(get_preset("llama-350m").arch).params <= 370e6
    assert analyze(get_preset("search-1m").arch).params <= 1.1e6
    assert analyze(get_preset("tiny").arch).params < analyze(get_preset("search-1m").arch).params


def test_unknown_preset_lists_the_names():
    with pytest.raises(ConfigError, match="unknown preset 'llama-1b'; choose one of: llama-3.2-1b"):
        get_preset("llama-1b")


def test_meta_model_materialises():
    model = build_model(get_preset("tiny").arch, device="meta")
    model.to_empty(device="cpu")
    model.init_weights()
    out = model(torch.randint(0, 256, (1, 8)))
    assert torch.isfinite(out.logits).all()
