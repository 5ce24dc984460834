"""What makes a killed search resume where it stopped, instead of at its beginning.

Three pieces, each for one failure seen in practice (issue 13: 5 x ``kill -9`` during a 12-trial random search
left 3 distinct scored patterns, 5 cached repeats and 3 trials ``RUNNING``):

* :class:`TrialSeededSampler`: a sampler's randomness is re-derived from (seed, trial number) before every trial.
  A restarted process used to re-seed its sampler from the seed alone and so re-proposed the sequence it had
  already tried; now trial ``n`` sees the same random stream whether or not the process was restarted before it
  (model-based samplers also condition on the same history, so they propose what an uninterrupted run would).
* :func:`reap_dead_workers`: ``RUNNING`` trials whose worker was a process on this host that no longer exists
  are failed and re-queued with the same pattern at once, instead of after the storage's heartbeat grace
  (other hosts' trials still go by heartbeat: their pids mean nothing here). A worker killed in the
  milliseconds between Optuna creating its trial and the trial recording its worker leaves a ``RUNNING`` trial
  with neither a pid nor a heartbeat, which Optuna never fails; it is reaped when this process is the only one
  working on a file-backed study (:class:`StudyLock`), or once it is older than the heartbeat grace.
* :class:`EvaluationBudget`: the trial budget counts evaluations (a pattern trained, or trained and pruned),
  not trials answered from the study's cache, so repeats do not use it up; a bound on all trials still ends
  a search whose space has fewer new patterns than the budget, and says so.
"""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import numpy as np
import optuna
from optuna.samplers._lazy_random_state import LazyRandomState
from optuna.trial import FrozenTrial, TrialState

from composer.training.runlock import process_alive

try:
    import fcntl
except ImportError:  # Windows: no advisory locks, so unrecorded trials wait for the grace period
    fcntl = None

HOST = socket.gethostname()
# the exception a data source or tokenizer fails with (composer.data.errors.DataError), as a fail_reason begins
DATA_FAILURE = "DataError"
# user attributes of a trial that mean "no training happened here"
_NOT_EVALUATED = ("cached_from", "same_model_as", "skip_reason", "worker_died")
# what an enqueued trial was told (search.known, search.fidelity) and its retry must know too
_CARRIED_ON_RETRY = ("known", "known_fit", "promoted_from")
# how a reaped trial's fail_reason ends when its retry was promised (requeue_orphaned_retries looks for it)
_REQUEUED = "re-queued"


# -- sampler randomness ----------------------------------------------------------------------------------------


def _reseed(sampler: optuna.samplers.BaseSampler, seed: int) -> None:
    """Seed a sampler's generators in place (shared references, e.g. NSGA-II's child strategy, follow)."""
    rng = getattr(sampler, "_rng", None)
    if isinstance(rng, LazyRandomState):
        rng.rng.seed(seed % 2**32)
    elif isinstance(rng, np.random.RandomState):
        rng.seed(seed % 2**32)
    for name in ("_random_sampler", "_independent_sampler"):
        inner = getattr(sampler, name, None)
        if isinstance(inner, optuna.samplers.BaseSampler):
            _reseed(inner, seed + 1)


class TrialSeededSampler(optuna.samplers.BaseSampler):
    """Wraps any Optuna sampler; before each trial its generators are seeded from ``(seed, trial.number)``."""

    def __init__(self, sampler: optuna.samplers.BaseSampler, seed: int) -> None:
        self.sampler = sampler
        self.seed = seed

    def trial_seed(self, number: int) -> int:
        return (self.seed * 1_000_003 + number * 7_919) % 2**32

    def before_trial(self, study: optuna.Study, trial: FrozenTrial) -> None:
        _reseed(self.sampler, self.trial_seed(trial.number))
        self.sampler.before_trial(study, trial)

    def infer_relative_search_space(self, study, trial):
        return self.sampler.infer_relative_search_space(study, trial)

    def sample_relative(self, study, trial, search_space):
        return self.sampler.sample_relative(study, trial, search_space)

    def sample_independent(self, study, trial, param_name, param_distribution):
        return self.sampler.sample_independent(study, trial, param_name, param_distribution)

    def after_trial(self, study, trial, state, values) -> None:
        self.sampler.after_trial(study, trial, state, values)

    def reseed_rng(self) -> None:
        self.sampler.reseed_rng()


# -- dead workers ----------------------------------------------------------------------------------------------


def mark_worker(trial: optuna.Trial) -> None:
    """Record which process on which host runs ``trial`` (read by :func:`reap_dead_workers`).

    The host goes first: a trial with a ``worker`` always has its host, and one killed between the two writes
    counts as unrecorded.
    """
    trial.set_user_attr("host", HOST)
    trial.set_user_attr("worker", os.getpid())


