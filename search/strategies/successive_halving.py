"""Successive halving: rung 0 is a one-shot search; each later rung trains the best of the rung below (and its
best known layout, the floor) at a dearer budget of its ladder (``search.fidelity``), the last at the target.

A rung is a study of its own (``<study>-rung<k>``) that trains exactly its promotions, recomputed from the rung
below every time the search runs: a resumed search with more trials trains the new promotions, not the old ones.
The floor is enqueued first, so a deadline inside a rung drops new patterns before it; a rung the deadline cut
short is the last, and the answer says what it left unscored. Every rung's record goes to ``rungs.json``.
"""

from __future__ import annotations

import dataclasses

from composer.errors import ConfigError
from search.config import SearchConfig, budget_definition_digest
from search.engine import Stage
from search.fidelity import distinct_models, get_ladder, promote, rung_budget, target_tokens_of
from search.growth import grown_line
from search.lm import confirm_budget, get_lm_budget
from search.progress import stage_label
from search.strategies.base import (
    Answer,
    StagePlan,
    StageRun,
    Strategy,
    known_first,
    make_space,
)
from search.strategies.halving_answer import assemble_answer


class SuccessiveHalving(Strategy):
    name = "successive-halving"
    stage_kind = "rung"

    def stage_count(self, config: SearchConfig) -> int:
        return (len(get_ladder(config.budget).rungs) + (1 if config.probes_recall else 0)
                + (1 if config.confirm_seeds > 1 else 0))

    def label(self, config: SearchConfig, index: int) -> str:
        rungs = len(get_ladder(config.budget).rungs)
        if index == confirm_index(config):
            return "confirmation: "
        if index == rungs:
            return "recall probe: "
        return f"{stage_label(self.stage_kind, index, rungs)} " if rungs > 1 else ""

    def first_config(self, config: SearchConfig) -> SearchConfig:
        trained = last_rung_seeds(config)
        if 1 < config.confirm_seeds <= trained:
            raise ConfigError(f"--confirm-seeds {config.confirm_seeds}: the {config.budget} ladder's last rung already "
                              f"trains {trained} seeds of every finalist; pass --confirm-seeds {trained + 1} or more "
                              "to add seeds that chose nothing, or leave it out")
        return rung_config(config, 0)

    def next_stage(self, config: SearchConfig, done: list[StageRun], echo) -> StagePlan | None:
        ladder = get_ladder(config.budget)
        index = len(done)
        if index == len(ladder.rungs) and config.probes_recall and done[-1].rows:
            return recall_plan(config, done)
        if index == confirm_index(config):
            if not done[len(ladder.rungs) - 1].rows:  # the answer is a lower rung's: nothing at the target to confirm
                return None
            return confirm_plan(config, self.answer(config, done, None, False), len(done), done[0].stage.space)
        rung = rung_config(config, index) if index < len(ladder.rungs) else None
        if rung is None or (done and not done[-1].rows):
            return None
        if not done:
            space = make_space(config, config.layers)
            return StagePlan(rung, Stage(0, space, config.trials, rung.study_name, known_first(config, space, echo)))
        below = done[-1].rows
        step = ladder.rungs[index]
        target_tokens, target_trunk = target_tokens_of(ladder, config.target)
        grown_to = get_lm_budget(rung.budget).extrapolate_to if config.evaluator == "lm" else None
        model_of = same_model_at(config, rung.budget)
        promoted = promote(below, step.keep, step.promote_by, target_tokens, target_trunk, step.hedge,
                           fit_from=step.fit_from, known=step.known, pool=recall_pool(config), model_of=model_of)
        promoted.sort(key=lambda row: not row.get("known"))  # the floor first: a deadline drops new patterns
        # a rung that continues the trunks of the rung below trains each at that rung's rate; the rate goes with the
        # promotion so that a candidate whose trunk is gone trains there from scratch (search.lm), by the same
        # procedure as the rest, not a fresh choice among the budget's rates
        continues = config.evaluator == "lm" and get_lm_budget(rung.budget).continues
        first = tuple((row["pattern"], {"promoted_from": row["trial"],
                                        **({"known": row["known"]} if row.get("known") else {}),
                                        **({"forecast": row["forecast"]} if row.get("forecast") else {}),
                                        **({"chosen_lr": row["lr"]} if continues and isinstance(row.get("lr"),
                                                                                                (int, float)) else {})})
                      for row in promoted)
        announce = (f"{stage_label('rung', index, len(ladder.rungs))}: promoting {len(promoted)} of {len(below)}"
                    + (f" by forecast at {target_tokens:,} tokens" if step.promote_by == "forecast" else "") + ": "
                    + ", ".join(row["pattern"] + (f" ({row['known']})" if row.get("known") else "")
                                + (f" {row['forecast']['mean']:.3f}" if row.get("forecast") else "")
                                for row in promoted))
        if model_of is not None:
            distinct = {row["trial"] for row in distinct_models(below, model_of)}
            twins = [row["pattern"] for row in below if row["trial"] not in distinct]
            if twins:
                announce += f"; {', '.join(twins)} left out (the same model at {grown_to} as a better candidate)"
        if grown_to:  # a pattern whose model at the target has fewer layers says so before it trains
            grown = [config.growth.grow(row["pattern"], grown_to, row.get("known")) for row in promoted]
            dropped = [grown_line(row["pattern"], model.layout, model.widths) for row, model in zip(promoted, grown)]
            announce += "".join(f"; {line}" for line in dropped if line)
        if grown_to and config.attention_at_target == "keep":
            announce += f"; new patterns grown to {grown_to} with their attention layers kept, not repeated"
        stage = Stage(index, done[0].stage.space, len(promoted), rung.study_name, first, only_first=True)
        return StagePlan(rung, stage, announce)

    def answer(self, config: SearchConfig, done: list[StageRun], stopped: str | None,
               out_of_time: bool) -> Answer:
        return assemble_answer(config, done, stopped, out_of_time)



