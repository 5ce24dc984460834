"""Growth to equal cost (``scaling.equal_cost`` through ``search.growth.grow``): every model the widest its layout
can be within the reference family's cost, the reference itself the budget, deployed shapes scaled down as the
reference's are, and bad words refused in one line."""

from __future__ import annotations

import pytest

from composer.errors import ConfigError
from composer.presets import get_preset
from composer.widths import scale_widths, width_quantum
from scaling.equal_cost import (
    COST_TOLERANCE,
    EqualCost,
    OverBudget,
    assumed_constants,
    budget_of,
    costs_of,
    describe,
    describe_line,
    family_layout_at,
    reference_model,
    widest_within,
)
from search.growth import Growth, grow

CPU = EqualCost("nemotron-h")  # deployed at the target, on the cpu entry of the cost model
H200_1B = EqualCost("nemotron-h", "llama-3.2-1b", "h200")


def _fits(arch, rule, preset):
    budget = budget_of(rule, preset)
    return all(value <= budget[figure] for figure, value in costs_of(arch, rule).items())


@pytest.mark.parametrize("rule", [CPU, H200_1B, EqualCost("nemotron-h", "llama-3.2-1b", "cpu", ("train",))],
                         ids=["cpu", "h200@1b", "cpu-train@1b"])
@pytest.mark.parametrize("pattern, known", [("AMAMAM", "llama"), ("SMMMAD", None), ("AAMMMM", "composer-paper"),
                                            ("DMDMAM", "linear-3to1")])
def test_every_model_is_the_widest_within_the_reference_cost(rule, pattern, known):
    """At the deployed preset: within the budget at its width, over it one width quantum wider, and within the
    stated tolerance under it in its binding figure."""
    grown = grow(pattern, "demo-4m", known, "keep", equal_cost=rule)
    deployed = rule.deployed_at("demo-4m")
    base = get_preset(deployed).arch
    record = grown.cost
    at = scale_widths(base, record["deployed_d_model"]).with_pattern(record["deployed_pattern"])
    wider = scale_widths(base, record["deployed_d_model"] + width_quantum(base)).with_pattern(at.pattern)
    assert _fits(at, rule, deployed) and not _fits(wider, rule, deployed)
    assert record["costs"] == costs_of(at, rule) and record["budget"] == budget_of(rule, deployed)
    assert record["binding"] in rule.figures
    assert 1 - COST_TOLERANCE <= record["costs"][record["binding"]] / record["budget"][record["binding"]] <= 1
    assert grown.widths == (grown.extrapolation.target) and get_preset(grown.widths).arch == grown.arch.with_pattern(
        get_preset(grown.widths).arch.pattern)


def test_the_reference_family_is_the_budget_unchanged():
    grown = grow("SMSAMS", "demo-4m", "nemotron-h", "keep", equal_cost=CPU)
    assert grown.arch == reference_model("nemotron-h", "demo-4m") and grown.widths == "demo-4m"
    assert grown.cost["costs"] == grown.cost["budget"]


def test_a_deployed_shape_is_scaled_down_as_the_reference_is():
    """Deployed at llama-3.2-1b, trained at demo-4m: depth by the reference's depth ratio, d_model by the presets'."""
    grown = grow("SMMMAD", "demo-4m", None, "keep", equal_cost=H200_1B)
    high, low = reference_model("nemotron-h", "llama-3.2-1b"), reference_model("nemotron-h", "demo-4m")
    deployed_layers = len(grown.cost["deployed_pattern"])
    assert grown.arch.n_layers == round(deployed_layers * low.n_layers / high.n_layers)
    assert grown.arch.d_model == round(grown.cost["deployed_d_model"] * 192 / 2048 / 8) * 8
    assert grown.layout.count("A") == 1  # the growth rule (attention kept) holds at the smaller depth too
    reference = grow("SMSAMS", "demo-4m", "nemotron-h", "keep", equal_cost=H200_1B)
    assert reference.arch == low  # the reference scales to its own layout at the target