class StudyLock:
    """An advisory lock beside a file-backed study, held shared by every process working on it for its life.

    The kernel drops a dead process's lock however it died, so a process that gets the lock exclusively on
    entering is the only live worker (``alone``): every ``RUNNING`` trial is then a dead one's, even one that
    never recorded its worker. Call :meth:`share` once that is settled, so other workers can join. With no path
    (a database server, or no ``fcntl``) nobody is ever alone.
    """

    def __init__(self, path: str | Path | None) -> None:
        self.path = None if path is None or fcntl is None else Path(path)
        self.alone = False
        self._fd: int | None = None

    def __enter__(self) -> StudyLock:
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            while True:
                self._fd = os.open(self.path, os.O_CREAT | os.O_RDWR, 0o644)
                try:
                    fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    self.alone = True
                except BlockingIOError:
                    self.share()
                if self._current():
                    break
                # the last holder removed the file while this process waited on it: lock the one at the path now
                os.close(self._fd)
                self.alone = False
        return self

    def _current(self) -> bool:
        """Whether the file this process locked is still the one at the path (the last holder removes it)."""
        try:
            return os.fstat(self._fd).st_ino == os.stat(self.path).st_ino
        except FileNotFoundError:
            return False

    def share(self) -> None:
        """Hold the lock shared from now on (waits while another process settles its own reaping)."""
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_SH)

    def __exit__(self, *exc) -> None:
        if self._fd is not None:
            try:  # the last process out removes the file: a finished search leaves no empty lock behind (issue 61)
                fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                self.path.unlink(missing_ok=True)
            except BlockingIOError:
                pass  # another process still holds it
            os.close(self._fd)
            self._fd = None


def _why_dead(trial: FrozenTrial, alone: bool, grace_s: float) -> str | None:
    """Why a ``RUNNING`` trial's worker is known to be gone, or None while it may still be working."""
    attrs = trial.user_attrs
    pid = attrs.get("worker")
    if not isinstance(pid, int):
        age = (datetime.now() - trial.datetime_start).total_seconds() if trial.datetime_start else 0.0
        if alone or age > grace_s:
            return "its worker died before recording itself"
        return None
    if attrs.get("host") != HOST or pid == os.getpid() or process_alive(pid):
        return None
    return f"its worker (pid {pid}) died"


def reap_dead_workers(study: optuna.Study, requeue: bool = True, alone: bool = False,
                      grace_s: float = 120.0) -> list[int]:
    """Fail the ``RUNNING`` trials of dead workers (and re-queue their patterns); returns their numbers.

    Dead means: recorded as a process of this host that no longer exists; or unrecorded (killed between Optuna
    creating the trial and its first line) when ``alone`` (see :class:`StudyLock`) or older than ``grace_s``,
    which no live worker takes to record itself. Other hosts' recorded trials are left to the heartbeat.
    When ``alone``, retries that an earlier reaper promised but was killed before enqueueing are enqueued too
    (:func:`requeue_orphaned_retries`).
    """
    if alone and requeue:
        requeue_orphaned_retries(study)
    reaped = []
    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        why = _why_dead(trial, alone, grace_s)
        if why is None:
            continue
        params = _pattern_of(trial)
        storage = study._storage  # Optuna's public API cannot fail another process's trial
        try:
            storage.set_trial_user_attr(trial._trial_id, "worker_died", f"{why} on {HOST}")
            storage.set_trial_user_attr(trial._trial_id, "fail_reason",
                                        f"{why}; {_REQUEUED if requeue and params else 'not retried'}")
            # failing first makes exactly one of two concurrent reapers the winner (the loser's write raises);
            # a kill between this line and the enqueue leaves a promised retry that the next lone reaper keeps
            storage.set_trial_state_values(trial._trial_id, TrialState.FAIL)
        except RuntimeError:  # finished meanwhile: another process reaped it first
            continue
        if requeue and params:
            _enqueue_retry(study, trial, params)
        reaped.append(trial.number)
    return reaped


def requeue_orphaned_retries(study: optuna.Study) -> list[int]:
    """Enqueue the retries that reaped trials were promised (``re-queued``) but never got; returns their numbers.

    A reaper killed between failing a dead worker's trial and enqueueing its retry left the pattern neither
    running nor waiting: it was silently dropped from the search (a flake of the kill -9 resume test, CI stop
    32). Call only while no other process can be reaping (``StudyLock.alone``), or two could enqueue the same
    retry.
    """
    trials = study.get_trials(deepcopy=False)
    retried = {t.user_attrs.get("retry_of") for t in trials}
    orphans = [t for t in trials if t.state == TrialState.FAIL and "worker_died" in t.user_attrs
               and str(t.user_attrs.get("fail_reason", "")).endswith(_REQUEUED) and t.number not in retried]
    for trial in orphans:
        _enqueue_retry(study, trial, _pattern_of(trial))
    return [t.number for t in orphans]


