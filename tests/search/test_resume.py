"""Resume continues a search where it stopped (issue 13): per-trial sampler seeds, dead workers reaped at once,
a budget of evaluations; and the fault-injection run (random kill -9, then resume) that CI repeats every time."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from composer.cli import main
from search.resume import (
    HOST,
    EvaluationBudget,
    StudyLock,
    TrialSeededSampler,
    is_evaluation,
    max_trials_for,
    reap_dead_workers,
)
from search.storage import worker_lock_path

optuna.logging.set_verbosity(optuna.logging.ERROR)


def dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def objective(trial):
    return sum(trial.suggest_categorical(f"layer_{i}", ["A", "M"]) == "A" for i in range(6))


@pytest.mark.parametrize("sampler", ["random", "tpe", "gp"])
def test_a_restarted_study_proposes_what_an_uninterrupted_one_would(tmp_path, sampler):
    def make(storage):
        inner = {"random": optuna.samplers.RandomSampler(seed=0),
                 "tpe": optuna.samplers.TPESampler(seed=0, multivariate=True, n_startup_trials=3),
                 "gp": optuna.samplers.GPSampler(seed=0, n_startup_trials=3)}[sampler]
        return optuna.create_study(storage=storage, study_name="s", direction="maximize", load_if_exists=True,
                                   sampler=TrialSeededSampler(inner, seed=0))

    uninterrupted = make(f"sqlite:///{tmp_path / 'a.db'}")
    uninterrupted.optimize(objective, n_trials=7)
    storage = f"sqlite:///{tmp_path / 'b.db'}"
    for chunk in (2, 3, 2):  # a process restarted twice: a fresh sampler object each time
        make(storage).optimize(objective, n_trials=chunk)
    resumed = make(storage)
    assert [t.params for t in resumed.trials] == [t.params for t in uninterrupted.trials]


def test_dead_local_workers_are_failed_and_requeued_at_once(tmp_path):
    study = optuna.create_study(storage=f"sqlite:///{tmp_path / 's.db'}", study_name="s")
    dead = study.ask({"layer_0": optuna.distributions.CategoricalDistribution(["A", "M"])})
    dead.set_user_attr("worker", dead_pid())
    dead.set_user_attr("host", HOST)
    elsewhere = study.ask({"layer_0": optuna.distributions.CategoricalDistribution(["A", "M"])})
    elsewhere.set_user_attr("worker", dead_pid())
    elsewhere.set_user_attr("host", "another-node")  # left to the heartbeat
    alive = study.ask({"layer_0": optuna.distributions.CategoricalDistribution(["A", "M"])})
    alive.set_user_attr("worker", os.getppid())
    alive.set_user_attr("host", HOST)

    assert reap_dead_workers(study) == [dead.number]
    trials = {t.number: t for t in study.get_trials(deepcopy=False)}
    assert trials[dead.number].state == TrialState.FAIL
    assert "died" in trials[dead.number].user_attrs["fail_reason"]
    assert trials[elsewhere.number].state == trials[alive.number].state == TrialState.RUNNING
    waiting = study.get_trials(deepcopy=False, states=(TrialState.WAITING,))
    assert len(waiting) == 1 and waiting[0].user_attrs["retry_of"] == dead.number
    assert reap_dead_workers(study) == []  # once


def test_a_retry_promised_by_a_reaper_killed_before_enqueueing_it_is_enqueued_by_the_next_lone_reaper(tmp_path):
    """CI stop 32's flake: a reaper killed between failing a dead worker's trial and enqueueing its retry
    dropped the pattern from the search (trial 4 of the kill -9 test: failed, 're-queued', never retried)."""
    study = optuna.create_study(storage=f"sqlite:///{tmp_path / 's.db'}", study_name="s")
    dead = study.ask({"layer_0": optuna.distributions.CategoricalDistribution(["A", "M"])})
    dead.set_user_attr("worker", dead_pid())
    dead.set_user_attr("host", HOST)

    class Killed(BaseException):
        pass

    def killed_here(*args, **kwargs):
        raise Killed

    enqueue, study.enqueue_trial = study.enqueue_trial, killed_here
    with pytest.raises(Killed):
        reap_dead_workers(study, alone=True)
    study.enqueue_trial = enqueue
    assert study.get_trials(deepcopy=False)[dead.number].state == TrialState.FAIL
    assert not study.get_trials(deepcopy=False, states=(TrialState.WAITING,))

    assert reap_dead_workers(study, alone=False) == []  # another worker may be reaping: leave it
    assert not study.get_trials(deepcopy=False, states=(TrialState.WAITING,))
    assert reap_dead_workers(study, alone=True) == []  # nothing newly dead, but the promise is kept
    reap_dead_workers(study, alone=True)  # and kept once
    waiting = study.get_trials(deepcopy=False, states=(TrialState.WAITING,))
    assert [(t.user_attrs["retry_of"], t.params or t.system_attrs["fixed_params"]) for t in waiting] == [
        (dead.number, dead.params)]


def test_a_trial_killed_before_recording_its_worker_is_reaped_only_when_provably_dead(tmp_path):
    """Optuna never fails a RUNNING trial without a heartbeat: the one a kill left between ``ask`` and
    ``mark_worker`` (the flake behind a red CI run) is failed when no other worker holds the study, or once it
    is older than the grace period; otherwise it may be a live worker's and is left alone."""
    study = optuna.create_study(storage=f"sqlite:///{tmp_path / 's.db'}", study_name="s")
    unrecorded = study.ask()
    assert reap_dead_workers(study, alone=False, grace_s=120) == []
    assert study.get_trials(deepcopy=False)[unrecorded.number].state == TrialState.RUNNING
    assert reap_dead_workers(study, alone=True) == [unrecorded.number]
    reaped = study.get_trials(deepcopy=False)[unrecorded.number]
    assert reaped.state == TrialState.FAIL
    assert reaped.user_attrs["fail_reason"] == "its worker died before recording itself; not retried"
    assert not study.get_trials(deepcopy=False, states=(TrialState.WAITING,))  # no pattern to retry

    old = study.ask()
    assert reap_dead_workers(study, alone=False, grace_s=0) == [old.number]


