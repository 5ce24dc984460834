"""``composer search``: run a strategy's stages, then write the leaderboard, best.json, plots and W&B summary.

Output directory::

    study.db                      the Optuna storage (unless --storage names another)
    config.json                   the search settings
    leaderboard.json / .csv       one row per scored pattern, best first (rank, pattern, score, params, ...)
    best.json                     the winner, with the study and stage it came from
    failures.json                 failed and skipped trials with their reasons
    measured_cost.json            the finalists' and known layouts' measured cost at the target (search.cost.measured)
    *.png                         optimisation history, score vs attention share, per-layer frequency, Pareto
"""

from __future__ import annotations

import dataclasses

import functools
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from composer.accounting import format_bytes
from composer.errors import ComposerRunError, ConfigError
from composer.files import atomic_write_json, check_output_dir, make_output_dir
from search.config import SearchConfig
from search.cost import (
    MAX_PATTERNS_CHECKED,
    first_within,
    max_kv_holding,
    parse_max_kv,
    recall_under_max_kv,
)
from search.engine import (
    Stage,
    enqueue_first,
    launch_workers,
    open_study,
    run_worker,
    stage_evaluator,
)
from search.evaluators import make_evaluator
from search.evidence_record import attach
from search.leaderboard import failures, leaderboard, write_leaderboard
from search.cost.front import cost_standing, plot_loss_against_cost
from search.best_known import best_known, named
from search.cost.limits import CostLimits, check_known_limits, eligible_at_known_cost
from search.cost.measured import add_measured_cost, cost_grid
from search.plots import plot_all, plot_loss_against_recall, plot_rung_curves
from search.progress import SearchEta, SearchProgress, evaluations_done, worker_heartbeat
from search.resume import StudyLock, reap_dead_workers
from search.results import SUMMARY_KEYS
from search.storage import GRACE_S, check_storage, default_storage_url, worker_lock_path
from search.strategies import StageRun, get_strategy
from search.strategies.base import make_space, missing_first
from search.summary import summary_text, tradeoff_lines  # noqa: F401 (the summary's home is search.summary)
from search.tracking import log_summary
from search.verdict import compare_with_known


def run_stage(config: SearchConfig, stage: Stage, label: str, precision: str, deadline: float | None,
              echo, allow_empty: bool = False, eta: SearchEta | None = None,
              kind: str = "stage") -> tuple[Any, list[dict[str, Any]]]:
    """Run one study (a strategy's stage or a rung) to its budget; returns the study and its leaderboard (empty
    only with ``allow_empty``: a rung that the deadline cut before it scored anything). ``eta``: the search's
    estimate of its time left (``search.progress``), ``kind``: what its lines call a stage."""
    evaluator = stage_evaluator(config, stage)
    maximize = evaluator.direction == "maximize"
    echo(f"{label}study {stage.study_name!r}: {stage.trials} trials over {stage.space.size:,} patterns "
         f"of {stage.space.describe} "
         f"({config.sampler_name}, {config.evaluator}/{config.budget}, {precision}, {config.workers} worker(s))")
    for pattern, attrs in stage.first:
        if "known_fit" in attrs:
            echo(f"   known layout {attrs['known']:<14} {pattern}  ({attrs.get('known_fit', '')})")
    promoted = frozenset(pattern for pattern, _ in stage.first) if stage.only_first else None
    progress = SearchProgress(stage.trials, maximize, label, kind=kind, index=stage.index, eta=eta, promoted=promoted)
    # one worker trains here: the evaluator's runs report while they train (issue 36: 150 s of silence before)
    live = config.workers == 1 and hasattr(evaluator, "heartbeat")
    if live:
        progress.eta.plan(stage.index, config, stage)
        progress.done = evaluations_done(open_study(config, stage, evaluator), promoted)
        progress.begin()
        evaluator.heartbeat = progress.heartbeat
    if config.workers == 1:
        try:
            run_worker(config, stage, 0, callbacks=[progress], deadline=deadline, on_bound=echo, evaluator=evaluator)
        finally:
            if live:
                evaluator.heartbeat = None
    else:
        enqueue_first(open_study(config, stage, evaluator), stage)  # before the workers race to it
        launch_workers(config, stage, deadline, poll=lambda: progress.poll(lambda: open_study(config, stage, evaluator)),
                       heartbeat=functools.partial(worker_heartbeat, label, stage.trials))
        # the retries of first patterns that failed once, here, in one process, now that the workers have ended
        run_worker(config, stage, 0, callbacks=[progress], deadline=deadline, on_bound=echo, evaluator=evaluator)
    study = open_study(config, stage, evaluator)
    with StudyLock(worker_lock_path(config.storage, config.out)) as lock:  # this run's workers have ended
        reap_dead_workers(study, requeue=False, alone=lock.alone, grace_s=GRACE_S)
    only = {pattern for pattern, _ in stage.first} if stage.only_first else None
    rows = leaderboard(study, maximize, {pattern: attrs["known"] for pattern, attrs in stage.first
                                         if "known" in attrs}, only=only)
    if not rows and not allow_empty:
        raise no_trial_completed(config, stage, failures(study))
    return study, rows


