"""When is a run diverged? A non-finite loss, or a finite loss that blew up and stays up (issue 27).

A learning rate far too high does not always give NaN: at ``--lr 10`` a small model's loss climbs from ln(256) =
5.5 to several hundred and stays there, finite. Counting only non-finite steps called that run healthy, and every
report that reads ``diverged`` (comparisons, transfer, the sweeps, the search's evaluators) scored it as a loss.

The rule, with its constants:

* the run's **start** is the larger of its first finite training loss and ln(vocabulary), the loss of uniform
  guessing (a fresh model sits near both; taking the larger keeps the rule from firing on a lucky first batch);
* the loss is tracked as an exponential moving average (``SMOOTHING = 0.9``, bias-corrected, as
  :mod:`composer.training.stability` smooths it);
* the run has **blown up** once that smoothed loss has stayed above ``BLOWUP_FACTOR`` (1.5) times the start for
  ``BLOWUP_PATIENCE`` (10) consecutive steps, or it ends the run above that line (a run shorter than the
  patience, e.g. 4 steps at ``--lr 10``, is judged by where it finished).

A healthy run never comes near: training drives the loss below its start within its first steps, and a single
spike is absorbed by the average. A run that sits 50% above guessing for 10 steps has learned nothing it will
recover in a budget a sweep can afford, so it stops there (one line, exit 1) rather than spending the rest.

This module is plain Python so that every training loop can apply the same rule: Lightning's
(:class:`composer.training.stability.StabilityMonitor`) and the MAD/recall loop (``search.mad.evaluate``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

SMOOTHING = 0.9
BLOWUP_FACTOR = 1.5
BLOWUP_PATIENCE = 10


@dataclass
class BlowupRule:
    """Feed it every step's training loss; :attr:`blown_up_at` is the step at which the rule fired (else None)."""

    vocab_size: int
    start: float | None = None
    smoothed: float | None = None
    steps_above: int = 0  # consecutive steps above the threshold, up to now
    steps_above_total: int = 0  # every step above it: a steady blow-up shows here, where spikes count single steps
    blown_up_at: int | None = None
    _ema: float = 0.0
    _seen: int = 0

    @property
    def threshold(self) -> float | None:
        return None if self.start is None else BLOWUP_FACTOR * self.start

    def update(self, step: int, loss: float) -> bool:
        """Take one step's loss; True once the run has blown up (non-finite losses are the caller's to count)."""
        if not math.isfinite(loss):
            return self.blown_up_at is not None
        if self.start is None:
            self.start = max(loss, math.log(self.vocab_size))
        self._seen += 1
        self._ema = SMOOTHING * self._ema + (1 - SMOOTHING) * loss
        self.smoothed = self._ema / (1 - SMOOTHING**self._seen)
        if self.smoothed > self.threshold:
            self.steps_above += 1
            self.steps_above_total += 1
        else:
            self.steps_above = 0
        if self.blown_up_at is None and self.steps_above >= BLOWUP_PATIENCE:
            self.blown_up_at = step
        return self.blown_up_at is not None

    def finish(self, step: int) -> bool:
        """The end of the run: a run that ends above the line has blown up, however few steps it had."""
        if self.blown_up_at is None and self.steps_above > 0:
            self.blown_up_at = step
        return self.blown_up_at is not None

    def reason(self) -> str:
        """One line for a log or a failed trial: what was seen, against which threshold."""
        held = (f"for {BLOWUP_PATIENCE} steps" if self.steps_above >= BLOWUP_PATIENCE
                else "at the end of training")
        return (f"training loss blew up: its smoothed value {self.smoothed:.4g} stayed above {BLOWUP_FACTOR:g}x its "
                f"start ({self.threshold:.4g}) {held}")
