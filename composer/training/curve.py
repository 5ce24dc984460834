"""A learning curve: validation loss at chosen optimizer steps, on a fixed slice of the held-out text.

Why not Lightning's periodic validation: a curve that a search extrapolates (``search.curves``) wants points spaced
in log-tokens (dense early, where the loss falls fast, sparse late), and a cheaper slice than the final score's.
Lightning validates at one fixed interval. The slice is the first ``batches`` micro-batches of the validation
loader, the same text for every run and every seed (the held-out split never depends on the training seed), so two
candidates' points at the same step are paired.

The points are part of the callback's state, saved in every checkpoint: a run continued from a checkpoint (a
resumed run, or the next rung of a search continuing a candidate) keeps the points it made before.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import lightning as L
import torch


def log_spaced_steps(last: int, count: int, first: int = 1) -> tuple[int, ...]:
    """About ``count`` distinct optimizer steps from ``first`` to ``last``, evenly spaced in log-steps (``last``
    always among them). Fewer when the range holds fewer steps."""
    first, last = max(1, first), max(1, last)
    if count < 1 or first > last:
        return ()
    if count == 1 or first == last:
        return (last,)
    ratio = math.log(last / first) / (count - 1)
    return tuple(sorted({round(first * math.exp(ratio * i)) for i in range(count)} | {last}))


class ValidationCurve(L.Callback):
    """Validation loss after each optimizer step in ``steps``, over the first ``batches`` validation micro-batches.

    ``points``: ``[{"step", "tokens", "loss"}]`` in step order (``tokens`` = step x ``tokens_per_step``)."""

    def __init__(self, steps: Iterable[int], batches: int, tokens_per_step: int) -> None:
        self.steps = frozenset(int(step) for step in steps)
        self.batches = max(1, int(batches))
        self.tokens_per_step = tokens_per_step
        self.points: list[dict[str, Any]] = []

    def on_train_batch_end(self, trainer: L.Trainer, module: L.LightningModule, outputs, batch, batch_idx) -> None:
        step = trainer.global_step  # optimizer steps done; the micro-batches after one see the same number
        if step not in self.steps or any(point["step"] == step for point in self.points):
            return
        loss = self.measure(trainer, module)
        self.points.append({"step": step, "tokens": step * self.tokens_per_step, "loss": loss})

    @torch.no_grad()
    def measure(self, trainer: L.Trainer, module: L.LightningModule) -> float | None:
        """The mean per-token loss over the slice, reduced over ranks (every rank takes part: FSDP gathers)."""
        was_training = module.training
        module.eval()
        total = torch.zeros((), device=module.device, dtype=torch.float64)
        count = torch.zeros((), device=module.device, dtype=torch.float64)
        try:
            loader = trainer.datamodule.val_dataloader()
            for _, batch in zip(range(self.batches), loader):
                batch = batch.to(module.device)
                targets = batch[:, 1:]
                with trainer.precision_plugin.forward_context():
                    _, loss = module._validation_logits(batch[:, :-1], targets)
                total += loss.detach().double() * targets.numel()
                count += targets.numel()
        finally:
            module.train(was_training)
        total = trainer.strategy.reduce(total, reduce_op="sum")
        count = trainer.strategy.reduce(count, reduce_op="sum")
        loss = float(total / count) if float(count) else None
        return loss if loss is not None and math.isfinite(loss) else None

    def state_dict(self) -> dict[str, Any]:
        return {"points": list(self.points)}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.points = [dict(point) for point in state_dict.get("points", [])]
