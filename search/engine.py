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
from composer.data.errors import DataError
from composer.errors import ConfigError
from composer.presets import get_preset
from scaling.extrapolate import OffTarget
from search.config import BUDGET_DEFINITION, SearchConfig
from search.cost import over_max_kv, parse_max_kv, serving_cost
from search.evaluators import Evaluator, make_evaluator
from search.growth import GROWN, Grown
from search.resume import (
    EvaluationBudget,
    StudyLock,
    TrialSeededSampler,
    failed_on_data,
    mark_worker,
    max_trials_for,
    reap_dead_workers,
)
from search.spaces import Space
from search.storage import GRACE_S, make_storage, worker_lock_path

FINISHED = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL)


@dataclass(frozen=True)
class Stage:
    """One study of a strategy: the searched layers between a frozen head and tail."""

    index: int
    space: Space  # search.spaces: the layers or the mixers space
    trials: int
    study_name: str
    # (pattern, user attributes) enqueued before the sampler proposes: known layouts, or a rung's promoted patterns
    first: tuple[tuple[str, dict], ...] = ()
    only_first: bool = False  # train exactly the enqueued patterns, never a sampled one (a rung's promotions)


def make_sampler(config: SearchConfig, space: Space, worker: int = 0) -> optuna.samplers.BaseSampler:
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
    # Only an evaluator that reports intermediate values can be pruned: MAD reports the running mean accuracy over
    # the tasks done so far (tasks differ in difficulty, so a trial is compared with the median only from its
    # second report on). The lm and recall evaluators report nothing, so for them this pruner never stops a trial.
    return optuna.pruners.MedianPruner(n_startup_trials=5, n_warmup_steps=1)


def directions(config: SearchConfig, evaluator: Evaluator) -> list[str]:
    extra = {"kv": "minimize", "tokens_per_s": "maximize"}
    return [evaluator.direction, *(extra[name] for name in config.objectives[1:])]


def open_study(config: SearchConfig, stage: Stage, evaluator: Evaluator, worker: int = 0) -> optuna.Study:
    """Create or load the stage's study. Its sampler is re-seeded per trial number (search/resume.py), so a
    restarted worker continues the proposal sequence instead of repeating it. Optuna's notes stay off: the
    search's coordinator opens the study at every progress poll, and Optuna said "Using an existing study" each
    time (every 2 s of a --workers 2 search); its own lines say where the search stands."""
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    study = optuna.create_study(
        storage=make_storage(config.storage, config.out),
        study_name=stage.study_name,
        directions=directions(config, evaluator),
        sampler=TrialSeededSampler(make_sampler(config, stage.space, worker), config.seed),
        pruner=make_pruner(config),
        load_if_exists=True,
    )
    check_score_settings(study, config)
    return study


SCORE_SETTINGS_ATTR = "score_settings"


def check_score_settings(study: optuna.Study, config: SearchConfig) -> None:
    """Store the settings that change a score with a new study; refuse to add to one run with others.

    A derived study name already differs when a score setting does (``SearchConfig.study_name``); this catches
    the rest: a ``--study`` named by hand, and studies from before the name held every setting. Without it a
    changed ``--data`` returned the first corpus' scores from the cache, without a word (issue 34)."""
    current = config.score_settings()
    stored = study.user_attrs.get(SCORE_SETTINGS_ATTR)
    if stored is None:
        study.set_user_attr(SCORE_SETTINGS_ATTR, current)
        return
    differ = [name for name in current if name in stored and stored[name] != current[name]]
    if differ == [BUDGET_DEFINITION]:
        raise ConfigError(f"study {study.study_name!r} in {config.storage or config.out} was scored under another "
                          f"definition of budget {config.budget!r} (its steps, tokens, lengths or rates changed since): "
                          "give another --out or --study to score it under the current one")
    if differ:
        said = ", ".join(f"{name}={stored[name]!r} (now {current[name]!r})" for name in differ[:3])
        raise ConfigError(f"study {study.study_name!r} in {config.storage or config.out} was run with {said}: "
                          "re-run with those settings to resume it, or give another --out or --study")


