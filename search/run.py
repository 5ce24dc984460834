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

import json
import time
from pathlib import Path
from typing import Any

from composer.errors import ConfigError
from composer.files import make_output_dir
from search.config import SearchConfig
from search.engine import Stage, launch_workers, open_study, run_worker, stages_of
from search.evaluators import make_evaluator
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


def run_search(config: SearchConfig, echo=print) -> dict[str, Any]:
    out = Path(config.out)
    make_output_dir(out)
    (out / "config.json").write_text(json.dumps(config.to_dict(), indent=2))
    evaluator = make_evaluator(config.evaluator, config.budget, config.widths, config.data, config.tokenizer,
                               config.precision, config.compile)
    maximize = evaluator.direction == "maximize"
    precision = getattr(evaluator, "precision", None) or "the evaluator's own precision"
    if config.compile:
        precision += ", compiled"
    deadline = time.time() + config.timeout if config.timeout else None
    plan = stages_of(config)
    per_stage = max(1, config.trials // len(plan))
    best, study, rows = "", None, []
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
        name = config.study_name if len(plan) == 1 else f"{config.study_name}-stage{index}"
        stage = Stage(index, space, trials, name)
        label = f"stage {index + 1}/{len(plan)} " if len(plan) > 1 else ""
        echo(f"{label}study {name!r}: {trials} trials over {space.size:,} patterns "
             f"({config.sampler_name}, {config.evaluator}/{config.budget}, {precision}, {config.workers} worker(s))")
        progress = SearchProgress(trials, maximize, label)
        if config.workers == 1:
            run_worker(config, stage, 0, callbacks=[progress], deadline=deadline, on_bound=echo)
        else:
            launch_workers(config, stage, deadline, poll=lambda: progress.poll(lambda: open_study(config, stage, evaluator)))
        study = open_study(config, stage, evaluator)
        with StudyLock(worker_lock_path(config.storage, out)) as lock:  # this run's workers have ended
            reap_dead_workers(study, requeue=False, alone=lock.alone, grace_s=GRACE_S)
        rows = leaderboard(study, maximize)
        if not rows:
            reasons = "; ".join(f"trial {f['trial']} {f['pattern']}: {f['reason']}" for f in failures(study)[:3])
            raise RuntimeError(f"no trial of study {name!r} completed ({reasons or 'no trials ran'})")
        best = rows[0]["pattern"]
        if deadline and time.time() > deadline:
            break
    extra = {"study": study.study_name, "evaluator": config.evaluator, "budget": config.budget,
             "strategy": config.strategy, "direction": evaluator.direction, "precision": precision}
    write_leaderboard(rows, out, extra)
    (out / "failures.json").write_text(json.dumps(failures(study), indent=2))
    plots = plot_all(study, rows, out, config.primitives)
    log_summary(config, study.study_name, rows, plots)
    return {"leaderboard": rows, "best": rows[0], "plots": [str(p) for p in plots], "study": study.study_name,
            "storage": config.storage or default_storage_url(out), "out": str(out), "precision": precision}


def summary_text(result: dict[str, Any]) -> str:
    best = result["best"]
    return (f"{format_table(result['leaderboard'])}\n\nbest {best['pattern']} (score {best['score']:.4f}); "
            f"leaderboard, best.json and plots in {result['out']}")

