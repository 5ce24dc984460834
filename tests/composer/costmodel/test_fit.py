"""``composer.costmodel.fit``: the constants come back from timings the model itself generated."""

from __future__ import annotations

import pytest

from composer.costmodel import (
    Counts,
    Work,
    design_row,
    error_summary,
    fit_nonnegative,
    predicted_s,
    step_work,
)
from composer.costmodel.fit import efficiency_name, op_cost_name
from composer.errors import ConfigError
from composer.presets import get_preset

PEAK, BANDWIDTH = 5e10, 2e10
TRUE = {"A": 0.3, "M": 0.8, "S": 0.12, "head": 0.5}
OPS = {"A": 120, "M": 60, "S": 400, "head": 50}
OP_COST = {"train": 4e-6, "decode": 2e-6}


def counts(key: str, phase: str) -> Counts:
    return Counts((OPS[key], OPS[key], OPS[key]))


def timing(units, phase: str) -> float:
    """The model's own step time: what a perfect measurement of it would read."""
    return sum(u.layers * (max(u.flops / PEAK, u.bytes / BANDWIDTH) / TRUE[u.key] + OPS[u.key] * OP_COST[phase])
               for u in units)


def rows_for(phase: str, shapes):
    rows = []
    for preset, batch, length in shapes:
        arch = get_preset(preset).arch.with_pattern("AMS")
        for key in ("A", "M", "S", "head"):
            units = [u for u in step_work(arch, phase, batch, length, 4) if u.key == key]
            rows.append(design_row(units, phase, PEAK, BANDWIDTH, counts, timing(units, phase)))
    return rows


def test_fit_recovers_known_efficiencies_and_op_costs():
    for phase, shapes in (("train", [("search-1m", 8, 256), ("search-1m", 1, 32), ("llama-350m", 1, 128)]),
                          ("decode", [("search-1m", 1, 128), ("search-1m", 16, 1024), ("llama-350m", 1, 512)])):
        solution = fit_nonnegative(rows_for(phase, shapes))
        for key, efficiency in TRUE.items():
            assert 1 / solution[efficiency_name(phase, key)] == pytest.approx(efficiency, rel=1e-6), (phase, key)
        assert solution[op_cost_name(phase)] == pytest.approx(OP_COST[phase], rel=1e-6)


def test_known_constants_move_to_the_offset_and_groups_share_one():
    work = [Work("A", "A", "train", 2, 1e9, 1e6), Work("M", "M", "train", 2, 3e9, 1e6)]
    known = {op_cost_name("train"): 1e-5}
    row = design_row(work, "train", PEAK, BANDWIDTH, counts, 1.0, known=known, group=lambda key: "dense")
    assert set(row.coefficients) == {efficiency_name("train", "dense")}
    assert row.offset_s == pytest.approx(1e-5 * 2 * (OPS["A"] + OPS["M"]))
    assert row.coefficients[efficiency_name("train", "dense")] == pytest.approx(2 * 4e9 / PEAK)
    assert predicted_s(row, {efficiency_name("train", "dense"): 2.0}) == pytest.approx(row.offset_s + 2 * 8e9 / PEAK)


def test_an_efficiency_is_held_at_or_below_the_peak():
    # a step measured faster than the peak allows: the bound keeps the efficiency at 1, the error stays visible
    row = design_row([Work("M", "M", "train", 1, 1e10, 0.0)], "train", PEAK, BANDWIDTH, None, 0.1)
    assert 1 / fit_nonnegative([row])[efficiency_name("train", "M")] == pytest.approx(1.0)
    assert 1 / fit_nonnegative([row], max_efficiency=None)[efficiency_name("train", "M")] == pytest.approx(2.0)


def test_nothing_to_fit_is_one_line():
    with pytest.raises(ConfigError, match="no measurements"):
        fit_nonnegative([])


def test_error_summary_is_median_and_worst_of_the_absolute_errors():
    assert error_summary([0.1, -0.3, 0.05]) == {"n": 3, "median_abs": 0.1, "worst_abs": 0.3,
                                                "mean_signed": pytest.approx(-0.05)}
    assert error_summary([]) == {"n": 0}


def test_the_cpu_fit_can_tell_activation_passes_from_efficiency_across_widths():
    """Steps at two widths whose time is FLOPs at one efficiency plus a fixed number of d_model-wide passes: the
    fit with passes recovers both; one efficiency alone cannot fit both widths."""
    from composer.costmodel.fit import passes_name
    from composer.presets import get_preset

    peak, bandwidth = 1e11, 1e10
    rows, plain = [], []
    for preset, batch, length in (("search-1m", 16, 128), ("search-1m", 8, 256), ("search-1m:d1024", 1, 256)):
        a = get_preset(preset).arch.with_pattern("M")
        units = [u for u in step_work(a, "train", batch, length, 4) if u.key == "M"]
        m = units[0]
        seconds = m.flops / (peak * 0.5) + 100.0 * m.activation_bytes / bandwidth
        rows.append(design_row(units, "train", peak, bandwidth, None, seconds, activation_passes=True))
        plain.append(design_row(units, "train", peak, bandwidth, None, seconds))
    solution = fit_nonnegative(rows, max_efficiency=None)
    assert solution[passes_name("train", "M")] == pytest.approx(100.0, rel=1e-6)
    assert 1 / solution["efficiency.train.M"] == pytest.approx(0.5, rel=1e-6)
    plain_solution = fit_nonnegative(plain, max_efficiency=None)
    assert max(abs(predicted_s(r, plain_solution) / r.measured_s - 1) for r in plain) > 0.1
