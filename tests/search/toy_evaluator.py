"""A cheap, deterministic evaluator for engine tests (importable by spawned workers as ``toy_evaluator:make``).

Score = how well a pattern matches the hidden optimum ``AAMMMM...`` layer by layer, plus a small bonus for
attention early; patterns containing ``"MMMMM"`` fail (to test failure handling), and ``AMAMAM`` returns NaN.
Each call appends the pattern to the file named by ``$TOY_EVAL_LOG`` so tests can count trainings. With
``$TOY_EVAL_DROP`` set to a symbol, patterns that differ only in where that symbol sits train one model
(``model_key``, as the recall probe drops MLPs). While the file named by ``$TOY_EVAL_DATA_ERROR`` exists, every
call fails on the data (a ``DataError``, as a text source without its text field does), before it trains.
"""

from __future__ import annotations

import os
import time

from composer.data.errors import DataError
from search.evaluators import Evaluation


class ToyEvaluator:
    name = "toy"
    direction = "maximize"

    def __init__(self, budget: str = "smoke", **_) -> None:
        self.budget = budget
        self.delay = float(os.environ.get("TOY_EVAL_DELAY", "0"))

    def model_key(self, pattern: str) -> str:
        drop = os.environ.get("TOY_EVAL_DROP", "")
        return pattern.replace(drop, "") if drop else pattern

    def __call__(self, pattern: str, seed: int, report) -> Evaluation:
        log = os.environ.get("TOY_EVAL_LOG")
        if log:
            with open(log, "a") as f:
                f.write(pattern + "\n")
        broken = os.environ.get("TOY_EVAL_DATA_ERROR")
        if broken and os.path.exists(broken):
            raise DataError(f"toy data: text field 'text' not found in {broken!r}; set text_field (--text-field)")
        time.sleep(self.delay)
        if "MMMMM" in pattern:
            raise RuntimeError("toy failure: five MLPs in a row")
        if pattern.startswith("AMAMAM"):
            return Evaluation(score=float("nan"))
        optimum = ("AAMMMM" * 4)[: len(pattern)]
        score = sum(a == b for a, b in zip(pattern, optimum)) / len(pattern)
        # With $TOY_EVAL_STEPS set, report that many intermediate values (the score each time) like MAD's per-task
        # running mean, so the pruner has something to compare; by default one report, which never prunes.
        for step in range(int(os.environ.get("TOY_EVAL_STEPS", "1"))):
            report(step, score)
        return Evaluation(score=score, details={"accuracy": {"toy": score}}, seconds=self.delay)


def make(**kwargs) -> ToyEvaluator:
    return ToyEvaluator(**kwargs)
