"""The search strategies, one module each, behind one interface (``search.strategies.base.Strategy``).

| strategy | module | stages |
| --- | --- | --- |
| ``one-shot`` | ``one_shot`` | one study over all the searched layers |
| ``end-incremental``, ``middle-incremental`` | ``incremental`` | one study per ``layers`` added, best so far frozen |
| ``successive-halving`` | ``successive_halving`` | rung 0 samples; each later rung trains the best of the one below |

Adding one: subclass ``Strategy`` in a new module, add it to ``_ALL`` below and its name to
``search.config.STRATEGIES`` (where the settings are checked; see ``docs/search.md``).
"""

from __future__ import annotations

from composer.errors import ConfigError
from search.strategies.base import Answer, StagePlan, StageRun, Strategy
from search.strategies.incremental import EndIncremental, MiddleIncremental
from search.strategies.one_shot import OneShot
from search.strategies.successive_halving import SuccessiveHalving

_ALL: tuple[type[Strategy], ...] = (OneShot, EndIncremental, MiddleIncremental, SuccessiveHalving)
STRATEGIES: dict[str, type[Strategy]] = {strategy.name: strategy for strategy in _ALL}


def get_strategy(name: str) -> Strategy:
    try:
        return STRATEGIES[name]()
    except KeyError:
        raise ConfigError(f"strategy must be one of {', '.join(STRATEGIES)}, got {name!r}") from None


__all__ = ["STRATEGIES", "Answer", "StagePlan", "StageRun", "Strategy", "get_strategy"]
