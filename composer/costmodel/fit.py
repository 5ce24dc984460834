"""Fitting the table's constants to measured step times.

The model is linear in the reciprocal efficiencies and the op costs: a step of units ``u`` takes::

    sum_u layers_u * (max(flops_u / peak, bytes_u / bandwidth) * (1 / e_u)
                      + activation_bytes_u / bandwidth * passes_u + ops_u * op_cost)

so each measurement is one row of a linear system in the unknowns ``efficiency.<phase>.<key>`` (holding
``1 / e``), ``activation_passes.<phase>.<key>`` (the CPU fit only) and ``op_cost_s.<count phase>``, and
:func:`fit_nonnegative` solves it by non-negative least squares on *relative* residuals (a 1 ms step and a 1 s
step count alike, as the errors are reported). Constants already known (a datasheet peak, an assumed op cost)
are passed in ``known`` and move to the row's offset.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from composer.costmodel.table import Counts
from composer.costmodel.work import Work
from composer.errors import ConfigError


@dataclass(frozen=True)
class Row:
    """One measured step: ``measured_s = offset_s + sum(coefficients[name] * unknown[name])``."""

    coefficients: dict[str, float]
    measured_s: float
    offset_s: float = 0.0
    label: str = ""
    tags: dict[str, str] = field(default_factory=dict)


def efficiency_name(phase: str, key: str) -> str:
    return f"efficiency.{phase}.{key}"


def op_cost_name(count_phase: str) -> str:
    return f"op_cost_s.{count_phase}"


def passes_name(phase: str, key: str) -> str:
    return f"activation_passes.{phase}.{key}"


def design_row(
    units: Iterable[Work],
    phase: str,
    peak_flops: float,
    bandwidth: float,
    counts: Callable[[str, str], Counts] | None,
    measured_s: float,
    *,
    known: Mapping[str, float] | None = None,
    group: Callable[[str], str] | None = None,
    label: str = "",
    tags: Mapping[str, str] | None = None,
    activation_passes: bool = False,
) -> Row:
    """The row of one measured ``phase`` step of ``units``. ``counts(key, count_phase)`` gives a unit's op
    counts, taken at the unit's chunks and batch slices (None: no op term, e.g. a GPU whose training launches
    overlap); ``known`` maps unknown names to values
    already fixed (their terms join the offset: a reciprocal efficiency, or an op cost); ``group`` maps an
    efficiency key to the one it is fitted together with (fewer constants where the data cannot tell them
    apart); ``activation_passes``: each layer's passes over its activations are unknowns too (the CPU fit; a GPU's
    few runs cannot tell them from the efficiencies)."""
    known = dict(known or {})
    coefficients: dict[str, float] = {}
    offset = 0.0

    def add(name: str, value: float) -> None:
        nonlocal offset
        if name in known:
            offset += value * known[name]
        else:
            coefficients[name] = coefficients.get(name, 0.0) + value

    for unit in units:
        key = group(unit.key) if group is not None else unit.key
        add(efficiency_name(phase, key), unit.layers * max(unit.flops / peak_flops, unit.bytes / bandwidth))
        if activation_passes and unit.activation_bytes:
            add(passes_name(phase, unit.key), unit.layers * unit.activation_bytes / bandwidth)
        if counts is not None and unit.count_phase is not None:
            ops = counts(unit.count_key, unit.count_phase).at(unit.chunks, unit.slices)
            add(op_cost_name(unit.count_phase), unit.layers * ops)
    return Row(coefficients, float(measured_s), offset, label, dict(tags or {}))


def fit_nonnegative(rows: list[Row], max_efficiency: float | None = 1.0) -> dict[str, float]:
    """The unknowns (every name a row's coefficients use) that minimise the relative squared error of the rows'
    predictions, each ``>= 0``; an efficiency is also held at or below ``max_efficiency`` (its reciprocal at or
    above ``1 / max_efficiency``; ``None``: unbounded), so that where the data cannot tell two keys apart (A and
    M always side by side) the fit cannot trade one beyond the peak for the other. An unknown no row can see (all
    its coefficients 0) is left out of the result."""
    import numpy as np
    from scipy.optimize import lsq_linear

    if not rows:
        raise ConfigError("nothing to fit: no measurements")
    names = sorted({name for row in rows for name, value in row.coefficients.items() if value > 0})
    if not names:
        raise ConfigError("nothing to fit: every constant is known already")
    matrix = np.array([[row.coefficients.get(name, 0.0) / row.measured_s for name in names] for row in rows])
    target = np.array([1.0 - row.offset_s / row.measured_s for row in rows])
    scale = matrix.max(axis=0)  # columns of 1e-9 (seconds per FLOP) and of 1e2 (ops) alike for the solver
    floor = 0.0 if max_efficiency is None else 1.0 / max_efficiency
    lower = np.array([floor if name.startswith("efficiency.") else 0.0 for name in names]) * scale
    solution = lsq_linear(matrix / scale, target, bounds=(lower, np.inf)).x
    return {name: float(x / s) for name, x, s in zip(names, solution, scale, strict=True)}


def predicted_s(row: Row, unknowns: Mapping[str, float]) -> float:
    """A row's prediction from fitted ``unknowns`` (an unknown missing from them counts as 0)."""
    return row.offset_s + sum(value * unknowns.get(name, 0.0) for name, value in row.coefficients.items())


def relative_error(predicted: float, measured: float) -> float:
    """``predicted / measured - 1`` of the figure reported (tokens/s, or ms per token): +0.2 is 20% above."""
    return predicted / measured - 1.0


def error_summary(errors: list[float]) -> dict[str, float | int]:
    """Median and worst absolute relative error, and the signed mean, of a list of relative errors."""
    import statistics

    if not errors:
        return {"n": 0}
    absolute = sorted(abs(e) for e in errors)
    return {"n": len(errors), "median_abs": statistics.median(absolute), "worst_abs": absolute[-1],
            "mean_signed": statistics.fmean(errors)}


__all__ = ["Row", "design_row", "efficiency_name", "error_summary", "fit_nonnegative", "op_cost_name", "passes_name",
           "predicted_s", "relative_error"]