def no_trial_completed(config: SearchConfig, stage: Stage, failed: list[dict[str, Any]]) -> ComposerRunError:
    """The one line of a stage in which no trial completed: why (its first reasons) and what to do. A traceback
    said only the reasons (issue 47), and a re-run with the same --out met the same stored failures."""
    reasons = "; ".join(f"trial {f['trial']} {f['pattern']}: {f['reason']}" for f in failed[:3]) or "no trials ran"
    if failed and all(f["state"] == "skipped" for f in failed):
        return ComposerRunError(f"no trial of study {stage.study_name!r} completed: a constraint skipped every "
                                f"candidate proposed ({reasons}); few of the space's patterns meet --max-params, "
                                "--max-kv and the shares: relax them, or give more --trials")
    return ComposerRunError(f"no trial of study {stage.study_name!r} completed ({reasons}); the study in "
                            f"{config.storage or config.out} keeps these failures and does not train a pattern "
                            "again that failed twice the same way: fix the cause, then re-run with another --out "
                            "(or --study)")


def check_recall_under_max_kv(config: SearchConfig, echo) -> None:
    """Refuse (``known``) or warn (a fraction) when ``--max-kv`` leaves no pattern a layer that keeps every token
    of the recall probe's longest length: every finalist the probe has measured without one recalled 0.015 or
    less at 1,024 tokens, so the search would spend hours to answer with a known layout. Skipped for spaces too
    large to enumerate in seconds (``search.cost.MAX_PATTERNS_CHECKED``)."""
    if not (config.probes_recall and config.min_recall is not None and config.max_kv):
        return
    length = config.recall_length
    limit, at = parse_max_kv(config.max_kv)
    space = make_space(config, config.layers)
    if space.size > MAX_PATTERNS_CHECKED:  # a mixers space at 16 layers holds more patterns than atoms
        return
    patterns = space.enumerate()
    found = recall_under_max_kv(patterns, config.report_target, (limit, at), length, config.growth)
    if found is None or found["fit_and_keep"]:
        return
    cheapest = found["cheapest_keeping"]
    fix = (f"raise --max-kv to {max_kv_holding(cheapest[1], config.max_kv)} (the least any such pattern holds: "
           f"{cheapest[0]})" if cheapest else "add attention (A) or a window (W) to --primitives")
    if cheapest and config.attention_at_target == "repeat":  # stacking repeats the attention: keeping it may fit
        kept = recall_under_max_kv(patterns, config.report_target, (limit, at), length,
                                   dataclasses.replace(config.growth, attention="keep"))
        if kept and kept["fit_and_keep"]:
            fix += (f", or pass --attention-at-target keep ({kept['fit_and_keep']:,} patterns with attention then "
                    f"fit)")
    problem = (f"--max-kv {config.max_kv} leaves {found['fit']:,} of {found['patterns']:,} patterns, none with a "
               f"layer that keeps every token of the recall probe's {length:,} (attention, or a window that long) "
               f"on its model at {config.report_target}")
    if config.min_recall == "known":
        raise ConfigError(f"{problem}, so none can recall as a known layout with attention: {fix}, or "
                          f"drop --min-recall")
    echo(f"warning: {problem}; without one no finalist probed so far recalled above 0.015 at 1,024 tokens "
         f"(docs/recall.md), so --min-recall {config.min_recall} may leave only known layouts: {fix}")