SUBSTITUTE_KEYS = ("cached_from", "pruned_at", "skip_reason", "fail_reason")


def is_substitute(attrs: dict) -> bool:
    """A trial whose value is not a real score of its own (cached; pruned, skipped or failed under GP)."""
    return any(key in attrs for key in SUBSTITUTE_KEYS)


def failure_kind(reason: str) -> str:
    """What a failure was, for telling a repeat from a chance: the exception's name (``OutOfMemoryError``), or
    the reason itself where it names none."""
    return reason.split(":", 1)[0].strip()


def is_own_failure(attrs: dict) -> bool:
    """A trial that failed while training its own pattern (not a dead worker, not a known failure repeated, not the
    data failing it as it fails every pattern)."""
    return ("fail_reason" in attrs and "worker_died" not in attrs and not failed_on_data(attrs)
            and not str(attrs["fail_reason"]).startswith(REPEATED_FAILURE))


REPEATED_FAILURE = "as in trial"
MAX_FAILURES = 3  # a pattern that failed this often, in whatever ways, is not retried either


def deterministic_failure(failures: list[FrozenTrial]) -> list[FrozenTrial] | None:
    """The failures that make a pattern's failure deterministic: two of the same kind (or ``MAX_FAILURES`` of
    any), or None while it may still train. One failure is not enough: a trial that ran out of memory beside
    another, or was killed, would then drop its pattern for good, the floor's known layout included (issue 34)."""
    by_kind: dict[str, list[FrozenTrial]] = {}
    for trial in failures:
        by_kind.setdefault(failure_kind(str(trial.user_attrs["fail_reason"])), []).append(trial)
    repeated = next((same for same in by_kind.values() if len(same) >= 2), None)
    if repeated is None and len(failures) >= MAX_FAILURES:
        repeated = failures
    return repeated


def failed_before(history: list[FrozenTrial], pattern: str, exclude: int) -> list[FrozenTrial] | None:
    """Earlier trials in which ``pattern`` failed the same way twice: training it again would fail again."""
    failures = [t for t in history if t.number != exclude and t.user_attrs.get("pattern") == pattern
                and is_own_failure(t.user_attrs)]
    return deterministic_failure(failures)


def scored_trial(history: list[FrozenTrial], pattern: str, exclude: int) -> FrozenTrial | None:
    """A completed trial that already trained ``pattern`` (not itself a substitute answer)."""
    for trial in history:
        attrs = trial.user_attrs
        if (trial.state == TrialState.COMPLETE and trial.number != exclude and attrs.get("pattern") == pattern
                and not is_substitute(attrs)):
            return trial
    return None


def trial_of_same_model(history: list[FrozenTrial], pattern: str, exclude: int, model_key) -> FrozenTrial | None:
    """A completed trial of another pattern whose model the evaluator trains the same way (``model_key``: the
    recall probe trains a pattern's mixers alone), genuinely scored: its score is this pattern's too."""
    key = model_key(pattern)
    for trial in history:
        attrs = trial.user_attrs
        if (trial.state == TrialState.COMPLETE and trial.number != exclude and attrs.get("pattern") not in (None, pattern)
                and not is_substitute(attrs) and "same_model_as" not in attrs and model_key(attrs["pattern"]) == key):
            return trial
    return None


def same_model(cached: FrozenTrial, pattern: str, evaluator: Evaluator) -> bool:
    """Whether a cached trial trained the model the evaluator would train for ``pattern`` now (``grown``: the lm
    evaluator's growth at its budget's target): a rung at the target's size trains a known family in its own layout
    since issue 37, where it used to stack its fit."""
    if not hasattr(evaluator, "grown"):
        return True
    was, now = Grown.layout_in(cached.user_attrs.get("details") or {}), evaluator.grown(pattern)
    return (was or pattern) == (pattern if now is None else now.layout)


