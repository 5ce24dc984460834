from __future__ import annotations

import pytest

from composer import layouts as patterns
from composer.accounting import non_embedding_params
from composer.errors import ConfigError
from composer.presets import get_preset
from scaling.extrapolate import extrapolate
from scaling.matching import layout_at_depth, matched_baselines, preset_of, reference_size

NAMES = ("llama", "sandwich", "striped-1:2", "striped-1:4", "striped-1:8", "random", "random-1")


@pytest.fixture(scope="module")
def stacked_1b():
    return extrapolate("AAMMMM", "llama-3.2-1b").arch


def test_paper_baselines_for_the_stacked_1b_composite(stacked_1b):
    baselines = matched_baselines(stacked_1b, NAMES)
    assert list(baselines) == list(NAMES)
    assert baselines["llama"].pattern == get_preset("llama-3.2-1b").arch.pattern  # the paper's (AM)x16
    for name in ("sandwich", "random", "random-1"):
        assert baselines[name].counts == stacked_1b.counts  # same layers, so the same parameters
        assert non_embedding_params(baselines[name]) == non_embedding_params(stacked_1b)
    assert baselines["sandwich"].pattern.startswith("AAAA") and baselines["sandwich"].pattern.endswith("MMMM")
    assert baselines["random"].pattern != baselines["random-1"].pattern
    assert baselines["striped-1:2"].pattern.startswith("AMMAMM")
    for arch in baselines.values():
        assert (arch.d_model, arch.ffn_dim, arch.n_kv_heads) == (2048, 8192, 8)


GENERATORS = {
    "llama": (patterns.llama, 2),  # whole AM blocks
    "striped-1:2": (lambda n: patterns.striped(n, 2), 1),
    "striped-1:4": (lambda n: patterns.striped(n, 4), 1),
    "striped-1:8": (lambda n: patterns.striped(n, 8), 1),
    # published hybrid families: whole periods of their layout, so their ratios hold exactly
    **{name: (family.generator, family.period) for name, family in patterns.FAMILIES.items()},
}


@pytest.mark.parametrize("name", GENERATORS)
@pytest.mark.parametrize("preset", ["llama-350m", "llama-3.2-1b", "llama-3.2-3b", "llama-3.1-8b"])
def test_depth_matched_baselines_are_the_closest_depth(preset, name):
    composite = extrapolate("AAMMMMMAAMMMAMMM", preset).arch
    target = non_embedding_params(get_preset(preset).arch)
    arch = matched_baselines(composite, (name,))[name]
    generator, step = GENERATORS[name]
    assert arch.pattern == generator(arch.n_layers) and arch.n_layers % step == 0

    def gap(depth: int) -> int:
        return abs(non_embedding_params(composite.with_pattern(generator(depth))) - target)

    assert all(gap(arch.n_layers) <= gap(d) for d in (arch.n_layers - step, arch.n_layers + step) if d >= 1)


def test_reference_defaults_to_the_preset_with_the_same_widths(stacked_1b):
    assert preset_of(stacked_1b) == "llama-3.2-1b"
    assert reference_size(stacked_1b) == non_embedding_params(get_preset("llama-3.2-1b").arch)
    odd = stacked_1b.replace(ffn_dim=4096)
    assert preset_of(odd) is None and reference_size(odd) == non_embedding_params(odd)
    assert reference_size(stacked_1b, 123) == 123 and reference_size(stacked_1b, "tiny") == 123_200
    bigger = matched_baselines(stacked_1b, ("llama",), reference=2_000_000_000)["llama"]
    assert bigger.n_layers == 66


def test_other_primitives_random_keeps_counts_sandwich_refuses():
    composite = get_preset("llama-3.2-1b").arch.with_pattern("AWEM" * 3)
    assert matched_baselines(composite, ("random",), seed=3)["random"].counts == composite.counts
    with pytest.raises(ConfigError, match="sandwich baseline needs an attention/MLP"):
        matched_baselines(composite, ("sandwich",))


@pytest.mark.parametrize("name", ["striped", "striped-1:0", "llama2", "random-x"])
def test_unknown_names(stacked_1b, name):
    with pytest.raises(ConfigError, match="unknown baseline"):
        matched_baselines(stacked_1b, (name,))


def test_seed_is_reproducible(stacked_1b):
    assert matched_baselines(stacked_1b, ("random",), seed=5) == matched_baselines(stacked_1b, ("random",), seed=5)


def test_layout_at_depth_is_the_pattern_a_search_of_that_depth_would_score():
    assert layout_at_depth("llama", 6) == "AMAMAM" and layout_at_depth("striped-1:2", 6) == "AMMAMM"
    assert layout_at_depth("samba", 4) is not None and layout_at_depth("samba", 3) is None  # whole pairs only
    assert layout_at_depth("sandwich", 6) is None and layout_at_depth("random-1", 6) is None  # no own layout
