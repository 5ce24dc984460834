"""What every evaluator returns and how it is called (the protocol ``search.engine`` drives).

An evaluator is called with the pattern, a seed and a ``report(step, value)`` callback for intermediate values
(used for pruning); it returns an :class:`Evaluation` or raises ``search.mad.CandidateFailed`` with a reason. Its
own home is this small module, so that evaluators living in their own modules (``search.lm``, ``search.recall``)
need not import the registry in ``search.evaluators`` that names them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

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