def worst_score(history: list[FrozenTrial], direction: str) -> float | None:
    scores = [t.value for t in history if t.state == TrialState.COMPLETE and not is_substitute(t.user_attrs)]
    if not scores:
        return None
    return min(scores) if direction == "maximize" else max(scores)


def make_objective(config: SearchConfig, stage: Stage, evaluator: Evaluator, study: optuna.Study) -> Callable:
    widths = get_preset(config.widths).arch
    # Optuna's GPSampler fits completed trials only: a pruned or skipped point would be proposed again and again.
    # For it, a pruned trial completes with the partial score it was stopped at and a constraint violation with
    # the worst score so far; both are flagged and kept off the leaderboard.
    learns_from_pruned = config.sampler_name != "gp"
    known = known_names(stage)
    max_kv = parse_max_kv(config.max_kv) if config.max_kv else None
    from search.cost.limits import best_known_so_far, limit_check

    over_cost = limit_check(config)  # --max-latency / --min-throughput: None when neither is given
    growth = config.growth  # how each pattern becomes its model at the target (a family's depth resolved once)
    stopped_by: list[DataError] = []  # the data error that stopped the study (raise_data_error)

    def objective(trial: optuna.Trial):
        mark_worker(trial)  # first: a worker killed from here on is recognised as dead on restart
        if stage.only_first and not any(key in trial.user_attrs for key in FIRST_ATTRS):
            # Another worker took the last waiting promotion between this worker's look at the queue and its
            # ask: Optuna made a new trial, which would train a pattern nobody promoted. Nothing is sampled.
            trial.set_user_attr("skip_reason", "no promotion was waiting (another worker took the last one)")
            raise optuna.TrialPruned("no promotion was waiting")
        pattern = stage.space.suggest(trial)
        search_stats = analyze(widths.with_pattern(pattern))
        grown = off_target = None
        try:
            grown = growth.grow(pattern, config.report_target, known.get(pattern))
        except OffTarget as error:  # not within the growth's tolerance of the target's size or cost: skipped below
            off_target = str(error)
        target_arch = widths.with_pattern(pattern) if grown is None else grown.arch
        cost = serving_cost(target_arch)
        trial.set_user_attr("pattern", pattern)
        trial.set_user_attr("params", search_stats.params)
        trial.set_user_attr("non_embedding_params", search_stats.non_embedding_params)
        trial.set_user_attr("kv_cache_bytes_per_token", cost["kv_bytes_per_token"])
        if grown is not None:  # its model at the target, whole: what its cost, its cache and the rungs are of
            trial.set_user_attr(GROWN, grown.record())
        trial.set_user_attr("cost", cost)
        # one read of the storage per trial: earlier results answer repeats, failures and penalties
        history = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.FAIL))
        reason = off_target or stage.space.violation(pattern, search_stats.non_embedding_params) or (
            over_max_kv(target_arch, max_kv) if max_kv else None)
        if reason is None and over_cost is not None:  # measured or modeled: only where nothing cheaper refused it
            reason, figures = over_cost(target_arch, best_known_so_far(history, evaluator.direction,
                                                                       config.report_target), is_known=pattern in known)
            trial.set_user_attr("limit_cost", figures)
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

        earlier = failed_before(history, pattern, exclude=trial.number)
        if earlier is not None:  # it failed the same way twice: it would fail again
            trial.set_user_attr("deterministic_failure", True)
            numbers = ", ".join(str(t.number) for t in earlier)
            return fail(f"{REPEATED_FAILURE} {numbers}: {earlier[-1].user_attrs['fail_reason']}",
                        RuntimeError(earlier[-1].user_attrs["fail_reason"]))
        cached = scored_trial(history, pattern, exclude=trial.number)
        if cached is not None and not same_model(cached, pattern, evaluator):
            cached = None  # scored on another model at the target (a known layout stacked before issue 37)
        if cached is not None:
            trial.set_user_attr("cached_from", cached.number)
            for key in ("score", "details", "seconds", "tokens_per_s", "lr"):
                if key in cached.user_attrs:
                    trial.set_user_attr(key, cached.user_attrs[key])
            return cached.values if config.multi_objective else cached.value
        twin = None if config.multi_objective or not hasattr(evaluator, "model_key") else trial_of_same_model(
            history, pattern, trial.number, evaluator.model_key)  # other objectives (its cost) are its own
        if twin is not None:  # the same model trained at the same seed: its score, not a second training
            trial.set_user_attr("same_model_as", twin.number)
            trial.set_user_attr("score", twin.value)
            trial.set_user_attr("details", twin.user_attrs.get("details", {}))
            trial.set_user_attr("seconds", 0.0)
            return twin.value

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
        except DataError as err:  # the data, not the pattern: every candidate would fail alike, so stop at once
            trial.set_user_attr("fail_reason", f"{type(err).__name__}: {err}"[:500])
            stopped_by.append(err)
            study.stop()
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
                values.append(float(cost["kv_bytes_per_token"]))
            else:
                tokens_per_s = result.details.get("tokens_per_s") or _measure_tokens_per_s(widths.with_pattern(pattern))
                trial.set_user_attr("tokens_per_s", tokens_per_s)
                values.append(tokens_per_s)
        return values if config.multi_objective else result.score

    objective.stopped_by = stopped_by  # type: ignore[attr-defined]
    return objective