def check_limits_admit(config: SearchConfig) -> None:
    """Refuse a search whose ``--max-params`` and ``--max-kv`` admit none of its first stage's patterns (within its
    shares), naming the least a pattern holds: it would skip every candidate it proposed, without end (issue 47).
    Skipped for spaces too large to enumerate in seconds (``search.cost.MAX_PATTERNS_CHECKED``)."""
    if config.max_params is None and not config.max_kv:
        return
    space = make_space(config, config.layers)
    if space.size > MAX_PATTERNS_CHECKED:
        return
    patterns = [pattern for pattern in space.enumerate() if space.violation(pattern) is None]
    max_kv = parse_max_kv(config.max_kv) if config.max_kv else None
    found = first_within(patterns, config.widths, config.report_target, config.max_params, max_kv, config.growth)
    if found is None or found["fits"] or found["smallest"] is None:
        return
    among = f"none of the {found['patterns']:,} patterns" + (" within the shares" if space.min_share
                                                             or space.max_share else "")
    if found["least_cache"] is None:
        params, pattern = found["smallest"]
        raise ConfigError(f"--max-params {config.max_params:,} admits {among}: the smallest, {pattern}, has "
                          f"{params:,} non-embedding parameters at {config.widths}; raise --max-params to at least "
                          f"{params:,}")
    cache, pattern = found["least_cache"]
    fix = f"raise --max-kv to {max_kv_holding(cache, config.max_kv)}"
    if config.attention_at_target == "repeat" and first_within(patterns, config.widths, config.report_target,
                                                               config.max_params, max_kv,
                                                               dataclasses.replace(config.growth, attention="keep")
                                                               )["fits"]:
        fix += " or pass --attention-at-target keep (stacking repeats the attention layers)"
    raise ConfigError(f"--max-kv {config.max_kv} admits {among}{' and --max-params' if config.max_params else ''}: "
                      f"the least, {pattern}, holds {format_bytes(cache)} on its model at {config.report_target}; "
                      f"{fix}")


def check_depth_at_target(config: SearchConfig) -> None:
    """Refuse a ``--depth-at-target`` no model reaches the target's size at (one line), before anything is written:
    a pattern of the space's primitives is grown there as every candidate will be. One that lands beyond the
    growth's tolerance of the size (``scaling.extrapolate.OffTarget``) is not refused: other patterns may land
    within it, and each candidate that does not is skipped with the reason."""
    if config.growth.depth is None:
        return
    from composer.pattern import layers
    from scaling.extrapolate import OffTarget

    tokens = layers(config.primitives)
    sample = "".join(tokens[i % len(tokens)] for i in range(config.layers))
    try:
        config.growth.grow(sample, config.report_target)
    except OffTarget:
        pass


def no_eligible_note(summary: dict[str, Any]) -> str:
    """Why no finalist may be the answer: the known cost limits' reason where --min-recall left some, else
    --min-recall's."""
    recall = summary.get("min_recall") or {}
    if "cost_limits" in summary and (not recall or recall.get("eligible")):
        return f"no finalist meets the cost limits: {summary['cost_limits']['why']}"
    return "no finalist meets --min-recall: " + str(recall.get("why") or summary.get("recall_probe", {}).get("not_run"))


