"""Successive halving's answer: the stages a search ran, assembled into the rows its verdict weighs.

Planning the rungs (``search.strategies.successive_halving``) decides what trains; this room decides what the
trained stages say: which rung the answer comes from, each finalist's evidence with the confirmation's seeds
joined, which finalists may be the answer under --min-recall (decided once, on the seeds the confirmed pair was
chosen on), and the front. Every rung's record is written to ``rungs.json``.
"""

from __future__ import annotations

from typing import Any

from search.config import SearchConfig
from search.evidence_record import Evidence, IncomparableEvidence, attach, of
from search.fidelity import get_ladder
from search.leaderboard import failures
from search.lm import BudgetName, get_lm_budget, measured_seed_noise, stage_setting
from search.strategies.base import Answer, StageRun, missing_first


def assemble_answer(config: SearchConfig, done: list[StageRun], stopped: str | None,
                    out_of_time: bool) -> Answer:
    """The search's answer from its stages: the highest rung that scored a candidate, its rows with their
    evidence records, the rungs' records for rungs.json, the recall probe's and the confirmation's figures joined
    in, the finalists that may be the answer and, under several objectives, the front."""
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
    if confirmed is not None and answered == rungs - 1:  # the front weighs the confirmed pair's seeds, as the verdict
        add_confirmed_seeds(config, answer, confirmed)
        recheck_eligible(config, answer)
    weigh_front(config, answer, measured_seed_noise(answered_config.evaluator, answered_config.budget))
    return answer


def is_confirmation(config: SearchConfig) -> bool:
    """Whether a stage's settings are those of the confirmation (``confirm_plan``)."""
    return config.evaluator == "lm" and BudgetName.parse(config.budget).confirms


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
