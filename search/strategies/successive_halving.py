"""Successive halving: rung 0 is a one-shot search; each later rung trains the best of the rung below (and its
best known layout, the floor) at a dearer budget of its ladder (``search.fidelity``), the last at the target.

A rung is a study of its own (``<study>-rung<k>``) that trains exactly its promotions, recomputed from the rung
below every time the search runs: a resumed search with more trials trains the new promotions, not the old ones.
The floor is enqueued first, so a deadline inside a rung drops new patterns before it; a rung the deadline cut
short is the last, and the answer says what it left unscored. Every rung's record goes to ``rungs.json``.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

from composer.errors import ConfigError
from search.config import SearchConfig, budget_definition_digest
from search.engine import Stage
from search.evidence_record import Evidence, IncomparableEvidence, attach, of
from search.fidelity import distinct_models, get_ladder, promote, rung_budget, target_tokens_of
from search.leaderboard import failures
from search.lm import CONFIRM_NAME, confirm_budget, get_lm_budget, measured_seed_noise, stage_setting
from search.progress import stage_label
from search.strategies.base import (
    Answer,
    StagePlan,
    StageRun,
    Strategy,
    known_first,
    make_space,
    missing_first,
)


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
        if grown_to and config.attention_at_target == "keep":
            announce += f"; new patterns grown to {grown_to} with their attention layers kept, not repeated"
        stage = Stage(index, done[0].stage.space, len(promoted), rung.study_name, first, only_first=True)
        return StagePlan(rung, stage, announce)

    def answer(self, config: SearchConfig, done: list[StageRun], stopped: str | None,
               out_of_time: bool) -> Answer:
        rungs = len(get_ladder(config.budget).rungs)
        probed = next((run for run in done[rungs:] if run.config.evaluator == "recall"), None)
        confirmed = next((run for run in done[rungs:] if is_confirmation(run.config)), None)
        done = done[:rungs]
        records = [rung_record(run) for run in done]
        answered = max(i for i, run in enumerate(done) if run.rows)
        not_probed = None
        if stopped is not None and config.probes_recall and probed is None and len(done) == rungs:
            not_probed, stopped = stopped, None  # every rung finished: only the probe after them was not run
        if stopped is not None:
            records[answered]["stopped_early"] = stopped
        elif answered < len(done) - 1:
            records[answered]["stopped_early"] = (
                f"--timeout passed during rung {len(done) - 1}, before it scored a candidate" if out_of_time else
                f"rung {len(done) - 1} scored no candidate: every promotion failed (rungs.json says why)")
        elif out_of_time and records[answered].get("missing"):
            records[answered]["stopped_early"] = f"--timeout passed during rung {answered}"
        rows = [{**row, "rung": answered} for row in done[answered].rows] if answered else done[answered].rows
        summary = {"rungs": [{key: record[key] for key in ("rung", "study", "budget", "candidates", "seconds",
                                                            "wall_seconds")} for record in records]}
        answer = Answer(done[answered].study, rows, stopped_early=stopped_early(records),
                        files={"rungs.json": records}, summary=summary)
        if not_probed is not None:
            summary["recall_probe"] = {"not_run": not_probed}
            if config.min_recall is not None:
                answer.eligible = []  # no finalist was shown to meet it
        answered_config = done[answered].config  # the verdict weighs the same stage's spread (search.run)
        attach(rows, stage_setting(answered_config), answered_config.seed)  # ranked on these seeds
        # which finalists may be the answer is decided on the evidence the confirmation's pair was chosen on, so
        # the pair it confirms is the pair the verdict compares (issue 60); its seeds then join their records
        mark_eligible(config, answer, probed)
        if confirmed is not None and answered == rungs - 1:  # the front weighs the confirmed pair's losses over their seeds, as the verdict
            add_confirmed_seeds(config, answer, confirmed)
            recheck_eligible(config, answer)
        weigh_front(config, answer, measured_seed_noise(answered_config.evaluator, answered_config.budget))
        return answer


def same_model_at(config: SearchConfig, budget: str):
    """How the rung at ``budget`` names the model it trains for a promoted row, when it grows the patterns to a
    target's size (else None: each pattern is its own model): the layout ``search.growth.layout_at_target`` gives it,
    as the rung's evaluator trains it (``LanguageModelEvaluator.trained_pattern``)."""
    grown_to = get_lm_budget(budget).extrapolate_to if config.evaluator == "lm" else None
    if grown_to is None:
        return None
    growth = config.growth

    @functools.cache  # growing a pattern takes ~0.1 s, and the promotion and its announcement both ask
    def grown(pattern: str, known: str | None) -> str:
        return growth.layout(pattern, grown_to, known)

    return lambda row: grown(row["pattern"], row.get("known"))


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
    widths = get_preset(config.report_target).arch

    def recalls(row: dict) -> bool:
        return keeps_every_token(widths.with_pattern(row.get("target_pattern") or row["pattern"]), length)

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