def raise_data_error(objective: Callable) -> None:
    """The ``DataError`` that stopped ``objective``'s study, raised: the search ends on its one line (exit 2), not
    after every candidate failed the same way and a traceback (issue 47)."""
    stopped_by = getattr(objective, "stopped_by", None)
    if stopped_by:
        raise stopped_by[0]


def known_names(stage: Stage) -> dict[str, str]:
    """The stage's known layouts: searched pattern -> family name (its first patterns that carry one)."""
    return {pattern: attrs["known"] for pattern, attrs in stage.first if "known" in attrs}


def stage_evaluator(config: SearchConfig, stage: Stage) -> Evaluator:
    """The evaluator of ``stage``: the search's settings, with the stage's known layouts and promoted rates."""
    return make_evaluator(config.evaluator, config.budget, config.widths, config.data, config.tokenizer,
                          config.precision, config.compile, config.trunks, known=known_names(stage),
                          chosen_rates=chosen_rates(stage), growth=config.growth, text_field=config.text_field)


def chosen_rates(stage: Stage) -> dict[str, float]:
    """The rates the stage's first patterns were promoted with (a confirmation's: the rate each was scored at)."""
    return {pattern: float(attrs["chosen_lr"]) for pattern, attrs in stage.first if attrs.get("chosen_lr")}


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


FIRST_ATTRS = ("known", "promoted_from")  # what every enqueued first pattern carries (search.run)


def _params_of_trial(trial: FrozenTrial) -> dict:
    """The searched layers a trial trains: an enqueued trial's fixed params (also while it waits), else its
    sampled ones."""
    return trial.system_attrs.get("fixed_params") or trial.params


def needs_training(trials: list[FrozenTrial], params: dict) -> bool:
    """Whether the stage still owes these searched layers a training run: none scored, waiting or running,
    and no deterministic failure (a failure once, by a killed worker or out of memory, gets its retry)."""
    same = [t for t in trials if _params_of_trial(t) == params]
    if any(t.state in (TrialState.WAITING, TrialState.RUNNING) for t in same):
        return False
    if any(t.state in (TrialState.COMPLETE, TrialState.PRUNED) and not {"fail_reason", "skip_reason"} & set(t.user_attrs)
           for t in same):
        return False
    if any(t.user_attrs.get("deterministic_failure") and not failed_on_data(t.user_attrs) for t in same):
        return False
    if any("skip_reason" in t.user_attrs for t in same if t.state in FINISHED):
        return False  # a constraint skipped it, and would again: enqueued anew, it was skipped up to 4 times
    return deterministic_failure([t for t in same if is_own_failure(t.user_attrs)]) is None