def _pattern_of(trial: FrozenTrial) -> dict:
    """The whole pattern a trial was to train.

    An enqueued trial (a known layout, a rung's promotion) holds its whole pattern in Optuna's fixed_params.
    Those win over trial.params, which a kill in the middle of suggesting leaves partial: retried with partial
    params, the rest of the layers would be sampled, and a rung would train a pattern it never promoted (seen as
    a flake of the successive-halving kill test, 2 runs in 8).
    """
    return trial.system_attrs.get("fixed_params") or trial.params or {}


def _enqueue_retry(study: optuna.Study, trial: FrozenTrial, params: dict) -> None:
    kept = {key: value for key, value in trial.user_attrs.items() if key in _CARRIED_ON_RETRY}
    study.enqueue_trial(params, user_attrs={**kept, "retry_of": trial.number}, skip_if_exists=False)


# -- the budget ------------------------------------------------------------------------------------------------


def is_evaluation(trial: FrozenTrial) -> bool:
    """A finished trial that trained its pattern (scored, pruned or failed while training)."""
    if trial.state not in (TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL):
        return False
    attrs = trial.user_attrs
    if any(key in attrs for key in _NOT_EVALUATED) or failed_on_data(attrs):
        return False
    return not str(attrs.get("fail_reason", "")).startswith("as in trial ")  # a known failure, not retrained


_REPEATED = re.compile(r"^as in trial [0-9, ]+: ")  # search.engine.REPEATED_FAILURE, and the trials it names


def failed_on_data(attrs: dict) -> bool:
    """A trial that failed on the data (its source or tokenizer: ``composer.data``'s ``DataError``), not on its
    pattern: every candidate would have failed the same way. It is no evaluation and no failure of its pattern,
    so a re-run after the data is fixed trains the study's patterns (issue 47: a study whose every trial failed
    on a missing text field failed again at once, each pattern a known failure and the budget used up)."""
    return _REPEATED.sub("", str(attrs.get("fail_reason", ""))).startswith(f"{DATA_FAILURE}:")


class EvaluationBudget:
    """Optuna callback: stop once ``evaluations`` trials trained their pattern, or ``max_trials`` trials ran."""

    def __init__(self, evaluations: int, max_trials: int, on_bound: Callable[[str], None] | None = None) -> None:
        self.evaluations = evaluations
        self.max_trials = max_trials
        self.on_bound = on_bound
        self.reported = False

    def counts(self, study: optuna.Study) -> tuple[int, int]:
        trials = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL))
        trials = [t for t in trials if not failed_on_data(t.user_attrs)]  # not the patterns' doing: not counted
        return sum(is_evaluation(t) for t in trials), len(trials)

    def done(self, study: optuna.Study) -> bool:
        evaluated, total = self.counts(study)
        if evaluated >= self.evaluations:
            return True
        if total >= self.max_trials:
            if self.on_bound and not self.reported:
                self.reported = True
                self.on_bound(f"stopping after {total} trials with {evaluated} of {self.evaluations} evaluations: "
                              "the rest were answered from the study's cache, skipped by a constraint or known "
                              "failures; the space (or its constraints) holds few new patterns")
            return True
        return False

    def __call__(self, study: optuna.Study, trial: FrozenTrial) -> None:
        if self.done(study):
            study.stop()


CONSTRAINED_TRIALS_PER_EVALUATION = 10
"""Under limits that skip candidates before they train (``--max-kv``, ``--max-latency``, ``--min-throughput``),
the bound allows this many trials per evaluation: a skip costs seconds, and the constrained ``AMSD`` search at
equal cost (2026-11-29) stopped its first rung after 41 trials with 11 of 20 evaluations under the unconstrained
bound, where a few hundred of its 4,096 patterns meet the limits."""


def max_trials_for(evaluations: int, space_size: int, constrained: bool = False) -> int:
    """The bound on all trials: room for repeats (and, ``constrained``, for the skips of limits that admit a small
    part of the space), but a small space still ends."""
    if space_size <= evaluations:
        return evaluations + space_size
    per_evaluation = CONSTRAINED_TRIALS_PER_EVALUATION if constrained else 2
    return min(max(per_evaluation * evaluations, evaluations + 10), evaluations + space_size)
