"""One growth rule (``search.growth``): a published family at the target in its own layout, a new pattern's
attention kept or repeated, a layout at a chosen depth with its widths scaled to the target's size."""

from __future__ import annotations

import pytest

from composer.layouts import FAMILIES
from search.config import SearchConfig
from search.growth import Growth, depth_at_target, grow


def own_layout_at_size(family: str, stacked: str, target: str) -> str:
    """The family's own layout at the depth, within 3 layers of ``stacked``'s, whose non-embedding parameters come
    nearest ``stacked``'s (whole periods where the range holds one, the shallower on a tie): recomputed here."""
    from composer.accounting import non_embedding_params
    from composer.presets import get_preset
    from search.known import family_at_depth

    widths, depth = get_preset(target).arch, len(stacked)
    size = non_embedding_params(widths.with_pattern(stacked))
    layouts = {n: family_at_depth(family, n) for n in range(depth - 3, depth + 4)}
    whole = {n: layout.pattern for n, layout in layouts.items() if not layout.fit.startswith("nearest layout")}
    among = whole or {n: layout.pattern for n, layout in layouts.items()}
    return among[min(among, key=lambda n: (abs(non_embedding_params(widths.with_pattern(among[n])) - size),
                                           abs(n - depth), n))]


@pytest.mark.parametrize("target", ["demo-4m", "llama-3.2-1b"])
def test_a_published_family_enters_the_target_in_its_own_layout_at_the_same_size(target):
    """Nemotron-H's 6-layer fit SMSAMS stacked to demo-4m holds 3 attention layers; its own rule holds 1, at the
    depth within 3 layers of the stack's whose size comes nearest the stack's (recomputed here)."""
    from search.lm import LanguageModelEvaluator

    stacked, own = grow("SMSAMS", target), grow("SMSAMS", target, "nemotron-h")
    assert stacked.layout.count("A") == stacked.depth // 6 and stacked.how == "stacked to the target's size"
    assert own.layout == own_layout_at_size("nemotron-h", stacked.layout, target) and own.widths == target
    assert own.layout.count("A") < stacked.layout.count("A")
    assert own.how.startswith(f"nemotron-h's own layout at {own.depth} layers")
    if target == "demo-4m":  # whole periods of 8 layers: 0.09% from the stack
        assert own.layout == FAMILIES["nemotron-h"].generator(16)
        assert abs(own.non_embedding_params / stacked.non_embedding_params - 1) < 0.01
    assert grow("AMAMAM", target, "llama").layout == grow("AMAMAM", target).layout  # Llama's own rule: its stack
    # the rungs at the target's size train it so (and rung 0, at the search widths, trains the 6 layers)
    assert LanguageModelEvaluator("rung-cpu-2", known={"SMSAMS": "nemotron-h"}).grown("SMSAMS") == grow(
        "SMSAMS", "demo-4m", "nemotron-h")
    assert LanguageModelEvaluator("rung-cpu-0", known={"SMSAMS": "nemotron-h"}).grown("SMSAMS") is None


def test_kept_attention_grows_new_patterns_only_and_the_rungs_at_the_target_train_it():
    """--attention-at-target keep: a new pattern keeps its one attention layer at demo-4m; Llama's own rule is its
    stack and a family its own layout, whatever the rule; rung 0, at the search widths, trains the 6 layers."""
    from search.lm import LanguageModelEvaluator

    kept = grow("SDDMAS", "demo-4m", None, "keep")
    assert kept.layout.count("A") == 1
    assert kept.how == "grown to the target's size with its 1 attention layer unrepeated"
    assert grow("SDMMSD", "demo-4m", None, "keep").how == "stacked to the target's size"
    assert grow("AMAMAM", "demo-4m", "llama", "keep").layout == "AM" * 9
    assert grow("SMSAMS", "demo-4m", "nemotron-h", "keep") == grow("SMSAMS", "demo-4m", "nemotron-h")
    assert LanguageModelEvaluator("rung-cpu-2", growth=Growth("keep")).grown("SDDMAS") == kept
    assert LanguageModelEvaluator("rung-cpu-2").grown("SDDMAS").layout.count("A") == 4
    assert LanguageModelEvaluator("rung-cpu-0", growth=Growth("keep")).grown("SDDMAS") is None


def nearest_width(layout: str, target: str) -> int:
    """The d_model, a multiple of the target's width quantum up to 8 times its own, whose model's non-embedding
    parameters come nearest the target's: every width tried, no bisection (the growth rule's own search is one)."""
    from composer.accounting import non_embedding_params
    from composer.presets import get_preset
    from composer.widths import scale_widths, width_quantum

    base = get_preset(target).arch
    goal, quantum = non_embedding_params(base), width_quantum(base)
    return min(range(quantum, 8 * base.d_model + 1, quantum),
               key=lambda d: (abs(non_embedding_params(scale_widths(base, d).with_pattern(layout)) - goal), d))


@pytest.mark.parametrize(("pattern", "known"), [("SADDDD", None), ("SMSAMS", "nemotron-h"), ("AMAMAM", "llama")])
def test_a_model_grown_to_a_depth_has_it_at_the_nearest_width_within_the_size_tolerance(pattern, known):
    """--depth-at-target 34 at demo-4m: a new pattern and a family laid out at 34 layers, at the width whose size
    comes nearest the target's (every width tried here), within SIZE_TOLERANCE of it; without a depth, the growth
    by depth at the target's widths."""
    from composer.accounting import non_embedding_params
    from composer.presets import get_preset
    from scaling.extrapolate import SIZE_TOLERANCE

    target = non_embedding_params(get_preset("demo-4m").arch)
    grown = Growth("keep", 34).grow(pattern, "demo-4m", known)
    assert grown.depth == grown.arch.n_layers == 34 and grown.by == "depth"
    assert grown.widths == f"demo-4m:d{nearest_width(grown.layout, 'demo-4m')}"
    assert abs(grown.non_embedding_params / target - 1) <= SIZE_TOLERANCE
    if known == "nemotron-h":
        assert grown.layout == FAMILIES["nemotron-h"].generator(34) and grown.widths == "demo-4m:d120"
    by_depth = grow(pattern, "demo-4m", known, "keep")
    assert by_depth.widths == "demo-4m" and by_depth.by == "parameters"


