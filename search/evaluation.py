"""What every evaluator returns and how it is called (the protocol ``search.engine`` drives).

An evaluator is called with the pattern, a seed and a ``report(step, value)`` callback for intermediate values
(used for pruning); it returns an :class:`Evaluation` or raises ``search.mad.CandidateFailed`` with a reason. Its
own home is this small module, so that evaluators living in their own modules (``search.lm``, ``search.recall``)
need not import the registry in ``search.evaluators`` that names them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from composer.errors import ConfigError

Report = Callable[[int, float], None]


@dataclass(frozen=True)
class Evaluation:
    score: float
    details: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0


class Evaluator(Protocol):
    name: str
    direction: str  # "maximize" or "minimize"
    budget: str

    def __call__(self, pattern: str, seed: int, report: Report) -> Evaluation: ...


def checked_rates(lrs: Any, owner: str) -> tuple[float, ...]:
    """A budget's learning-rate grid as distinct positive floats, in the order given; ``owner`` names the budget
    in the one-line error (e.g. "recall lrs", "lm budget 'cpu': lrs")."""
    try:
        rates = tuple(float(lr) for lr in lrs)
    except (TypeError, ValueError):
        raise ConfigError(f"{owner} must be a list of learning rates such as [1e-3, 3e-3], got {lrs!r}") from None
    if not rates or any(not lr > 0 for lr in rates) or len(set(rates)) != len(rates):
        raise ConfigError(f"{owner} must be distinct positive learning rates, got {list(lrs)}")
    return rates


def best_rate(losses: Mapping[float, float | None]) -> float | None:
    """The learning rate with the lowest finite loss, the lower rate on a tie; None when every rate diverged
    (a None or non-finite loss never wins).

    The project's one rate chooser: the ``lm`` and ``recall`` evaluators choose a candidate's rate with it, and
    ``composer transfer`` / ``composer pipeline`` their sweeps' (``composer.experiments.lr_sweep.choose``), so a
    pattern gets the same rate from the same losses wherever it is trained."""
    finite = [(loss, rate) for rate, loss in losses.items() if loss is not None and math.isfinite(loss)]
    return min(finite)[1] if finite else None