def enqueue_first(study: optuna.Study, stage: Stage) -> int:
    """Enqueue the stage's first patterns (known layouts, a rung's promotions) that still need training; returns
    how many it enqueued.

    Read then write, so workers starting together on a database server (no file lock between them) could each
    enqueue them: ``composer search --workers N`` calls this once before it starts its workers (a PostgreSQL run
    trained both known layouts twice, 2026-11-26)."""
    trials = study.get_trials(deepcopy=False)
    enqueued = 0
    for pattern, attrs in stage.first:
        params = stage.space.params_of(pattern)
        if needs_training(trials, params):
            study.enqueue_trial(params, user_attrs=attrs, skip_if_exists=False)
            enqueued += 1
    return enqueued


def seconds_left(deadline: float | None) -> float | None:
    """Seconds to the deadline (None: no deadline), never negative."""
    return None if deadline is None else max(0.0, deadline - time.time())


class StopAtDeadline:
    """Optuna callback: stop once the search's deadline has passed (Optuna's own ``timeout`` counts from each
    ``optimize`` call, and a stage may call it more than once)."""

    def __init__(self, deadline: float | None) -> None:
        self.deadline = deadline

    def __call__(self, study: optuna.Study, trial: FrozenTrial) -> None:
        if seconds_left(self.deadline) == 0.0:
            study.stop()


def train_first(study: optuna.Study, stage: Stage, objective: Callable, deadline: float | None,
                callbacks: list, retry: bool = True) -> None:
    """Train the stage's waiting first patterns, then (``retry``) each transient failure's retry, until none is
    waiting or the deadline passes. No trial is started after the deadline: Optuna's ``timeout`` is checked only
    between trials, and a search past its ``--timeout`` used to start one more anyway, in every later rung.
    Spawned workers do not retry: two of them could enqueue the same retry; the search's own process retries
    once they have ended (``search.run.run_stage``)."""
    for _ in range(MAX_FAILURES + 1):
        if retry:
            enqueue_first(study, stage)  # a pattern that failed once gets its retry
        if seconds_left(deadline) == 0.0 or not study.get_trials(deepcopy=False, states=(TrialState.WAITING,)):
            return
        study.optimize(objective, timeout=seconds_left(deadline), catch=(Exception,),
                       callbacks=[stop_when_queue_empty, StopAtDeadline(deadline), *callbacks])
        raise_data_error(objective)


def run_worker(config: SearchConfig, stage: Stage, worker: int, callbacks: list | None = None,
               deadline: float | None = None, on_bound: Callable[[str], None] | None = None,
               enqueue: bool = True, evaluator: Evaluator | None = None) -> None:
    """Run trials of ``stage`` until ``stage.trials`` of them trained their pattern (shared across workers; answers
    from the cache do not count, within a bound) or time is up; a stage that trains only its first patterns (a
    rung) trains exactly those. Trials of dead local workers are retried first, and (``enqueue``: the one process
    that enqueues, not a spawned worker) the first patterns' transient failures get a retry."""
    optuna.logging.set_verbosity(optuna.logging.ERROR)  # failures are reported by our progress lines
    if evaluator is None:  # a spawned worker builds its own; the search's process passes the stage's
        evaluator = stage_evaluator(config, stage)
    study = open_study(config, stage, evaluator, worker)
    with StudyLock(worker_lock_path(config.storage, config.out)) as lock:
        reap_dead_workers(study, alone=lock.alone, grace_s=GRACE_S)
        if enqueue:
            enqueue_first(study, stage)
        lock.share()
        from search.tracking import WandbTrialLogger

        objective = make_objective(config, stage, evaluator, study)
        tracking = [WandbTrialLogger(config, stage.study_name), *(callbacks or [])]
        if not stage.only_first:
            constrained = bool(config.max_kv or config.max_latency or config.min_throughput)  # skips cost seconds
            budget = EvaluationBudget(stage.trials, max_trials_for(stage.trials, stage.space.size, constrained),
                                      on_bound=on_bound)
            if not budget.done(study) and seconds_left(deadline) != 0.0:
                study.optimize(objective, timeout=seconds_left(deadline), catch=(Exception,),
                               callbacks=[budget, StopAtDeadline(deadline), *tracking])
                raise_data_error(objective)
        # the known layouts are the floor every answer is compared with: they train even past the budget, and a
        # transient failure of one gets its retry (before, one failure dropped it from the search for good)
        train_first(study, stage, objective, deadline, tracking, retry=enqueue)


