"""``composer search``: run a strategy's stages, then write the leaderboard, best.json, plots and W&B summary.

Output directory::

    study.db                      the Optuna storage (unless --storage names another)
    config.json                   the search settings
    leaderboard.json / .csv       one row per scored pattern, best first (rank, pattern, score, params, ...)
    best.json                     the winner, with the study and stage it came from
    failures.json                 failed and skipped trials with their reasons
    *.png                         optimisation history, score vs attention share, per-layer frequency, Pareto
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path
from typing import Any

from composer.errors import ConfigError
from composer.files import atomic_write_json, make_output_dir
from search.config import SearchConfig
from search.engine import Stage, enqueue_first, launch_workers, open_study, run_worker, stages_of
from search.evaluators import make_evaluator
from search.fidelity import get_ladder, promote, rung_budget
from search.known import compare_with_known, known_layouts
from search.resume import StudyLock, reap_dead_workers
from search.leaderboard import failures, format_table, leaderboard, write_leaderboard
from search.plots import plot_all
from search.progress import SearchProgress
from search.space import SearchSpace
from search.storage import GRACE_S, default_storage_url, worker_lock_path
from search.tracking import log_summary

MAX_BRUTE_FORCE = 4096


def frozen_parts(strategy: str, best: str) -> tuple[str, str]:
    """Head and tail kept fixed around the next stage's searched layers."""
    if strategy == "middle-incremental":
        middle = len(best) // 2
        return best[:middle], best[middle:]
    return best, ""


def _label(kind: str, index: int, count: int) -> str:
    return f"{kind} {index + 1}/{count} " if count > 1 else ""


def run_stage(config: SearchConfig, stage: Stage, label: str, precision: str, deadline: float | None,
              echo) -> tuple[Any, list[dict[str, Any]]]:
    """Run one study (a strategy's stage or a rung) to its budget; returns the study and its leaderboard."""
    evaluator = make_evaluator(config.evaluator, config.budget, config.widths, config.data, config.tokenizer,
                               config.precision, config.compile)
    maximize = evaluator.direction == "maximize"
    echo(f"{label}study {stage.study_name!r}: {stage.trials} trials over {stage.space.size:,} patterns "
         f"({config.sampler_name}, {config.evaluator}/{config.budget}, {precision}, {config.workers} worker(s))")
    for pattern, attrs in stage.first:
        if "known_fit" in attrs:
            echo(f"   known layout {attrs['known']:<14} {pattern}  ({attrs.get('known_fit', '')})")
    progress = SearchProgress(stage.trials, maximize, label)
    if config.workers == 1:
        run_worker(config, stage, 0, callbacks=[progress], deadline=deadline, on_bound=echo)
    else:
        enqueue_first(open_study(config, stage, evaluator), stage)  # before the workers race to it
        launch_workers(config, stage, deadline, poll=lambda: progress.poll(lambda: open_study(config, stage, evaluator)))
    study = open_study(config, stage, evaluator)
    with StudyLock(worker_lock_path(config.storage, config.out)) as lock:  # this run's workers have ended
        reap_dead_workers(study, requeue=False, alone=lock.alone, grace_s=GRACE_S)
    rows = leaderboard(study, maximize, {pattern: attrs["known"] for pattern, attrs in stage.first
                                         if "known" in attrs})
    if not rows:
        reasons = "; ".join(f"trial {f['trial']} {f['pattern']}: {f['reason']}" for f in failures(study)[:3])
        raise RuntimeError(f"no trial of study {stage.study_name!r} completed ({reasons or 'no trials ran'})")
    return study, rows


def known_first(config: SearchConfig, space: SearchSpace, echo) -> tuple[tuple[str, dict], ...]:
    """The known layouts the first stage enqueues (none with ``known: false``); says which were left out."""
    if not config.known:
        return ()
    layouts, left_out = known_layouts(space.n_layers, space.choices)
    allowed = [layout for layout in layouts if space.violation(layout.pattern) is None]
    for layout in layouts:
        if layout not in allowed:
            left_out[layout.name] = f"outside the constraints: {space.violation(layout.pattern)}"
    if left_out:
        echo("   known layouts left out: " + "; ".join(f"{name} ({why})" for name, why in left_out.items()))
    return tuple((layout.pattern, {"known": layout.name, "known_fit": layout.fit}) for layout in allowed)


