"""Successive halving: rung 0 is a one-shot search; each later rung trains the best of the rung below (and its
best known layout, the floor) at a dearer budget of its ladder (``search.fidelity``), the last at the target.

A rung is a study of its own (``<study>-rung<k>``) that trains exactly its promotions, recomputed from the rung
below every time the search runs: a resumed search with more trials trains the new promotions, not the old ones.
The floor is enqueued first, so a deadline inside a rung drops new patterns before it; a rung the deadline cut
short is the last, and the answer says what it left unscored. Every rung's record goes to ``rungs.json``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from search.config import SearchConfig
from search.engine import Stage
from search.fidelity import get_ladder, promote, rung_budget, target_tokens_of
from search.leaderboard import failures
from search.progress import stage_label
from search.strategies.base import Answer, StagePlan, StageRun, Strategy, known_first, make_space, missing_first


class SuccessiveHalving(Strategy):
    name = "successive-halving"
    stage_kind = "rung"

    def stage_count(self, config: SearchConfig) -> int:
        return len(get_ladder(config.budget).rungs)

    def first_config(self, config: SearchConfig) -> SearchConfig:
        return rung_config(config, 0)

    def next_stage(self, config: SearchConfig, done: list[StageRun], echo) -> StagePlan | None:
        ladder = get_ladder(config.budget)
        index = len(done)
        rung = rung_config(config, index) if index < len(ladder.rungs) else None
        if rung is None or (done and not done[-1].rows):
            return None
        if not done:
            space = make_space(config, config.layers)
            return StagePlan(rung, Stage(0, space, config.trials, rung.study_name, known_first(config, space, echo)))
        below = done[-1].rows
        step = ladder.rungs[index]
        target_tokens, target_trunk = target_tokens_of(ladder, config.target)
        promoted = promote(below, step.keep, step.promote_by, target_tokens, target_trunk, step.hedge,
                           fit_from=step.fit_from)
        promoted.sort(key=lambda row: not row.get("known"))  # the floor first: a deadline drops new patterns
        first = tuple((row["pattern"], {"promoted_from": row["trial"],
                                        **({"known": row["known"]} if row.get("known") else {}),
                                        **({"forecast": row["forecast"]} if row.get("forecast") else {})})
                      for row in promoted)
        announce = (f"{stage_label('rung', index, len(ladder.rungs))}: promoting {len(promoted)} of {len(below)}"
                    + (f" by forecast at {target_tokens:,} tokens" if step.promote_by == "forecast" else "") + ": "
                    + ", ".join(row["pattern"] + (f" ({row['known']})" if row.get("known") else "")
                                + (f" {row['forecast']['mean']:.3f}" if row.get("forecast") else "")
                                for row in promoted))
        stage = Stage(index, done[0].stage.space, len(promoted), rung.study_name, first, only_first=True)
        return StagePlan(rung, stage, announce)

    def answer(self, config: SearchConfig, done: list[StageRun], stopped: str | None,
               out_of_time: bool) -> Answer:
        records = [rung_record(run) for run in done]
        answered = max(i for i, run in enumerate(done) if run.rows)
        if stopped is not None:
            records[answered]["stopped_early"] = stopped
        elif answered < len(done) - 1:
            records[answered]["stopped_early"] = (f"--timeout passed during rung {len(done) - 1}, before it scored "
                                                  "a candidate")
        elif out_of_time and records[answered].get("missing"):
            records[answered]["stopped_early"] = f"--timeout passed during rung {answered}"
        rows = [{**row, "rung": answered} for row in done[answered].rows] if answered else done[answered].rows
        summary = {"rungs": [{key: record[key] for key in ("rung", "study", "budget", "candidates", "seconds",
                                                            "wall_seconds")} for record in records]}
        return Answer(done[answered].study, rows, stopped_early=stopped_early(records),
                      files={"rungs.json": records}, summary=summary)


def rung_config(config: SearchConfig, index: int) -> SearchConfig:
    """The settings rung ``index`` runs with: its own lm budget and study; the later rungs train exactly the
    promoted patterns (no sampler choice, no pruning)."""
    ladder = get_ladder(config.budget)
    study = config.study_name if index == 0 else f"{config.study_name}-rung{index}"
    changes = {"budget": rung_budget(ladder, index, config.target), "strategy": "one-shot", "study": study,
               "report_at": config.report_target}  # every rung's costs are those of the model at the target
    if index > 0:
        changes.update(sampler="random", prune=False, known=False)
    return dataclasses.replace(config, **changes)


def rung_record(run: StageRun) -> dict[str, Any]:
    """A rung's record in rungs.json. ``seconds``: its training time summed over its scored trials (also those
    of an earlier, killed invocation); ``wall_seconds``: this invocation's time in the rung; ``missing``: the
    promotions it did not score, each with why."""
    index = run.stage.index
    rows = [{**row, "rung": index} for row in run.rows] if index else run.rows
    record = {"rung": index, "study": run.study.study_name, "budget": run.config.budget, "candidates": len(rows),
              "seconds": sum(row.get("seconds") or 0.0 for row in rows), "wall_seconds": run.finished - run.started,
              "leaderboard": rows, "failures": failures(run.study)}
    if run.stage.only_first:
        record["promoted"] = [pattern for pattern, _ in run.stage.first]
        forecasts = {pattern: attrs["forecast"] for pattern, attrs in run.stage.first if "forecast" in attrs}
        if forecasts:
            record["promoted_forecasts"] = forecasts
        record["missing"] = missing_first(run)
    return record


def stopped_early(records: list[dict]) -> dict[str, Any] | None:
    """Where a search cut short by its deadline stopped (the rung its answer comes from) and what it left
    unscored, or None if it finished."""
    for record in records:
        if "stopped_early" in record:
            return {"rung": record["rung"], "why": record["stopped_early"],
                    "missing": [m for r in records for m in r.get("missing", [])]}
    return None