def same_model_at(config: SearchConfig, budget: str):
    """How the rung at ``budget`` names the model it trains for a promoted row, when it grows the patterns to a
    target's size (else None: each pattern is its own model): the layout of the model the search's growth rule
    gives it (``search.growth.Grown``), as the rung's evaluator trains it (``LanguageModelEvaluator.grown``)."""
    grown_to = get_lm_budget(budget).extrapolate_to if config.evaluator == "lm" else None
    if grown_to is None:
        return None
    growth = config.growth
    return lambda row: growth.grow(row["pattern"], grown_to, row.get("known")).layout


def recall_pool(config: SearchConfig):
    """Under ``--min-recall`` (or the recall objective), the new patterns the answer (or the front's recalling end)
    can come from: those with a layer that keeps every token of the probe's longest length on their model at the
    target (``search.cost.keeps_every_token``; every finalist probed without one recalled 0.015 or less). Each rung
    promotes as many of them as of the unconstrained best, so the last rung does not hold a single candidate for
    the answer. None when the finalists' recall is not asked for. The length is the probe's longest, or where the
    trained models' recall is read (``config.reads_trained_recall``) the last rung's context."""
    if config.recall_source is None:
        return None
    from composer.presets import get_preset
    from search.cost import keeps_every_token

    length = config.recall_length if config.probes_recall else last_rung_budget(config).seq_len
    from search.growth import Grown

    widths = get_preset(config.report_target).arch

    def recalls(row: dict) -> bool:
        grown = Grown.stored_in(row, config.report_target)  # its model at the target, as its trial stored it
        return keeps_every_token(widths.with_pattern(row["pattern"]) if grown is None else grown.arch, length)

    return recalls


def recall_plan(config: SearchConfig, done: list[StageRun]) -> StagePlan:
    """The stage after the last rung that probes the finalists' recall (``search.recall``, the search's
    ``recall_budget``: each finalist's mixers alone on MQAR), a study of its own (``<study>-recall-<budget>-<its
    definition's digest>``: a search run again after the probe's budget changed probes its finalists again, where
    a study under the bare name would have been refused at the end of the search)."""
    rows = done[-1].rows
    definition = budget_definition_digest("recall", config.recall_budget)
    first = tuple((row["pattern"], {"promoted_from": row["trial"], **({"known": row["known"]} if row.get("known")
                                                                     else {})}) for row in rows)
    probe = dataclasses.replace(config, evaluator="recall", budget=config.recall_budget, strategy="one-shot",
                                study=f"{base_study(config)}-recall-{config.recall_budget}-{definition}", sampler="random",
                                prune=False, known=False, objectives=["score"], min_recall=None,
                                report_at=config.report_target, confirm_seeds=1)
    announce = (f"recall probe: {len(rows)} finalists' mixers on MQAR ({config.recall_budget}): "
                + ", ".join(row["pattern"] for row in rows))
    return StagePlan(probe, Stage(len(done), done[0].stage.space, len(rows), probe.study_name, first,
                                  only_first=True), announce)


