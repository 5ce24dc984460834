"""The search engine: Optuna studies over layer patterns, one per strategy stage, run by one or more workers.

Ask-and-tell happens in the process that owns the trial (no DDP inside a trial: the pitfall the field notes name),
so every trial is trained and reported by exactly one worker. Re-running the same command resumes the study;
patterns already scored in it (by any worker, before or after a restart) are answered from storage, not
retrained.
"""

from __future__ import annotations

import math
import multiprocessing
import os
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import optuna
from optuna.trial import FrozenTrial, TrialState

from composer.accounting import analyze
from composer.presets import get_preset
from search.config import SearchConfig
from search.evaluators import Evaluator, make_evaluator
from search.resume import (
    EvaluationBudget,
    StudyLock,
    TrialSeededSampler,
    mark_worker,
    max_trials_for,
    reap_dead_workers,
)
from search.space import SearchSpace
from search.storage import GRACE_S, make_storage, worker_lock_path

FINISHED = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL)


@dataclass(frozen=True)
class Stage:
    """One study of a strategy: the searched layers between a frozen head and tail."""

    index: int
    space: SearchSpace
    trials: int
    study_name: str
    # (pattern, user attributes) enqueued before the sampler proposes: known layouts, or a rung's promoted patterns
    first: tuple[tuple[str, dict], ...] = ()
    only_first: bool = False  # train exactly the enqueued patterns, never a sampled one (a rung's promotions)


