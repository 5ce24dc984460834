"""One-shot: one study over all the searched layers, known layouts first (the paper's search)."""

from __future__ import annotations

from search.config import SearchConfig
from search.engine import Stage
from search.strategies.base import StagePlan, StageRun, Strategy, known_first, make_space


class OneShot(Strategy):
    name = "one-shot"

    def next_stage(self, config: SearchConfig, done: list[StageRun], echo) -> StagePlan | None:
        if done:
            return None
        space = make_space(config, config.layers)
        return StagePlan(config, Stage(0, space, config.trials, config.study_name, known_first(config, space, echo)))