def test_the_study_lock_says_alone_only_to_the_one_live_worker(tmp_path):
    path = worker_lock_path(None, tmp_path)
    assert path == (tmp_path / "study.db.workers.lock").resolve()
    with StudyLock(path) as first:
        assert first.alone
        first.share()
        with StudyLock(path) as second:
            assert not second.alone  # the first still works on the study
        assert path.exists(), "the first still holds it"
    assert not path.exists(), "the last one out removes the lock file: a finished search leaves none behind"
    with StudyLock(path) as after:  # released on exit (and by the kernel when a process dies)
        assert after.alone and path.exists()
    assert not path.exists()
    assert worker_lock_path(str(tmp_path / "s.jsonl"), tmp_path) == Path(f"{tmp_path / 's.jsonl'}.workers.lock")
    assert worker_lock_path("postgresql://u@db/s", tmp_path) is None
    with StudyLock(None) as server:
        assert not server.alone


def test_cached_answers_do_not_use_up_the_budget_but_a_bound_ends_a_small_space():
    study = optuna.create_study(direction="maximize")
    study.enqueue_trial({"x": 0})
    messages = []
    budget = EvaluationBudget(3, max_trials_for(3, space_size=2), on_bound=messages.append)

    def cached_after_first(trial):
        x = trial.suggest_int("x", 0, 1)
        if any(t.params.get("x") == x and t.state == TrialState.COMPLETE for t in study.trials[:-1]):
            trial.set_user_attr("cached_from", 0)
        return x

    study.optimize(cached_after_first, n_trials=50, callbacks=[budget])
    evaluated = [t for t in study.trials if is_evaluation(t)]
    assert len(evaluated) <= 2 < len(study.trials) <= max_trials_for(3, 2)
    assert messages and "holds few new patterns" in messages[0]


def test_kill_9_at_random_moments_then_resume_loses_nothing_and_repeats_nothing(tmp_path, monkeypatch):
    """The done-when of issue 13 on the toy evaluator: 4 random kills of a 12-trial random search, one more
    run (in this process: a fifth process would only start Python again); the study then holds >= 10 distinct
    evaluated patterns, no pattern scored twice, nothing RUNNING."""
    out, log = tmp_path / "out", tmp_path / "trained.log"
    env = {**os.environ, "TOY_EVAL_DELAY": "0.4", "TOY_EVAL_LOG": str(log), "WANDB_MODE": "disabled"}
    argv = [sys.executable, "-m", "composer", "search", "--evaluator", "toy_evaluator:make", "--budget", "smoke",
            "--sampler", "random", "--trials", "12", "--wandb", "off", "--out", str(out)]
    rng = random.Random(0)
    for _ in range(4):
        process = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(2.5, 5.0))  # start-up is ~2 s: kills land during the trials
        process.send_signal(signal.SIGKILL)
        process.wait()
    for name in ("TOY_EVAL_DELAY", "TOY_EVAL_LOG", "WANDB_MODE"):
        monkeypatch.setenv(name, env[name])
    assert main(argv[3:]) == 0

    storage = optuna.storages.RDBStorage(f"sqlite:///{out / 'study.db'}")
    (summary,) = optuna.get_all_study_summaries(storage)
    study = optuna.load_study(study_name=summary.study_name, storage=storage)
    trials = study.get_trials(deepcopy=False)
    assert not [t.number for t in trials if t.state == TrialState.RUNNING]
    evaluated = [t for t in trials if is_evaluation(t)]
    patterns = [t.user_attrs["pattern"] for t in evaluated]
    assert len(set(patterns)) >= 10, patterns
    scored = [t.user_attrs["pattern"] for t in evaluated if t.state == TrialState.COMPLETE
              and "fail_reason" not in t.user_attrs]
    assert len(scored) == len(set(scored)), "a pattern was scored twice"
    killed = [t for t in trials if "worker_died" in t.user_attrs]
    retried = {t.user_attrs.get("retry_of") for t in trials} - {None}
    assert {t.number for t in killed} <= retried | {t.number for t in killed if not t.params}


