"""The best known layout of a search's answer: the one known layout its cost limits, cost ratios, standing at equal
cost and verdict all weigh the answer against.

Why one function: each of those once found "the best known layout" for itself, and they disagreed. The equal-cost
search of 2026-11-29 held its finalists to Nemotron-H's cost (the first known row of the whole ranking) while its
verdict compared the answer with linear-7to1 (the first known row of the finalists that met ``--min-recall``):
``benchmarks/results/equal_cost_search-2026-11-29.json``, ``cost_limits.best_known`` against
``at_equal_cost.known``. The cost limits also skipped a best known layout without cost figures for the next one
that had them.

The rule: of the rows the answer may come from (``eligible``, the finalists that meet ``--min-recall``; else every
row of the ranking), the first known layout, the rows ranked best first by their loss after the last rung, equal
losses to the earlier trial (the leaderboard's order, ``search.leaderboard``). The known cost limits never remove a
known layout (it is what they measure against), so applying them after this choice leaves it in the pool. It is
computed once per answer (``search.run``, the confirmation's pair in ``search.strategies.successive_halving``) and
passed to each reader; a reader called without it computes the same row by this rule.

Before an answer exists, while a stage trains, a ``known`` cost limit holds candidates to the best known layout
*scored so far* (``search.cost.limits.best_known_so_far``: the same loss and tie rule over the stage's trials).
"""

from __future__ import annotations

from typing import Any


def best_known(rows: list[dict[str, Any]], eligible: list[dict[str, Any]] | None = None) -> dict[str, Any] | None:
    """The best known layout's row (module doc): the first row with ``known`` of ``eligible``, or of ``rows`` when
    no filter has run (``eligible`` None); None when that pool holds no known layout."""
    pool = rows if eligible is None else eligible
    return next((row for row in pool if row.get("known")), None)


def named(row: dict[str, Any] | None) -> dict[str, Any] | None:
    """``{"name", "pattern"}`` of a best known row, what best.json records as ``best_known``; None for None."""
    return None if row is None else {"name": row["known"], "pattern": row["pattern"]}


__all__ = ["best_known", "named"]
