"""Progress display: a step-based bar on a terminal, periodic log lines otherwise (CI logs, batch jobs)."""

from __future__ import annotations

import sys
import time

import lightning as L
from lightning.pytorch.callbacks import TQDMProgressBar
from lightning.pytorch.utilities import rank_zero_only


_SHOWN = {"train/loss": "loss {:.4f}", "val/loss": "val {:.4f}", "tok/s": "tok/s {:,.0f}"}


def _fmt_metrics(metrics: dict) -> str:
    return "  ".join(fmt.format(float(metrics[key])) for key, fmt in _SHOWN.items() if key in metrics)


def _fmt_seconds(seconds: float) -> str:
    seconds = int(seconds)
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


class StepProgressBar(TQDMProgressBar):
    """tqdm bar over optimizer steps (the dataloader is endless, so Lightning's own bar has no total/ETA)."""

    def on_train_epoch_start(self, trainer: L.Trainer, *_) -> None:
        super().on_train_epoch_start(trainer)
        self.train_progress_bar.reset(total=trainer.max_steps)
        self.train_progress_bar.n = trainer.global_step
        self.train_progress_bar.set_description("train steps")

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, *_) -> None:
        bar = self.train_progress_bar
        if trainer.global_step != bar.n:
            bar.n = trainer.global_step
            bar.set_postfix(self.get_metrics(trainer, pl_module), refresh=False)
            bar.refresh()


class LogProgress(L.Callback):
    """One line every ``every`` optimizer steps: step, loss, tokens/s and ETA."""

    def __init__(self, every: int) -> None:
        self.every = max(1, every)
        self._start: float | None = None
        self._start_step = 0

    @rank_zero_only
    def on_train_start(self, trainer: L.Trainer, *_) -> None:
        self._start, self._start_step = time.perf_counter(), trainer.global_step

    @rank_zero_only
    def on_train_batch_end(self, trainer: L.Trainer, *_) -> None:
        step = trainer.global_step
        if step == 0 or (step % self.every and step != trainer.max_steps) or getattr(self, "_last", -1) == step:
            return
        self._last = step
        elapsed = time.perf_counter() - self._start
        done = step - self._start_step
        eta = elapsed / done * (trainer.max_steps - step) if done else 0.0
        metrics = _fmt_metrics(trainer.progress_bar_metrics)
        print(f"step {step}/{trainer.max_steps}  {metrics}  eta {_fmt_seconds(eta)}", file=sys.stderr, flush=True)


class Announce(L.Callback):
    """Print ``lines`` (how the run was set up: ``composer train``'s default preset, a search's answer and its rate)
    on stderr when training starts, once bad input has been refused in one line and before the first step."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = list(lines)

    @rank_zero_only
    def on_train_start(self, trainer: L.Trainer, *_) -> None:
        for line in self.lines:
            print(line, file=sys.stderr, flush=True)


def progress_callback(log_interval: int) -> L.Callback:
    return StepProgressBar() if sys.stderr.isatty() else LogProgress(log_interval)


class Heartbeat(L.Callback):
    """Calls ``report`` with where a run is (``step``, ``steps``, ``tokens``, ``total_tokens``, ``tokens_per_s``
    and the caller's ``context``) at most every ``every_s`` seconds and once at its last step.

    Why: a caller that runs many short trainings (a search's candidates) prints its own progress between them, and
    a candidate's runs take minutes; without this a person watching sees nothing until a candidate ends (issue 36:
    150 s of silence at the start of README's default search). Steps count from where the run started, so a run
    continued from a checkpoint reports its own speed."""

    def __init__(self, report, every_s: float = 10.0, context: dict | None = None) -> None:
        self.report = report
        self.every_s = every_s
        self.context = dict(context or {})
        self._started: tuple[float, int] | None = None
        self._last = 0.0

    def on_train_start(self, trainer: L.Trainer, *_) -> None:
        self._started = (time.perf_counter(), trainer.global_step)
        self._last = time.perf_counter()

    def on_train_batch_end(self, trainer: L.Trainer, *_) -> None:
        now = time.perf_counter()
        step = trainer.global_step
        if now - self._last < self.every_s and step != trainer.max_steps:
            return
        self._last = now
        started_at, first_step = self._started or (now, step)
        tokens_per_step = self.context.get("tokens_per_step", 0)
        done = step - first_step
        self.report({**self.context, "step": step, "steps": trainer.max_steps, "tokens": step * tokens_per_step,
                     "total_tokens": trainer.max_steps * tokens_per_step,
                     "tokens_per_s": done * tokens_per_step / (now - started_at) if now > started_at and done else None})