def resumed_line(config: SearchConfig, out: Path) -> str | None:
    """``resuming: ...`` where ``out``'s storage already holds finished trials (a search run again with the same
    --out continues it; issue 61: a resumed search never said so), else None. SQLite storages only: a server's or
    a journal's trials are counted by Optuna when the stages open them."""
    from search.results import list_studies
    from search.storage import default_storage_url

    url = config.storage or default_storage_url(out)
    studies = [study for study in list_studies(url) or [] if study["trials"].get("complete")]
    if not studies:
        return None
    done = sum(study["trials"]["complete"] for study in studies)
    return (f"resuming: {out} already holds {done:,} finished trial(s) in {len(studies)} "
            f"stud{'y' if len(studies) == 1 else 'ies'}; they are kept, not trained again")


def preflight(config: SearchConfig, echo=print):
    """Every check of ``config`` that needs no training, before anything is written to --out, a study is opened or
    a W&B run starts (issue 61; ``composer pipeline`` calls it before its own --out too): --out and --storage are
    reached (issue 69), the evaluator checks its settings (a missing --data, a source without text or a text field
    its records lack, a tokenizer that does not load), and the limits that no pattern might meet are checked.
    Returns the first stage's evaluator."""
    check_output_dir(config.out)
    check_storage(config.storage)
    first_config = get_strategy(config.strategy).first_config(config)
    evaluator = make_evaluator(first_config.evaluator, first_config.budget, config.widths, config.data,
                               config.tokenizer, config.precision, config.compile, config.trunks,
                               text_field=config.text_field)
    check_limits_admit(config)
    check_recall_under_max_kv(config, echo)
    check_known_limits(config)
    check_depth_at_target(config)
    return evaluator


