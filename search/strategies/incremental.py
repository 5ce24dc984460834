"""The incremental strategies: grow the pattern ``layers`` at a time to ``depth``, each stage searching the new
layers with the best pattern so far frozen around them (the paper's end- and middle-incremental searches).

``end-incremental`` appends the new layers after the best pattern; ``middle-incremental`` inserts them in its
middle. Each stage is its own study (``<study>-stage<k>``); the trials are split evenly over the stages, the
last one taking the remainder.
"""

from __future__ import annotations

import math

from search.config import SearchConfig
from search.engine import Stage
from search.strategies.base import StagePlan, StageRun, Strategy, known_first, make_space


class Incremental(Strategy):
    """Where the new layers go is the one difference between the two: :meth:`frozen_parts`."""

    def stages(self, config: SearchConfig) -> list[int]:
        """The searched layers of every stage."""
        n = math.ceil(config.final_depth / config.layers)
        return [min(config.layers, config.final_depth - k * config.layers) for k in range(n)]

    def stage_count(self, config: SearchConfig) -> int:
        return len(self.stages(config))

    def frozen_parts(self, best: str) -> tuple[str, str]:
        """Head and tail kept fixed around the next stage's searched layers."""
        return best, ""

    def next_stage(self, config: SearchConfig, done: list[StageRun], echo) -> StagePlan | None:
        plan = self.stages(config)
        index = len(done)
        if index == len(plan):
            return None
        head, tail = self.frozen_parts(done[-1].rows[0]["pattern"]) if done else ("", "")
        space = make_space(config, plan[index], head, tail)
        per_stage = max(1, config.trials // len(plan))
        trials = config.trials - per_stage * (len(plan) - 1) if index == len(plan) - 1 else per_stage
        name = config.study_name if len(plan) == 1 else f"{config.study_name}-stage{index}"
        first = known_first(config, space, echo) if index == 0 else ()
        return StagePlan(config, Stage(index, space, trials, name, first))


class EndIncremental(Incremental):
    name = "end-incremental"


class MiddleIncremental(Incremental):
    name = "middle-incremental"

    def frozen_parts(self, best: str) -> tuple[str, str]:
        middle = len(best) // 2
        return best[:middle], best[middle:]