def test_an_enqueued_trial_killed_before_it_suggested_is_retried_with_its_pattern_and_attributes(tmp_path):
    """A worker killed between Optuna handing it an enqueued trial and the trial suggesting its layers leaves a
    RUNNING trial whose pattern is only in Optuna's fixed_params; the retry must keep it (and what it was told)."""
    import optuna

    from search.resume import reap_dead_workers

    study = optuna.create_study(storage=f"sqlite:///{tmp_path / 'study.db'}", study_name="s")
    params = {f"layer_{i}": symbol for i, symbol in enumerate("AMAMAM")}
    study.enqueue_trial(params, user_attrs={"known": "llama", "known_fit": "1:1 alternation"})
    trial = study.ask()  # popped from the queue, nothing suggested yet: trial.params is empty
    assert study.trials[trial.number].params == {}
    study._storage.set_trial_user_attr(trial._trial_id, "host", __import__("socket").gethostname())
    study._storage.set_trial_user_attr(trial._trial_id, "worker", 2**22 + 12345)  # no such process
    assert reap_dead_workers(study) == [trial.number]
    retry = [t for t in study.get_trials(deepcopy=False) if t.state == optuna.trial.TrialState.WAITING]
    assert len(retry) == 1
    assert retry[0].system_attrs["fixed_params"] == params
    assert retry[0].user_attrs["known"] == "llama" and retry[0].user_attrs["retry_of"] == trial.number


def test_an_enqueued_trial_killed_half_way_through_suggesting_is_retried_with_its_whole_pattern(tmp_path):
    """Killed after suggesting two of its six layers, the trial's params are partial; retried with them, the other
    four layers would be sampled and a rung would train a pattern it never promoted (the flake, 2 runs in 8, of the
    successive-halving kill test). The enqueued pattern (fixed_params) must win."""
    import optuna

    from search.resume import reap_dead_workers

    study = optuna.create_study(storage=f"sqlite:///{tmp_path / 'study.db'}", study_name="s")
    params = {f"layer_{i}": symbol for i, symbol in enumerate("AMAMAM")}
    study.enqueue_trial(params, user_attrs={"known": "llama"})
    trial = study.ask()
    for i in range(2):
        trial.suggest_categorical(f"layer_{i}", ["A", "M"])
    assert len(study.trials[trial.number].params) == 2
    study._storage.set_trial_user_attr(trial._trial_id, "host", __import__("socket").gethostname())
    study._storage.set_trial_user_attr(trial._trial_id, "worker", 2**22 + 12345)  # no such process
    assert reap_dead_workers(study) == [trial.number]
    (retry,) = [t for t in study.get_trials(deepcopy=False) if t.state == optuna.trial.TrialState.WAITING]
    assert retry.system_attrs["fixed_params"] == params


def test_limits_that_skip_most_of_the_space_leave_room_for_more_proposals():
    """Under --max-kv / --max-latency most proposals can be skipped in seconds: the bound allows 10 trials per
    evaluation (the equal-cost AMSD search stopped at 41 trials with 11 of 20 evaluations under 2), never more than
    the space holds beyond its evaluations."""
    assert max_trials_for(20, 4_096) == 40
    assert max_trials_for(20, 4_096, constrained=True) == 200
    assert max_trials_for(20, 50, constrained=True) == 70
    assert max_trials_for(3, 2, constrained=True) == max_trials_for(3, 2) == 5


def test_a_worker_that_waited_on_a_removed_lock_file_locks_the_one_at_the_path(tmp_path):
    """The last holder removes the file on leaving; a process that opened it just before must not hold a lock on
    the removed file (a third would then find itself alone beside it)."""
    import os

    path = tmp_path / "study.db.workers.lock"
    with StudyLock(path):
        stale = os.open(path, os.O_RDWR)  # opened by a process about to lock it
    waiting = StudyLock(path)
    real_open = os.open
    calls = []

    def open_stale_first(*args, **kwargs):
        calls.append(args[0])
        return stale if len(calls) == 1 else real_open(*args, **kwargs)

    os.open = open_stale_first
    try:
        with waiting as lock:
            assert len(calls) == 2 and lock.alone and os.fstat(lock._fd).st_ino == os.stat(path).st_ino
            lock.share()  # settled: others may join
            with StudyLock(path) as third:
                assert not third.alone, "the same file, so not alone beside the waiting worker"
    finally:
        os.open = real_open