def is_confirmation(config: SearchConfig) -> bool:
    """Whether a stage's settings are those of the confirmation (``confirm_plan``)."""
    return config.evaluator == "lm" and CONFIRM_NAME.fullmatch(str(config.budget)) is not None


def confirm_plan(config: SearchConfig, provisional: Answer, index: int, space) -> StagePlan | None:
    """The stage after the last rung (and the probe) that trains the best new and the best known finalist to
    ``--confirm-seeds`` seeds, at the last rung's budget from scratch, at the rate the rungs chose for each (its
    kept trunk's): with the last rung's seed they pair, and the answer's interval is paired over them
    (``search.verdict``) instead of resting on a seed spread measured elsewhere. The two are the ones the answer
    compares: among the finalists that meet --min-recall, where it is given. None when one of them is missing."""
    from search.cost.limits import CostLimits, eligible_at_known_cost

    # the rows the verdict will choose its pair from (search.run): those meeting --min-recall, then the known cost
    eligible, _ = eligible_at_known_cost(provisional.rows, provisional.eligible, CostLimits.of(config))
    pool = eligible if eligible is not None else provisional.rows
    new = next((row for row in pool if not row.get("known")), None)
    known = next((row for row in pool if row.get("known")), None)
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


def add_confirmed_seeds(config: SearchConfig, answer: Answer, confirmed: StageRun) -> None:
    """Each confirmed finalist's evidence record (``row["evidence"]``) gets the confirmation's seeds: the last
    rung's seeds, on which it was ranked and its rate chosen, and the further seeds, which chose nothing
    (``search.evidence_record``). A record takes them only at its own setting and rate and on seeds it does not
    have; a refusal is recorded with its reason. Every finalist the confirmation's study holds counts, not only
    this run's pair: a search run again under another --min-recall confirms another pair in the same study, and
    the front would otherwise weigh the first pair's known layout on one seed against the stand-in spread
    ("even") where its 3 seeds say better."""
    from search.leaderboard import leaderboard

    setting = stage_setting(confirmed.config)
    by_pattern = {row["pattern"]: row for row in leaderboard(confirmed.study, maximize=False)}
    said, refused = [], []
    for row in answer.rows:
        theirs = by_pattern.get(row["pattern"])
        if theirs is None:
            continue
        further = Evidence.of_row(theirs, setting, confirmed.config.seed, selected_on=())
        try:
            row["evidence"] = of(row).with_seeds(further).as_dict()
        except IncomparableEvidence as err:
            refused.append({"pattern": row["pattern"], "reason": str(err)})
            continue
        said.append(row["pattern"])
        add_confirmed_recall(row, theirs)
    first = confirmed.config.seed
    answer.summary["confirmation"] = {"study": confirmed.study.study_name, "patterns": said,
                                      "seeds": config.confirm_seeds,
                                      "further_seeds": list(range(first, first + get_lm_budget(
                                          confirmed.config.budget).seeds)),
                                      "refused": refused, "failures": failures(confirmed.study)}


def add_confirmed_recall(row: dict[str, Any], confirmed: dict[str, Any]) -> None:
    """A confirmed finalist's trained recall over the last rung's seeds and the confirmation's (each measured on
    the same held-out sequences, ``search.trained_recall``): the per-seed reports joined in its details and its
    figure recomputed, where both were measured alike; else its figure stays the last rung's."""
    from search.trained_recall import PER_SEED, SUMMARY, combined

    joined = combined((row.get("details") or {}).get(PER_SEED), (confirmed.get("details") or {}).get(PER_SEED))
    if joined is not None:
        row["details"] = {**row["details"], PER_SEED: joined[0], SUMMARY: joined[1]}
        row[SUMMARY] = joined[1]


