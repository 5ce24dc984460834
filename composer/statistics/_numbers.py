"""What the statistics share: JSON-ready values, sorted seeds, the t interval, scipy imported late."""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable
from typing import Any

import numpy as np


def scipy_stats():
    """``scipy.stats``, imported when an interval is first computed: importing it costs a second or two, which every
    ``composer`` command paid at start-up through the parsers' imports (issue 49: ``composer report`` in seconds)."""
    from scipy import stats

    return stats


def plain(value: Any) -> Any:
    """``value`` as JSON-ready Python: numpy scalars unwrapped, non-finite floats as ``None``."""
    if value is None:
        return None
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        value = float(value)
        return value if math.isfinite(value) else None
    if isinstance(value, str):
        return value
    if isinstance(value, np.ndarray):
        return [plain(v) for v in value.tolist()]
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def as_float(value: Any) -> float:
    """``value`` as a float, with ``None`` (a missing result) read as NaN."""
    return math.nan if value is None else float(value)


def sorted_seeds(seeds: Iterable[Hashable]) -> list[Hashable]:
    """Seeds in a stable order: natural order when comparable (ints, strings), else by their text."""
    seeds = list(seeds)
    try:
        return sorted(seeds)
    except TypeError:
        return sorted(seeds, key=lambda s: (type(s).__name__, str(s)))


def t_interval(mean: float, std: float, n: int, confidence: float) -> list[float] | None:
    """Student-t interval ``mean +- t_{(1+c)/2, n-1} * std / sqrt(n)``; ``None`` for fewer than 2 values."""
    if n < 2:
        return None
    half = float(scipy_stats().t.ppf((1.0 + confidence) / 2.0, n - 1)) * std / math.sqrt(n)
    return [mean - half, mean + half]


def check_confidence(confidence: float) -> None:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")


def percentile_interval(samples: np.ndarray, confidence: float) -> list[float] | None:
    if samples.size == 0:
        return None
    lo, hi = np.quantile(samples, [(1.0 - confidence) / 2.0, (1.0 + confidence) / 2.0])
    return [float(lo), float(hi)]