def test_a_depth_no_width_brings_within_the_tolerance_is_refused_naming_depths_that_are():
    """SADDDD at 12 layers lands 8.8% under demo-4m's size at its nearest width (d_model 328): refused, not
    compared at the target's size; the depths it names land within the tolerance."""
    from scaling.extrapolate import SIZE_TOLERANCE, OffTarget

    with pytest.raises(OffTarget, match=r"\(SA4D\)x2 at 12 layers lands -8.8% from demo-4m's non-embedding "
                                        r"parameters at its nearest width \(d_model 328\), beyond the 5% .* choose "
                                        r"another depth \((\d+) or (\d+) lands within it\)") as refused:
        grow("SADDDD", "demo-4m", None, "repeat", 12)
    import re

    for depth in re.search(r"\((\d+) or (\d+) lands", str(refused.value)).groups():
        grown = grow("SADDDD", "demo-4m", None, "repeat", int(depth))
        assert abs(grown.non_embedding_params / grown.target_sizes[0] - 1) <= SIZE_TOLERANCE


def test_a_model_grown_by_width_says_its_total_parameters_beside_the_targets():
    """Depth 12 at llama-3.2-1b matches the preset's non-embedding parameters at d_model 5120, whose embedding and
    head make it 1.63B parameters against the preset's 1.24B: said wherever it is compared at the target's size."""
    from composer.accounting import non_embedding_params, total_params
    from composer.presets import get_preset

    grown = grow("SADDDD", "llama-3.2-1b", None, "keep", 12)
    preset = get_preset("llama-3.2-1b").arch
    assert grown.params == total_params(grown.arch) and grown.target_sizes == (non_embedding_params(preset),
                                                                               total_params(preset))
    assert grown.how.endswith("; 1.63B parameters with embeddings and head, 975.61M without, against "
                              "llama-3.2-1b's 1.24B and 973.15M")
    assert grown.params - grown.non_embedding_params == 2 * 128_256 * 5120 // 2  # the tied embedding, 5120 wide
    assert "parameters with embeddings and head" not in grow("SADDDD", "llama-3.2-1b").how  # its own widths


def test_depth_at_target_names_a_number_or_a_familys_own_depth():
    assert depth_at_target("nemotron-h", "llama-3.2-1b") == 26 and depth_at_target("16", "demo-4m") == 16


def test_a_grown_model_is_stored_whole_and_read_back_from_old_and_new_trials():
    """One trial attribute (``grown``) holds the model; a study written before it named the layout and widths under
    their old names, and both read back to the same model."""
    from search.growth import GROWN, Grown

    grown = Growth("keep", 16).grow("SADDDD", "demo-4m")
    back = Grown.stored_in({GROWN: grown.record()}, "demo-4m")
    assert back == grown and back.arch == grown.arch and back.record() == grown.record()
    older = Grown.stored_in({"target_pattern": grown.layout, "target_widths": grown.widths}, "demo-4m")
    assert (older.layout, older.widths, older.arch) == (grown.layout, grown.widths, grown.arch)
    at_target = Grown.stored_in({"target_pattern": "AMAM"}, "tiny")  # at the target's widths: none stored
    assert at_target.widths == "tiny" and Grown.stored_in({"pattern": "AMAM"}, "tiny") is None
    assert Grown.layout_in({"details": {}, "trained_pattern": "AMAM"}) == "AMAM"


def test_a_depth_that_is_neither_a_number_nor_a_family_is_refused_by_the_search_config():
    from composer.errors import ConfigError

    with pytest.raises(ConfigError, match="--depth-at-target .deep. is neither a number of layers nor a family"):
        SearchConfig(evaluator="lm", budget="smoke", depth_at_target="deep")
    assert SearchConfig(evaluator="lm", budget="smoke", depth_at_target="8").growth.depth == 8


def test_growth_says_the_layers_it_drops_to_fit_a_smaller_target_and_nothing_else():
    """AAMMMM at tiny weighs more than tiny's own layers: stacking keeps 0.56 of each run, rounded up, AAMMM. The
    drop is said in grow's ``how`` (train --from-search, pipeline print it); growing up, or laying a pattern out at
    a depth asked for, drops nothing unasked."""
    from search.growth import dropped_layers, grown_line

    assert grow("AAMMMM", "tiny").how == "stacked to the target's size; one layer (M) dropped to fit tiny's size"
    assert grow("MMMAMM", "tiny").layout == "MMAM" and grow("MMMAMM", "tiny").how.endswith(
        "2 layers (2 M) dropped to fit tiny's size")
    assert grow("AMAMAM", "demo-4m").how == "stacked to the target's size"
    assert "dropped" not in grow("AAMMMM", "tiny", depth=4).how  # --depth-at-target 4: as asked
    assert dropped_layers("AMAMAM", "AMAM", "tiny") == "2 layers (A, M) dropped to fit tiny's size"
    assert grown_line("AAMMMM", "AAMM", "demo-4m:d96") is None and grown_line("AM", "AMAM", "tiny") is None