def mark_eligible(config: SearchConfig, answer: Answer, probed: StageRun | None) -> None:
    """Recall into the finalists' rows (``probed``: the recall stage, None when it did not run) and, under
    --min-recall, the rows the answer may come from (``answer.eligible``) with the summary's account of them."""
    from search.tradeoffs import attach_recall, attach_trained_recall, meets, recall_threshold

    summary = answer.summary
    if probed is not None:
        attach_recall(answer.rows, probed.rows)
        summary["recall_probe"] = {"study": probed.study.study_name, "budget": config.recall_budget,
                                   "failures": failures(probed.study)}
    elif config.reads_trained_recall:  # the last rung measured the trained models: no probe was trained
        attach_trained_recall(answer.rows)
    if config.min_recall is not None and (probed is not None or config.reads_trained_recall):
        threshold, why = recall_threshold(answer.rows, config.min_recall)
        for row in answer.rows:
            row["meets_min_recall"] = meets(row, threshold, within_noise=config.min_recall == "known")
        answer.eligible = [row for row in answer.rows if row["meets_min_recall"]]
        summary["min_recall"] = {"threshold": threshold, "why": why, "source": config.recall_source,
                                 "why_probe": config.why_probe,
                                 "eligible": [row["pattern"] for row in answer.eligible]}
        record_recall(answer)


def record_recall(answer: Answer) -> None:
    """The summary's recall of every finalist, as its rows hold it now."""
    from search.tradeoffs import recall_interval

    answer.summary["min_recall"]["recall"] = {
        row["pattern"]: {"value": row.get("recall"),
                         "ci": recall_interval(row) if row.get("recall") is not None else None,
                         "length": row.get("recall_length")} for row in answer.rows}


def recheck_eligible(config: SearchConfig, answer: Answer) -> None:
    """After the confirmation's seeds joined the trained recall: the finalists whose standing against --min-recall
    the joined figures would change, said in the summary (``min_recall.changed_by_confirmation``), while the
    eligibility stays the one the confirmed pair was chosen on, so the verdict compares that pair."""
    from search.tradeoffs import meets, recall_threshold

    if config.min_recall is None or "min_recall" not in answer.summary:
        return
    if config.reads_trained_recall:
        from search.tradeoffs import attach_trained_recall

        attach_trained_recall(answer.rows)  # the joined figures (search.trained_recall.combined)
    threshold, _ = recall_threshold(answer.rows, config.min_recall)
    changed = [{"pattern": row["pattern"], "meets_on_joined_seeds": now}
               for row in answer.rows
               if (now := meets(row, threshold, within_noise=config.min_recall == "known")) != row["meets_min_recall"]]
    if changed:
        answer.summary["min_recall"]["changed_by_confirmation"] = {
            "threshold": threshold, "patterns": changed,
            "note": "eligibility stays the one the confirmed pair was chosen on (the last rung's seeds); these "
                    "finalists' standing against --min-recall differs over the confirmation's joined seeds"}
    record_recall(answer)


def weigh_front(config: SearchConfig, answer: Answer, noise=None) -> None:
    """Under several objectives the front, and each known layout against the answer (``search.tradeoffs``), their
    losses weighed against ``noise``: the seed spread measured at the budget of the rung the rows come from (a
    ``search.verdict.SeedNoise``, or None)."""
    from search.tradeoffs import front, known_against

    summary = answer.summary
    if len(config.objectives) > 1:
        on_front = front(answer.rows, config.objectives, noise)
        for row in answer.rows:
            row["on_front"] = row in on_front
        pool = answer.eligible if answer.eligible is not None else answer.rows
        best = pool[0] if pool else answer.rows[0]
        summary["front"] = {"objectives": list(config.objectives),
                            "patterns": [row["pattern"] for row in on_front],
                            "known": known_against(best, answer.rows, config.objectives, noise),
                            "loss_noise": noise.as_dict() if noise is not None else None}
        if "recall" in config.objectives:
            summary["front"]["recall_source"] = config.recall_source


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


def rung_record(run: StageRun) -> dict[str, Any]:
    """A rung's record in rungs.json. ``seconds``: its training time summed over its scored trials (also those
    of an earlier, killed invocation); ``wall_seconds``: this invocation's time in the rung; ``missing``: the
    promotions it did not score, each with why."""
    index = run.stage.index
    rows = [{**row, "rung": index} for row in run.rows] if index else run.rows
    attach(rows, stage_setting(run.config), run.config.seed)  # each row's evidence at its rung's setting
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