def stop_when_queue_empty(study: optuna.Study, trial: FrozenTrial) -> None:
    """Optuna callback for a stage that trains only its enqueued patterns: stop once none is waiting (a pattern
    that failed is recorded, not replaced by a sampled one)."""
    if not study.get_trials(deepcopy=False, states=(TrialState.WAITING,)):
        study.stop()


def _worker_main(config: SearchConfig, stage: Stage, worker: int, threads: int, deadline: float | None,
                 heartbeat: Callable[[int], Callable[[dict], None]] | None = None) -> None:
    """Entry point of a spawned worker process: pin its device / threads, then run trials. ``heartbeat(worker)``
    gives the evaluator's runs a reporter (``search.progress.worker_heartbeat``), so a worker's training shows."""
    import torch

    torch.set_num_threads(threads)
    evaluator = stage_evaluator(config, stage)
    if heartbeat is not None and hasattr(evaluator, "heartbeat"):
        evaluator.heartbeat = heartbeat(worker)
    run_worker(config, stage, worker, callbacks=None, deadline=deadline, enqueue=False,  # the search enqueues
               evaluator=evaluator)


def worker_placement(workers: int, gpus: int, cpus: int) -> list[tuple[int | None, int]]:
    """Where each of ``workers`` processes runs: (the GPU it sees as its only one, None without GPUs; its CPU
    threads). GPUs round-robin (worker i takes GPU i mod ``gpus``: more workers than GPUs share them), the CPU's
    cores split evenly. ``composer search --plan`` prints this same mapping."""
    threads = max(1, cpus // workers)
    return [(worker % gpus if gpus else None, threads) for worker in range(workers)]


def visible_gpu(index: int, visible: str | None = None) -> str:
    """What a worker's ``CUDA_VISIBLE_DEVICES`` is set to for GPU ``index`` of those this process sees: the
    ``index``-th entry of the launching process's own ``CUDA_VISIBLE_DEVICES`` where one is set (``4,5,6,7``: worker
    0 gets ``4``, not the machine's GPU 0), else the index itself."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES") if visible is None else visible
    entries = [entry.strip() for entry in (visible or "").split(",") if entry.strip()]
    return entries[index] if index < len(entries) else str(index)


def launch_workers(config: SearchConfig, stage: Stage, deadline: float | None, poll: Callable[[], None],
                   heartbeat: Callable[[int], Callable[[dict], None]] | None = None) -> None:
    """``config.workers`` processes (one GPU each when there are GPUs, ``worker_placement``); ``poll`` runs while
    they work. ``heartbeat``: picklable, given a worker's number it returns the reporter of that worker's runs."""
    import torch

    gpus = torch.cuda.device_count()
    context = multiprocessing.get_context("spawn")
    processes = []
    for worker, (gpu, threads) in enumerate(worker_placement(config.workers, gpus, os.cpu_count() or 1)):
        env_backup = os.environ.get("CUDA_VISIBLE_DEVICES")
        if gpu is not None:
            os.environ["CUDA_VISIBLE_DEVICES"] = visible_gpu(gpu, env_backup or "")
        process = context.Process(target=_worker_main, args=(config, stage, worker, threads, deadline, heartbeat),
                                  daemon=False)
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
