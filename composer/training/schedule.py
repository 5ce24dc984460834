"""Learning-rate schedules as multipliers of the peak LR (for ``torch.optim.lr_scheduler.LambdaLR``).

* ``cosine``: linear warmup, then cosine decay to ``min_lr_ratio * peak`` at the last step.
* ``wsd`` (warmup-stable-decay; Hu et al. 2024, MiniCPM): linear warmup, constant peak, then a decay over the
  last ``decay_fraction`` of training (linear to ``min_lr_ratio``; "1-sqrt" is also offered). The paper's
  sibling large-scale setup uses it; its checkpoints before the decay are reusable for longer runs.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

SCHEDULES = ("cosine", "wsd", "constant")


@dataclass(frozen=True)
class ScheduleConfig:
    name: str = "cosine"
    warmup_steps: int = 0
    total_steps: int = 1
    min_lr_ratio: float = 0.1
    decay_fraction: float = 0.2
    decay_shape: str = "linear"  # wsd only: "linear" or "1-sqrt"

    def __post_init__(self) -> None:
        if self.name not in SCHEDULES:
            raise ValueError(f"unknown schedule {self.name!r}; choose one of {SCHEDULES}")
        if not 0 <= self.min_lr_ratio <= 1 or not 0 < self.decay_fraction <= 1:
            raise ValueError("min_lr_ratio must be in [0, 1] and decay_fraction in (0, 1]")
        if self.decay_shape not in ("linear", "1-sqrt"):
            raise ValueError(f"unknown decay shape {self.decay_shape!r}; choose 'linear' or '1-sqrt'")


def decay_start(config: ScheduleConfig) -> int:
    """The first step of ``wsd``'s decay: the steps before it run at the peak rate after warmup, whatever the
    total, so a checkpoint taken there can continue into any longer ``wsd`` run (``composer.training.continuation``)."""
    total = max(1, config.total_steps)
    warmup = min(config.warmup_steps, total)
    return max(warmup, total - max(1, round(config.decay_fraction * total)))


def lr_multiplier(config: ScheduleConfig) -> Callable[[int], float]:
    """``step -> multiplier``; ``step`` counts optimizer steps from 0."""
    total = max(1, config.total_steps)
    warmup = min(config.warmup_steps, total)
    floor = config.min_lr_ratio

    def multiplier(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        if config.name == "constant":
            return 1.0
        if config.name == "cosine":
            progress = min(1.0, (step - warmup) / max(1, total - warmup - 1))
            return floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress))
        start = decay_start(config)
        if step < start:
            return 1.0
        progress = min(1.0, (step - start + 1) / max(1, total - start))
        remaining = 1 - progress if config.decay_shape == "linear" else 1 - math.sqrt(progress)
        return floor + (1 - floor) * remaining

    return multiplier
