"""One growth rule (``search.growth``): a published family at the target in its own layout, a new pattern's
attention kept or repeated, a layout at a chosen depth with its widths scaled to the target's size."""

from __future__ import annotations

import pytest

from composer.layouts import FAMILIES
from search.config import SearchConfig


def test_a_published_family_enters_the_target_in_its_own_layout_at_the_same_size():
    """Nemotron-H's 6-layer fit SMSAMS stacked to demo-4m holds 3 attention layers; its own rule holds 1."""
    from composer.accounting import non_embedding_params
    from composer.presets import get_preset
    from search.growth import layout_at_target
    from search.lm import LanguageModelEvaluator

    demo = get_preset("demo-4m").arch
    stacked, how = layout_at_target("SMSAMS", "demo-4m")
    own, how_own = layout_at_target("SMSAMS", "demo-4m", "nemotron-h")
    assert stacked.count("A") == 3 and how == "stacked to the target's size"
    assert own.count("A") == 1 and own == FAMILIES["nemotron-h"].generator(len(own))
    assert how_own.startswith(f"nemotron-h's own layout at {len(own)} layers")
    size = non_embedding_params(demo.with_pattern(stacked))
    assert abs(non_embedding_params(demo.with_pattern(own)) - size) / size < 0.1
    assert layout_at_target("AMAMAM", "demo-4m", "llama")[0] == "AM" * 9  # Llama's own rule is its stack
    # the rungs at the target's size train it so (and rung 0, at the search widths, trains the 6 layers)
    assert LanguageModelEvaluator("rung-cpu-2", known={"SMSAMS": "nemotron-h"}).trained_pattern("SMSAMS") == own
    assert LanguageModelEvaluator("rung-cpu-0", known={"SMSAMS": "nemotron-h"}).trained_pattern("SMSAMS") == "SMSAMS"


def test_kept_attention_grows_new_patterns_only_and_the_rungs_at_the_target_train_it():
    """--attention-at-target keep: a new pattern keeps its one attention layer at demo-4m; Llama's own rule is its
    stack and a family its own layout, whatever the rule; rung 0, at the search widths, trains the 6 layers."""
    from search.growth import layout_at_target
    from search.lm import LanguageModelEvaluator

    kept, how = layout_at_target("SDDMAS", "demo-4m", None, "keep")
    assert kept.count("A") == 1 and how == "grown to the target's size with its 1 attention layer unrepeated"
    assert layout_at_target("SDMMSD", "demo-4m", None, "keep")[1] == "stacked to the target's size"
    assert layout_at_target("AMAMAM", "demo-4m", "llama", "keep")[0] == "AM" * 9
    assert (layout_at_target("SMSAMS", "demo-4m", "nemotron-h", "keep")
            == layout_at_target("SMSAMS", "demo-4m", "nemotron-h"))
    assert LanguageModelEvaluator("rung-cpu-2", attention_at_target="keep").trained_pattern("SDDMAS") == kept
    assert LanguageModelEvaluator("rung-cpu-2").trained_pattern("SDDMAS").count("A") == 4
    assert LanguageModelEvaluator("rung-cpu-0", attention_at_target="keep").trained_pattern("SDDMAS") == "SDDMAS"


def test_one_growth_rule_gives_every_layout_one_depth_and_the_targets_size():
    """model_at_target at a depth: a new pattern and a family laid out at N layers, widths scaled to the target's
    size; without a depth, the growth by depth as before (the target's widths)."""
    from composer.accounting import non_embedding_params
    from composer.presets import get_preset
    from search.growth import Growth, depth_at_target, layout_at_target, model_at_target

    target = non_embedding_params(get_preset("demo-4m").arch)
    for pattern, known in (("SADDDD", None), ("SMSAMS", "nemotron-h"), ("AMAMAM", "llama")):
        arch = Growth("keep", 34).arch(pattern, "demo-4m", known)
        assert arch.n_layers == 34 and abs(non_embedding_params(arch) / target - 1) < 0.1
    layout, widths, how = model_at_target("SMSAMS", "demo-4m", "nemotron-h", "keep", 34)
    assert layout == FAMILIES["nemotron-h"].generator(34) and widths == "demo-4m:d120" and "own layout" in how
    assert model_at_target("SADDDD", "demo-4m", None, "keep") == (
        *layout_at_target("SADDDD", "demo-4m", None, "keep")[:1], "demo-4m",
        layout_at_target("SADDDD", "demo-4m", None, "keep")[1])
    assert depth_at_target("nemotron-h", "llama-3.2-1b") == 26 and depth_at_target("16", "demo-4m") == 16


def test_a_depth_that_is_neither_a_number_nor_a_family_is_refused_by_the_search_config():
    from composer.errors import ConfigError

    with pytest.raises(ConfigError, match="--depth-at-target .deep. is neither a number of layers nor a family"):
        SearchConfig(evaluator="lm", budget="smoke", depth_at_target="deep")
    assert SearchConfig(evaluator="lm", budget="smoke", depth_at_target="8").growth.depth == 8


def test_growth_says_the_layers_it_drops_to_fit_a_smaller_target_and_nothing_else():
    """AAMMMM at tiny weighs more than tiny's own layers: stacking keeps 0.56 of each run, rounded up, AAMMM. The
    drop is said in grow's ``how`` (train --from-search, pipeline print it); growing up, or laying a pattern out at
    a depth asked for, drops nothing unasked."""
    from search.growth import dropped_layers, grow, grown_line

    assert grow("AAMMMM", "tiny").how == "stacked to the target's size; one layer (M) dropped to fit tiny's size"
    assert grow("MMMAMM", "tiny").layout == "MMAM" and grow("MMMAMM", "tiny").how.endswith(
        "2 layers (2 M) dropped to fit tiny's size")
    assert grow("AMAMAM", "demo-4m").how == "stacked to the target's size"
    assert "dropped" not in grow("AAMMMM", "tiny", depth=4).how  # --depth-at-target 4: as asked
    assert dropped_layers("AMAMAM", "AMAM", "tiny") == "2 layers (A, M) dropped to fit tiny's size"
    assert grown_line("AAMMMM", "AAMM", "demo-4m:d96") is None and grown_line("AM", "AMAM", "tiny") is None