def make_sampler(config: SearchConfig, space: SearchSpace, worker: int = 0) -> optuna.samplers.BaseSampler:
    seed = config.seed + worker
    name = config.sampler_name
    if name == "gp":
        return optuna.samplers.GPSampler(seed=seed, n_startup_trials=min(10, max(2, config.trials // 3)),
                                         warn_independent_sampling=False)
    if name == "tpe":
        return optuna.samplers.TPESampler(seed=seed, multivariate=True)
    if name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    if name == "brute":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            return optuna.samplers.BruteForceSampler(seed=seed)
    return optuna.samplers.NSGAIISampler(seed=seed, population_size=max(4, min(20, config.trials // 4)))


def make_pruner(config: SearchConfig) -> optuna.pruners.BasePruner:
    if not config.prune or config.multi_objective:
        return optuna.pruners.NopPruner()
    # Intermediate values are the running mean accuracy over the tasks done so far. Tasks differ in difficulty,
    # so one task says little: a trial is compared with the median only from its second report on.
    return optuna.pruners.MedianPruner(n_startup_trials=5, n_warmup_steps=1)


def directions(config: SearchConfig, evaluator: Evaluator) -> list[str]:
    extra = {"kv": "minimize", "tokens_per_s": "maximize"}
    return [evaluator.direction, *(extra[name] for name in config.objectives[1:])]


def stages_of(config: SearchConfig, best_so_far: str = "") -> list[tuple[int, int]]:
    """(stage index, searched layers) of every stage of the strategy."""
    if config.strategy in ("one-shot", "successive-halving"):  # halving's later rungs: search.fidelity
        return [(0, config.layers)]
    n = math.ceil(config.final_depth / config.layers)
    return [(k, min(config.layers, config.final_depth - k * config.layers)) for k in range(n)]


def open_study(config: SearchConfig, stage: Stage, evaluator: Evaluator, worker: int = 0) -> optuna.Study:
    """Create or load the stage's study. Its sampler is re-seeded per trial number (search/resume.py), so a
    restarted worker continues the proposal sequence instead of repeating it."""
    return optuna.create_study(
        storage=make_storage(config.storage, config.out),
        study_name=stage.study_name,
        directions=directions(config, evaluator),
        sampler=TrialSeededSampler(make_sampler(config, stage.space, worker), config.seed),
        pruner=make_pruner(config),
        load_if_exists=True,
    )


SUBSTITUTE_KEYS = ("cached_from", "pruned_at", "skip_reason", "fail_reason")


def is_substitute(attrs: dict) -> bool:
    """A trial whose value is not a real score of its own (cached; pruned, skipped or failed under GP)."""
    return any(key in attrs for key in SUBSTITUTE_KEYS)


def failed_before(history: list[FrozenTrial], pattern: str, exclude: int) -> FrozenTrial | None:
    """An earlier trial in which ``pattern`` failed (training is deterministic: it would fail again)."""
    for trial in history:
        attrs = trial.user_attrs
        if (trial.number != exclude and attrs.get("pattern") == pattern and "fail_reason" in attrs
                and "worker_died" not in attrs):  # a killed worker says nothing about the pattern: retrain it
            return trial
    return None


def scored_trial(history: list[FrozenTrial], pattern: str, exclude: int) -> FrozenTrial | None:
    """A completed trial that already trained ``pattern`` (not itself a substitute answer)."""
    for trial in history:
        attrs = trial.user_attrs
        if (trial.state == TrialState.COMPLETE and trial.number != exclude and attrs.get("pattern") == pattern
                and not is_substitute(attrs)):
            return trial
    return None


def worst_score(history: list[FrozenTrial], direction: str) -> float | None:
    scores = [t.value for t in history if t.state == TrialState.COMPLETE and not is_substitute(t.user_attrs)]
    if not scores:
        return None
    return min(scores) if direction == "maximize" else max(scores)


def make_objective(config: SearchConfig, stage: Stage, evaluator: Evaluator, study: optuna.Study) -> Callable:
    widths = get_preset(config.widths).arch
    target = get_preset(config.report_target).arch
    # Optuna's GPSampler fits completed trials only: a pruned or skipped point would be proposed again and again.
    # For it, a pruned trial completes with the partial score it was stopped at and a constraint violation with
    # the worst score so far; both are flagged and kept off the leaderboard.
    learns_from_pruned = config.sampler_name != "gp"

    def objective(trial: optuna.Trial):
        mark_worker(trial)  # first: a worker killed from here on is recognised as dead on restart
        pattern = stage.space.suggest(trial)
        search_stats = analyze(widths.with_pattern(pattern))
        target_stats = analyze(target.with_pattern(pattern))
        trial.set_user_attr("pattern", pattern)
        trial.set_user_attr("params", search_stats.params)
        trial.set_user_attr("non_embedding_params", search_stats.non_embedding_params)
        trial.set_user_attr("kv_cache_bytes_per_token", target_stats.kv_cache_bytes_per_token)
        # one read of the storage per trial: earlier results answer repeats, failures and penalties
        history = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.FAIL))
        reason = stage.space.violation(pattern, search_stats.non_embedding_params)
        if reason:
            trial.set_user_attr("skip_reason", reason)
            if not learns_from_pruned:
                penalty = worst_score(history, evaluator.direction)
                if penalty is not None:  # tell GP this region is bad, without a leaderboard entry
                    return penalty
            raise optuna.TrialPruned(f"{pattern}: {reason}")
        def fail(reason: str, error: Exception):
            """Record why; GP gets the worst score so far (it ignores failed trials), others a failed trial."""
            trial.set_user_attr("fail_reason", reason[:500])
            penalty = None if learns_from_pruned else worst_score(history, evaluator.direction)
            if penalty is None:
                raise error
            return penalty

        earlier_failure = failed_before(history, pattern, exclude=trial.number)
        if earlier_failure is not None:  # deterministic training: the same pattern would fail the same way
            return fail(f"as in trial {earlier_failure.number}: {earlier_failure.user_attrs['fail_reason']}",
                        RuntimeError(earlier_failure.user_attrs["fail_reason"]))
        cached = scored_trial(history, pattern, exclude=trial.number)
        if cached is not None:
            trial.set_user_attr("cached_from", cached.number)
            for key in ("score", "details", "seconds", "tokens_per_s", "lr"):
                if key in cached.user_attrs:
                    trial.set_user_attr(key, cached.user_attrs[key])
            return cached.values if config.multi_objective else cached.value

        def report(step: int, value: float) -> None:
            if config.multi_objective:
                return
            trial.report(value, step)
            if trial.should_prune():
                trial.set_user_attr("pruned_at", {"step": step, "value": value})
                raise optuna.TrialPruned(f"{pattern}: intermediate score {value:.4f} below the median")

        try:
            result = evaluator(pattern, config.seed, report)
        except optuna.TrialPruned:
            if not learns_from_pruned:  # GP: complete with the partial score it was stopped at
                return trial.user_attrs["pruned_at"]["value"]
            raise
        except Exception as err:
            return fail(f"{type(err).__name__}: {err}", err)
        if not math.isfinite(result.score):
            return fail(f"non-finite score {result.score}", ValueError(f"non-finite score for {pattern}"))
        trial.set_user_attr("score", result.score)
        trial.set_user_attr("details", result.details)
        if isinstance(result.details.get("lr"), (int, float)):  # the rate it was scored at: transfer starts there
            trial.set_user_attr("lr", float(result.details["lr"]))
        trial.set_user_attr("seconds", result.seconds)
        values = [result.score]
        for name in config.objectives[1:]:
            if name == "kv":
                values.append(float(target_stats.kv_cache_bytes_per_token))
            else:
                tokens_per_s = result.details.get("tokens_per_s") or _measure_tokens_per_s(widths.with_pattern(pattern))
                trial.set_user_attr("tokens_per_s", tokens_per_s)
                values.append(tokens_per_s)
        return values if config.multi_objective else result.score

    return objective


def _measure_tokens_per_s(arch, batch: int = 8, seq_len: int = 128, steps: int = 3) -> float:
    """Training tokens/s of ``arch`` on this device (forward + backward), for the throughput objective."""
    import torch

    from composer.model import build_model

    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = build_model(arch.replace(max_seq_len=max(arch.max_seq_len, seq_len)), device=device)
    ids = torch.randint(0, arch.vocab_size, (batch, seq_len + 1), device=device)
    model(ids[:, :-1], ids[:, 1:]).loss.backward()  # warm-up
    start = time.perf_counter()
    for _ in range(steps):
        model(ids[:, :-1], ids[:, 1:]).loss.backward()
    if device == "cuda":
        torch.cuda.synchronize()
    return steps * batch * seq_len / (time.perf_counter() - start)


def enqueue_first(study: optuna.Study, stage: Stage) -> None:
    """Enqueue the stage's first patterns (known layouts, a rung's promotions) unless the study holds them already.

    ``skip_if_exists`` is a read then a write, so workers starting together on a database server (no file lock
    between them) could each enqueue them: ``composer search --workers N`` calls this once before it starts its
    workers (a PostgreSQL run trained both known layouts twice, 2026-11-26)."""
    for pattern, attrs in stage.first:
        study.enqueue_trial(stage.space.params_of(pattern), user_attrs=attrs, skip_if_exists=True)


def run_worker(config: SearchConfig, stage: Stage, worker: int, callbacks: list | None = None,
               deadline: float | None = None, on_bound: Callable[[str], None] | None = None) -> None:
    """Run trials of ``stage`` until ``stage.trials`` of them trained their pattern (shared across workers; answers
    from the cache do not count, within a bound) or time is up. Trials of dead local workers are retried first."""
    optuna.logging.set_verbosity(optuna.logging.ERROR)  # failures are reported by our progress lines
    evaluator = make_evaluator(config.evaluator, config.budget, config.widths, config.data, config.tokenizer,
                               config.precision, config.compile)
    study = open_study(config, stage, evaluator, worker)
    with StudyLock(worker_lock_path(config.storage, config.out)) as lock:
        reap_dead_workers(study, alone=lock.alone, grace_s=GRACE_S)
        enqueue_first(study, stage)
        lock.share()
        budget = EvaluationBudget(stage.trials, max_trials_for(stage.trials, stage.space.size), on_bound=on_bound)
        if budget.done(study):
            return
        if stage.only_first and not study.get_trials(deepcopy=False, states=(TrialState.WAITING,)):
            return  # the other workers hold what is left of a rung's promotions: nothing to sample here
        timeout = None if deadline is None else max(1.0, deadline - time.time())
        from search.tracking import WandbTrialLogger

        study.optimize(
            make_objective(config, stage, evaluator, study),
            timeout=timeout,
            catch=(Exception,),
            callbacks=[budget, *([stop_when_queue_empty] if stage.only_first else []),
                       WandbTrialLogger(config, stage.study_name), *(callbacks or [])],
        )


def stop_when_queue_empty(study: optuna.Study, trial: FrozenTrial) -> None:
    """Optuna callback for a stage that trains only its enqueued patterns: stop once none is waiting (a pattern
    that failed is recorded, not replaced by a sampled one)."""
    if not study.get_trials(deepcopy=False, states=(TrialState.WAITING,)):
        study.stop()


def _worker_main(config: SearchConfig, stage: Stage, worker: int, threads: int, deadline: float | None) -> None:
    """Entry point of a spawned worker process: pin its device / threads, then run trials."""
    import torch

    torch.set_num_threads(threads)
    run_worker(config, stage, worker, callbacks=None, deadline=deadline)


def launch_workers(config: SearchConfig, stage: Stage, deadline: float | None, poll: Callable[[], None]) -> None:
    """``config.workers`` processes (one GPU each when there are GPUs); ``poll`` runs while they work."""
    import torch

    gpus = torch.cuda.device_count()
    threads = max(1, (os.cpu_count() or 1) // config.workers)
    context = multiprocessing.get_context("spawn")
    processes = []
    for worker in range(config.workers):
        env_backup = os.environ.get("CUDA_VISIBLE_DEVICES")
        if gpus:
            os.environ["CUDA_VISIBLE_DEVICES"] = str(worker % gpus)
        process = context.Process(target=_worker_main, args=(config, stage, worker, threads, deadline), daemon=False)
        process.start()
        processes.append(process)
        if gpus:
            if env_backup is None:
                os.environ.pop("CUDA_VISIBLE_DEVICES", None)
            else:
                os.environ["CUDA_VISIBLE_DEVICES"] = env_backup
    try:
        while any(p.is_alive() for p in processes):
            poll()
            time.sleep(2.0)
    finally:
        for process in processes:
            process.join(timeout=5)
            if process.is_alive():
                process.terminate()
    poll()
