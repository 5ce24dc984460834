"""Live progress of a search: trials done of total, the latest result, best so far, elapsed time and ETA."""

from __future__ import annotations

import sys
import time

import optuna
from optuna.trial import FrozenTrial, TrialState

from search.engine import FINISHED
from search.resume import is_evaluation


def stage_label(kind: str, index: int, count: int) -> str:
    """How the search's lines name rung (or stage) ``index`` of ``count``: ``rung 1 of 0-1``. Counted from 0, as
    the study names (``<study>-rung1``), ``rungs.json`` and the summary's ``rungs:`` line count them, so every
    line of one search gives a rung the same number."""
    return f"{kind} {index} of 0-{count - 1}"


def _clock(seconds: float) -> str:
    seconds = int(max(0, seconds))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


class SearchProgress:
    """Prints one line per finished trial (an Optuna callback, or ``poll`` for worker processes)."""

    def __init__(self, total: int, maximize: bool, label: str = "", stream=sys.stderr) -> None:
        self.total = total
        self.maximize = maximize
        self.label = label
        self.stream = stream
        self.started = time.time()
        self.seen: set[int] = set()
        self.done_before: int | None = None

    def __call__(self, study: optuna.Study, trial: FrozenTrial) -> None:
        self._print(study, trial)

    def poll(self, study_loader) -> None:
        study = study_loader()
        for trial in study.get_trials(deepcopy=False, states=FINISHED):
            if trial.number not in self.seen:
                self._print(study, trial)

    def _print(self, study: optuna.Study, trial: FrozenTrial) -> None:
        self.seen.add(trial.number)
        finished = study.get_trials(deepcopy=False, states=FINISHED)
        done = sum(is_evaluation(t) for t in finished)  # what the budget counts: cached answers are free
        if self.done_before is None:
            self.done_before = done - 1
        attrs = trial.user_attrs
        pattern = attrs.get("pattern", "?")
        if "fail_reason" in attrs or trial.state == TrialState.FAIL:
            outcome = f"failed: {attrs.get('fail_reason', 'unknown')}"[:60]
        elif "pruned_at" in attrs or trial.state == TrialState.PRUNED and "skip_reason" not in attrs:
            outcome = "pruned early"
        elif "skip_reason" in attrs:
            outcome = f"skipped: {attrs['skip_reason']}"[:60]
        else:
            outcome = f"score {trial.values[0]:.4f}" + (" (cached)" if "cached_from" in attrs else "")
        complete = [t for t in finished if t.state == TrialState.COMPLETE
                    and not any(k in t.user_attrs for k in ("pruned_at", "skip_reason", "fail_reason"))]
        best = ""
        if complete:
            top = (max if self.maximize else min)(complete, key=lambda t: t.values[0])
            best = f"best {top.values[0]:.4f} {top.user_attrs.get('pattern', '')}"
        elapsed = time.time() - self.started
        new = max(1, done - self.done_before)
        eta = elapsed / new * max(0, self.total - done)
        print(f"{self.label}[{done:>3}/{self.total}] {pattern:<16} {outcome:<28} {best:<30} "
              f"elapsed {_clock(elapsed)} eta {_clock(eta)}", file=self.stream, flush=True)