def run_search(config: SearchConfig, echo=print) -> dict[str, Any]:
    out = Path(config.out)
    make_output_dir(out)
    (out / "config.json").write_text(json.dumps(config.to_dict(), indent=2))
    halving = config.strategy == "successive-halving"
    first_config = rung_config(config, 0) if halving else config
    evaluator = make_evaluator(first_config.evaluator, first_config.budget, config.widths, config.data,
                               config.tokenizer, config.precision, config.compile)
    maximize = evaluator.direction == "maximize"
    precision = getattr(evaluator, "precision", None) or "the evaluator's own precision"
    if config.compile:
        precision += ", compiled"
    deadline = time.time() + config.timeout if config.timeout else None
    plan = stages_of(config)
    per_stage = max(1, config.trials // len(plan))
    best, study, rows, first = "", None, [], ()
    for index, n_layers in plan:
        head, tail = frozen_parts(config.strategy, best)
        space = SearchSpace(n_layers, config.primitives, dict(config.min_share), dict(config.max_share),
                            config.max_params, head, tail)
        if config.sampler_name == "brute" and space.size > MAX_BRUTE_FORCE:
            raise ConfigError(
                f"brute force over {space.size:,} patterns is too many (max {MAX_BRUTE_FORCE:,}); "
                "use --sampler gp or fewer --layers"
            )
        trials = config.trials - per_stage * (len(plan) - 1) if index == len(plan) - 1 else per_stage
        name = first_config.study_name if len(plan) == 1 else f"{config.study_name}-stage{index}"
        if index == 0:
            first = known_first(config, space, echo)
        stage = Stage(index, space, trials, name, first if index == 0 else ())
        kind = ("rung", len(get_ladder(config.budget).rungs)) if halving else ("stage", len(plan))
        stage_started = time.time()
        study, rows = run_stage(first_config, stage, _label(kind[0], index, kind[1]), precision, deadline, echo)
        best = rows[0]["pattern"]
        if deadline and time.time() > deadline:
            break
    rungs = None
    if halving:
        study, rows, rungs = run_rungs(config, study, rows, space, precision, deadline, echo, stage_started)
    comparison = compare_with_known(rows, maximize)
    extra = {"study": study.study_name, "evaluator": config.evaluator, "budget": config.budget,
             "strategy": config.strategy, "direction": evaluator.direction, "precision": precision,
             "answer": comparison["answer"], "vs_known": comparison,
             "known_layouts": [{"name": attrs["known"], "pattern": pattern, "fit": attrs["known_fit"]}
                               for pattern, attrs in first]}
    if rungs is not None:
        extra["rungs"] = [{key: rung[key] for key in ("rung", "study", "budget", "candidates", "seconds",
                                                      "wall_seconds")} for rung in rungs]
        atomic_write_json(out / "rungs.json", rungs)
    write_leaderboard(rows, out, extra)
    (out / "failures.json").write_text(json.dumps(failures(study), indent=2))
    plots = plot_all(study, rows, out, config.primitives)
    log_summary(config, study.study_name, rows, plots)
    return {"leaderboard": rows, "best": rows[0], "plots": [str(p) for p in plots], "study": study.study_name,
            "storage": config.storage or default_storage_url(out), "out": str(out), "precision": precision,
            "vs_known": comparison, "rungs": rungs}


def rung_config(config: SearchConfig, index: int) -> SearchConfig:
    """The settings rung ``index`` of a successive-halving search runs with: its own lm budget and study; the
    later rungs train exactly the promoted patterns (no sampler choice, no pruning)."""
    ladder = get_ladder(config.budget)
    study = config.study_name if index == 0 else f"{config.study_name}-rung{index}"
    changes = {"budget": rung_budget(ladder, index, config.target), "strategy": "one-shot", "study": study}
    if index > 0:
        changes.update(sampler="random", prune=False, known=False)
    return dataclasses.replace(config, **changes)


def _rung_record(index: int, study, config: SearchConfig, rows: list[dict[str, Any]], started: float) -> dict:
    """``seconds``: the rung's training time summed over its scored trials (also those of an earlier, killed
    invocation); ``wall_seconds``: this invocation's time in the rung."""
    return {"rung": index, "study": study.study_name, "budget": config.budget, "candidates": len(rows),
            "seconds": sum(row.get("seconds") or 0.0 for row in rows), "wall_seconds": time.time() - started,
            "leaderboard": rows, "failures": failures(study)}


def run_rungs(config: SearchConfig, study, rows: list[dict[str, Any]], space: SearchSpace,
              precision: str, deadline: float | None, echo,
              started: float) -> tuple[Any, list[dict[str, Any]], list[dict]]:
    """Rungs 1.. of successive halving over rung 0's ``study`` and leaderboard ``rows``; each rung's record
    (its leaderboard, candidates and time) goes to rungs.json; ``started``: when rung 0 began (its wall time)."""
    ladder = get_ladder(config.budget)
    count = len(ladder.rungs)
    records = [_rung_record(0, study, rung_config(config, 0), rows, started)]
    for index in range(1, count):
        promoted = promote(rows, ladder.rungs[index].keep)
        echo(f"rung {index + 1}/{count}: promoting {len(promoted)} of {len(rows)}: "
             + ", ".join(f"{row['pattern']}" + (f" ({row['known']})" if row.get("known") else "") for row in promoted))
        first = tuple((row["pattern"], {"promoted_from": row["trial"], **({"known": row["known"]}
                                                                          if row.get("known") else {})})
                      for row in promoted)
        rung = rung_config(config, index)
        stage = Stage(index, space, len(promoted), rung.study_name, first, only_first=True)
        started = time.time()
        study, rows = run_stage(rung, stage, _label("rung", index, count), precision, deadline, echo)
        # a promoted known layout carries its name into the rung (stage.first), so the rung's leaderboard has it
        rows = [{**row, "rung": index} for row in rows]
        records.append(_rung_record(index, study, rung, rows, started))
    return study, rows, records


def summary_text(result: dict[str, Any]) -> str:
    best = result["best"]
    lines = [format_table(result["leaderboard"]), ""]
    if result.get("rungs"):
        lines.append("rungs: " + "; ".join(f"{r['rung']}: {r['candidates']} at {r['budget']} "
                                          f"({r['seconds'] / 60:.1f} min)" for r in result["rungs"]))
    said = result.get("vs_known") or {}
    if said.get("best_known") and said.get("best_new"):
        known, new = said["best_known"], said["best_new"]
        lines.append(f"best new {new['pattern']} {new['score']:.4f} vs best known {known['name']} {known['pattern']} "
                     f"{known['score']:.4f}: {said['difference']:+.4f} ({said['verdict']})")
    answer = f"a known layout ({best['known']})" if best.get("known") else "a new pattern"
    lines.append(f"best {best['pattern']} (score {best['score']:.4f}), {answer}; leaderboard, best.json and plots "
                 f"in {result['out']}")
    return "\n".join(lines)