def run_search(config: SearchConfig, echo=print, notes: Sequence[str] = ()) -> dict[str, Any]:
    """Run ``config``'s strategy stage by stage (``search.strategies``), then write what its answer ranks.
    ``notes``: lines echoed once the settings are accepted (composer search's account of the presets it chose, so
    that bad input stays one line)."""
    out = Path(config.out)
    strategy = get_strategy(config.strategy)
    evaluator = preflight(config, echo)
    for line in notes:
        echo(line)
    make_output_dir(out)
    resumed = resumed_line(config, out)
    if resumed:
        echo(resumed)
    (out / "config.json").write_text(json.dumps(config.to_dict(), indent=2))
    maximize = evaluator.direction == "maximize"
    precision = getattr(evaluator, "precision", None) or "the evaluator's own precision"
    if config.compile:
        precision += ", compiled"
    deadline = time.time() + config.timeout if config.timeout else None
    eta = SearchEta(config, strategy)  # the whole search's time left, across its stages
    done: list[StageRun] = []
    stopped = None
    while (plan := strategy.next_stage(config, done, echo)) is not None:
        label = strategy.label(config, plan.stage.index)
        if done and deadline is not None and time.time() >= deadline:
            # no stage starts past the deadline: Optuna's timeout would still start one trial in each
            stage_name = label.strip().rstrip(":") or "the next stage"  # "recall probe: " names "recall probe"
            stopped = f"--timeout passed before {stage_name}"
            echo(f"timeout: {stage_name} not started; the answer is the ranking before it")
            break
        if plan.announce:
            echo(plan.announce)
        started = time.time()
        study, rows = run_stage(plan.config, plan.stage, label, precision, deadline, echo, allow_empty=bool(done),
                                eta=eta, kind=strategy.stage_kind)
        done.append(StageRun(plan.config, plan.stage, study, rows, started, time.time()))
        missing = missing_first(done[-1])
        if missing:
            echo(f"{label.strip()}: not scored: " + "; ".join(
                m["pattern"] + (f" ({m['known']})" if m.get("known") else "") + f": {m['reason']}" for m in missing))
    answer = strategy.answer(config, done, stopped, deadline is not None and time.time() >= deadline)
    study, rows = answer.study, answer.rows
    first = done[0].stage.first
    if config.growth.equal_cost is not None:  # what every model at the target was grown to (scaling.equal_cost)
        from scaling.equal_cost import describe

        answer.summary["equal_cost"] = describe(config.growth.equal_cost, config.report_target)
    # the one best known layout of this answer (search.best_known): the cost limits, the verdict, the cost ratios
    # and the standing at equal cost all weigh the answer against this row
    known = best_known(rows, answer.eligible)
    answer.eligible, at_known_cost = eligible_at_known_cost(rows, answer.eligible, CostLimits.of(config), known)
    if at_known_cost is not None:
        answer.summary["cost_limits"] = at_known_cost
    ranked = rows if answer.eligible is None else answer.eligible  # the rows an answer may come from
    from search.lm import measured_seed_noise, stage_setting

    answered = next(run.config for run in done if run.study is study)  # the stage the answer comes from
    attach(rows, stage_setting(answered), answered.seed)  # a strategy that has not given its rows theirs
    # the seed spread measured at that stage's budget stands in for seeds its scores were not trained on, where
    # its setting is theirs (search.verdict)
    comparison = compare_with_known(ranked, maximize, measured_seed_noise(answered.evaluator, answered.budget),
                                    known=known)
    if answer.eligible is not None and not answer.eligible:
        comparison.answer, comparison.recommended = None, None
        comparison.note = no_eligible_note(answer.summary)
    if answer.stopped_early is not None:
        comparison.stopped_early = answer.stopped_early
    if first and ranked and comparison.best_known is None:  # known layouts entered, none in the final ranking
        comparison.floor_missing = ("no known layout was scored in the ranking the answer comes from: see "
                                       + " and ".join(["failures.json", *answer.files]))
    if config.strategy == "successive-halving" and any(row.get("rung") for row in rows):  # ranked at the target
        # what each finalist and known layout costs on this machine, beside the known layout the answer weighs
        grid = cost_grid(answered.budget, bool(config.compile), config.resolved_precision)
        add_measured_cost(rows, config.report_target, grid, out, comparison.best_known, echo)
        standing = cost_standing(rows, comparison)  # dominates the best known layout, or wins on loss only
        if standing is not None:
            comparison.at_equal_cost = standing
    extra = {"study": study.study_name, "evaluator": config.evaluator, "budget": config.budget,
             "strategy": config.strategy, "direction": evaluator.direction, "precision": precision,
             "answer": comparison.answer, "recommended": comparison.recommended, "best_known": named(known),
             "vs_known": comparison.as_dict(),
             "known_layouts": [{"name": attrs["known"], "pattern": pattern, "fit": attrs["known_fit"]}
                               for pattern, attrs in first if "known_fit" in attrs], **answer.summary}
    for name, content in answer.files.items():
        atomic_write_json(out / name, content)
    write_leaderboard(rows, out, extra)
    (out / "failures.json").write_text(json.dumps(failures(study), indent=2))
    plots = plot_all(study, rows, out, config.primitives)
    if any(row.get("recall") is not None for row in rows):
        plots.append(plot_loss_against_recall(rows, out / "loss_vs_recall.png",
                                              (answer.summary.get("front") or {}).get("patterns")))
    if "rungs.json" in answer.files:
        plots += plot_rung_curves(answer.files["rungs.json"], out)
    cost_plot = plot_loss_against_cost(rows, out / "loss_vs_cost.png", comparison.recommended)
    if cost_plot is not None:
        plots.append(cost_plot)
    log_summary(config, study.study_name, rows, plots)
    return {"leaderboard": rows, "best": rows[0], "plots": [str(p) for p in plots], "study": study.study_name,
            "storage": config.storage or default_storage_url(out), "out": str(out), "precision": precision,
            "vs_known": comparison.as_dict(), "rungs": answer.files.get("rungs.json"),
            **{key: answer.summary[key] for key in SUMMARY_KEYS if key in answer.summary}}
