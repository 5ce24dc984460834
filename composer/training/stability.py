"""Training instability made visible: loss spikes, the largest rise of the smoothed loss, gradient norms, and
divergence, recorded in ``summary.json`` so that a comparison can tell "this architecture is worse" from "this run
blew up at this learning rate" (issue 16).

Definitions (documented constants, not hidden ones):

* smoothed loss: an exponential moving average of the per-step training loss, ``SMOOTHING = 0.9``, bias-corrected;
* largest rise: the largest amount by which the smoothed loss climbed above its running minimum (0 for a run whose
  smoothed loss only fell);
* spike: a step (after the first ``SPIKE_WARMUP`` steps) whose loss exceeds the smoothed loss before it by more
  than ``SPIKE_RATIO`` (relative), e.g. 3.0 -> 3.6;
* non-finite step: a loss or gradient norm that is NaN or infinite. The first non-finite loss stops training:
  the run is reported as diverged, with the step and a hint, never as a loss;
* blow-up: a finite loss that climbed far above where the run started and stays there
  (:mod:`composer.training.divergence` gives the rule and its constants). It also stops training and reports the
  run as diverged; ``loss_steps_above_start`` counts every step above that line, so a steady blow-up shows even
  where no single step was a spike.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import lightning as L

from composer.training.divergence import SMOOTHING, BlowupRule

SPIKE_RATIO = 0.2
SPIKE_WARMUP = 10
MAX_SPIKE_STEPS = 20  # spike steps listed in the summary (the count is complete)


@dataclass
class StabilityRecord:
    """Per-step statistics of one run (this process's loss; the global gradient norm)."""

    steps: int = 0
    smoothed: float | None = None
    running_min: float = math.inf
    largest_rise: float = 0.0
    spikes: list[int] = field(default_factory=list)
    spike_count: int = 0
    max_grad_norm: float | None = None
    nonfinite_steps: int = 0
    diverged_at: int | None = None
    diverged_reason: str | None = None
    vocab_size: int = 256
    blowup: dict[str, Any] = field(default_factory=dict)  # the BlowupRule's state (plain, for checkpoints)
    _ema: float = 0.0

    def update(self, step: int, loss: float, grad_norm: float | None) -> None:
        self.steps += 1
        if grad_norm is not None:
            if math.isfinite(grad_norm):
                self.max_grad_norm = grad_norm if self.max_grad_norm is None else max(self.max_grad_norm, grad_norm)
            elif math.isfinite(loss):
                self.nonfinite_steps += 1
        if not math.isfinite(loss):
            self.nonfinite_steps += 1
            if self.diverged_at is None:
                self.diverged_at = step
                self.diverged_reason = f"non-finite loss ({loss})"
            return
        before = self.smoothed
        if before is not None and self.steps > SPIKE_WARMUP and loss > before * (1 + SPIKE_RATIO):
            self.spike_count += 1
            if len(self.spikes) < MAX_SPIKE_STEPS:
                self.spikes.append(step)
        self._ema = SMOOTHING * self._ema + (1 - SMOOTHING) * loss
        self.smoothed = self._ema / (1 - SMOOTHING**self.steps)
        self.running_min = min(self.running_min, self.smoothed)
        self.largest_rise = max(self.largest_rise, self.smoothed - self.running_min)
        self._apply_rule(step, lambda rule: rule.update(step, loss))

    def finish(self, step: int) -> None:
        """The run's end: a run that finished above the blow-up line is diverged too (see ``BlowupRule``)."""
        self._apply_rule(step, lambda rule: rule.finish(step))

    def _apply_rule(self, step: int, apply) -> None:
        rule = BlowupRule(**{"vocab_size": self.vocab_size, **self.blowup})
        if apply(rule) and self.diverged_at is None:
            self.diverged_at = step
            self.diverged_reason = rule.reason()
        self.blowup = {k: v for k, v in rule.__dict__.items() if k != "vocab_size"}

    def summary(self) -> dict[str, Any]:
        return {
            "loss_largest_rise": round(self.largest_rise, 6),
            "loss_spikes": self.spike_count,
            "loss_spike_steps": list(self.spikes),
            "max_grad_norm": self.max_grad_norm,
            "nonfinite_steps": self.nonfinite_steps,
            "diverged": self.diverged_at is not None,
            "diverged_at_step": self.diverged_at,
            "diverged_reason": self.diverged_reason,
            "loss_steps_above_start": self.blowup.get("steps_above_total", 0),
        }


class StabilityMonitor(L.Callback):
    """Feeds every optimizer step's loss and gradient norm to a :class:`StabilityRecord`; stops at divergence
    (a non-finite loss, or a blow-up at ``vocab_size``'s uniform-guess loss)."""

    def __init__(self, vocab_size: int = 256) -> None:
        self.record = StabilityRecord(vocab_size=vocab_size)

    # saved in checkpoints, so a resumed run's summary covers the whole run
    def state_dict(self) -> dict[str, Any]:
        return dict(self.record.__dict__)

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        # checkpoints written before the blow-up rule lack its fields: they start it afresh at this run's vocabulary
        self.record = StabilityRecord(**{"vocab_size": self.record.vocab_size, **state_dict})

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs, batch, batch_idx) -> None:
        loss = outputs["loss"] if isinstance(outputs, dict) else outputs
        if loss is None:
            return
        norm = getattr(pl_module, "last_grad_norm", None)
        self.record.update(trainer.global_step, float(loss), None if norm is None else float(norm))
        if self.record.diverged_at is not None:
            trainer.should_stop = True  # nothing after a non-finite loss or a blow-up is worth computing

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.record.finish(trainer.global_step)