def test_a_family_enters_at_its_published_depth_where_it_shipped_at_that_size():
    assert family_layout_at("nemotron-flash", "llama-3.2-1b") == "DMSMAMSMDMSMAMSMDMSMDMSM"
    grown = grow("DMSMAM", "llama-3.2-1b", "nemotron-flash", equal_cost=H200_1B)
    assert grown.layout == "DMSMAMSMDMSMAMSMDMSMDMSM" and grown.how.startswith("nemotron-flash's own layout at 24")


def test_a_layout_too_deep_for_the_budget_is_over_budget_in_one_line():
    with pytest.raises(OverBudget, match="costs more than nemotron-h at demo-4m even at d_model 8"):
        widest_within("DM" * 40, "demo-4m", CPU)


def test_a_layout_that_lands_too_far_under_the_budget_is_refused_not_called_equal_cost(monkeypatch):
    """Still cheaper than the reference at the widest width looked at (here the deployed preset's own, 1x), or a
    width step that jumps from far under the budget to over it: not "at equal cost", refused in one line."""
    from scaling import equal_cost
    from scaling.extrapolate import OffTarget

    monkeypatch.setattr(equal_cost, "WIDTH_RANGE", 1)
    with pytest.raises(OffTarget, match=r"AM at its widest within nemotron-h's cost at demo-4m \(d_model 192\) "
                                        r"costs 0\.\d\dx it .* beyond the 10% under the budget .*d_model 192 is the "
                                        "widest looked at"):
        widest_within("AM", "demo-4m", CPU)
    monkeypatch.setattr(equal_cost, "WIDTH_RANGE", 8)
    arch, costs = widest_within("SMMMAD", "demo-4m", CPU)  # 0.99x: within it
    monkeypatch.setattr(equal_cost, "COST_TOLERANCE", 0.0)
    with pytest.raises(OffTarget, match=r"the next width, d_model \d+, costs 1\.\d\dx"):
        widest_within("SMMMAD", "demo-4m", CPU)


def test_growth_to_equal_cost_travels_in_the_growth_rule_and_changes_the_study():
    from search.config import SearchConfig

    config = SearchConfig(primitives="AMSD", equal_cost="nemotron-h", deployed_at="llama-3.2-1b", cost_device="h200",
                          equal_cost_figure="decode")
    assert config.growth == Growth("repeat", None, EqualCost("nemotron-h", "llama-3.2-1b", "h200", ("decode",)))
    plain = SearchConfig(primitives="AMSD")
    assert config.study_name != plain.study_name and "cost_table" in config.score_settings()
    assert "cost_table" not in plain.score_settings()


@pytest.mark.parametrize("words, message", [
    ({"equal_cost": "nemotron"}, "--equal-cost 'nemotron' is not a published family"),
    ({"equal_cost": "nemotron-h", "deployed_at": "huge"}, "--deployed-at 'huge' is not a preset"),
    ({"equal_cost": "nemotron-h", "cost_device": "tpu"}, "--cost-device 'tpu'"),
    ({"equal_cost": "nemotron-h", "equal_cost_figure": "memory"}, "--equal-cost-figure must be one of"),
    ({"deployed_at": "llama-3.2-1b"}, "give --equal-cost FAMILY"),
])
def test_bad_words_are_one_config_error(words, message):
    from search.config import SearchConfig

    with pytest.raises(ConfigError, match=message):
        SearchConfig(primitives="AMSD", **words)


def test_the_summary_names_device_size_modeled_and_assumed_constants():
    said = describe(H200_1B, "demo-4m")
    assert said["modeled"] and said["deployed"] == "llama-3.2-1b" and said["device"] == "h200"
    assert "assumed-gpu-decode-efficiency" in said["assumed_constants"]
    line = describe_line(said)
    assert "modeled on h200" in line and "at llama-3.2-1b" in line and "assumed constants" in line
    assert "scaled down to demo-4m" in line
    assert assumed_constants(CPU, reference_model("nemotron-h", "demo-4m")) == []  # the CPU's are fitted