def last_rung_budget(config: SearchConfig):
    """The lm budget (``search.lm.LMBudget``) of the ladder's last rung, at the search's target."""
    ladder = get_ladder(config.budget)
    return get_lm_budget(rung_budget(ladder, len(ladder.rungs) - 1, config.target))


def last_rung_seeds(config: SearchConfig) -> int:
    """How many seeds the ladder's last rung trains of every finalist (its first chooses the rate)."""
    return last_rung_budget(config).seeds


def confirm_index(config: SearchConfig) -> int | None:
    """The confirmation's stage: after the rungs and the probe, when --confirm-seeds asks for one; else None."""
    if config.confirm_seeds == 1:
        return None
    return len(get_ladder(config.budget).rungs) + (1 if config.probes_recall else 0)


def confirm_plan(config: SearchConfig, provisional: Answer, index: int, space) -> StagePlan | None:
    """The stage after the last rung (and the probe) that trains the best new and the best known finalist to
    ``--confirm-seeds`` seeds, at the last rung's budget from scratch, at the rate the rungs chose for each (its
    kept trunk's): with the last rung's seed they pair, and the answer's interval is paired over them
    (``search.verdict``) instead of resting on a seed spread measured elsewhere. The two are the ones the answer
    compares: among the finalists that meet --min-recall, where it is given. None when one of them is missing."""
    from search.best_known import best_known
    from search.cost.limits import CostLimits, eligible_at_known_cost

    # the rows the verdict will choose its pair from (search.run): those meeting --min-recall, then the known cost,
    # held to the one best known layout the verdict compares with
    known = best_known(provisional.rows, provisional.eligible)
    eligible, _ = eligible_at_known_cost(provisional.rows, provisional.eligible, CostLimits.of(config), known)
    pool = eligible if eligible is not None else provisional.rows
    new = next((row for row in pool if not row.get("known")), None)
    if new is None or known is None:
        return None
    last = rung_config(config, len(get_ladder(config.budget).rungs) - 1)
    trained = last_rung_seeds(config)  # seeds config.seed .. + trained - 1: the confirmation's come after them
    confirm = dataclasses.replace(last, budget=confirm_budget(last.budget, config.confirm_seeds - trained),
                                  seed=config.seed + trained,
                                  study=f"{base_study(config)}-confirm{config.confirm_seeds}",
                                  sampler="random", prune=False, known=False, objectives=["score"], min_recall=None,
                                  confirm_seeds=1)
    # each at the rate it was scored at: a continued last rung's is the rate rung 1 chose (its trunk's)
    rates = {row["pattern"]: {"chosen_lr": row["lr"]} if isinstance(row.get("lr"), (int, float)) else {}
             for row in (new, known)}
    first = ((new["pattern"], {"promoted_from": new["trial"], **rates[new["pattern"]]}),
             (known["pattern"], {"promoted_from": known["trial"], "known": known["known"], **rates[known["pattern"]]}))
    seeds = range(config.seed + trained, config.seed + config.confirm_seeds)
    announce = (f"confirmation: {new['pattern']} and {known['known']} {known['pattern']} at seed(s) "
                f"{', '.join(map(str, seeds))} ({last.budget}, each at its chosen rate)")
    return StagePlan(confirm, Stage(index, space, 2, confirm.study_name, first, only_first=True), announce)


def base_study(config: SearchConfig) -> str:
    """The name the search's studies derive from (``--study``, else the settings), without the finalists'
    objectives and --min-recall, which change no rung: a search run again with them probes the finished rungs'
    finalists instead of training every rung again."""
    named = config if config.study else dataclasses.replace(config, objectives=["score"], min_recall=None,
                                                            confirm_seeds=1)
    return named.study_name


def rung_config(config: SearchConfig, index: int) -> SearchConfig:
    """The settings rung ``index`` runs with: its own lm budget and study; the later rungs train exactly the
    promoted patterns (no sampler choice, no pruning)."""
    ladder = get_ladder(config.budget)
    study = base_study(config) if index == 0 else f"{base_study(config)}-rung{index}"
    # every rung's costs are those of the model at the target; rungs rank by the score alone (the other
    # objectives pick the finalists' front, and --min-recall the answer, after the last rung)
    changes = {"budget": rung_budget(ladder, index, config.target), "strategy": "one-shot", "study": study,
               "report_at": config.report_target, "objectives": ["score"], "min_recall": None, "confirm_seeds": 1}
    if index > 0:
        changes.update(sampler="random", prune=False, known=False)
    return dataclasses.replace(config, **changes)


