"""Zoology's MQAR protocol: one model trained on a mixture of sequence lengths, then tested at each length.

Why not one training per length (``search.mad.evaluate_pattern`` per task, the ``smoke`` budget's protocol):
MQAR is learnt late, after a plateau where the model only knows the answer is one of the context's values. Within
a CPU budget two attention layers leave that plateau at 64 tokens but not at 256 or 1,024 (docs/recall.md), so a
long length's accuracy would say how fast a mixer learns there, not how much it can recall. Zoology trains one
model on the data of every length and tests each (``train_configs`` / ``test_configs``): what is learnt at short
lengths carries to long ones, and what stays different at long lengths is the state each mixer keeps.

Steps cycle through the lengths (64, 256, 1,024, 64, ...), each length's batch holding ``tokens_per_step //
length`` sequences, so every length gets the same steps and queries. Each length's data depends only on the seed
and the length (``seed * 1000 + index``), never on the pattern. The optimiser, schedule, precision and accuracy
are MAD's (``search.mad.evaluate``).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import torch

from search.mad.evaluate import (
    CandidateFailed,
    _accuracy,
    _autocast,
    _batches,
    _lr_lambda,
    _NonFinite,
    _resolve_widths,
)
from search.mad.models import build_task_model, round_up
from search.mad.tasks import make_dataset


@dataclass(frozen=True)
class MixtureResult:
    accuracy_by_length: dict[str, float]
    train_loss: float  # mean over the last tenth of the steps, all lengths
    steps: int
    seconds: float


def train_on_mixture(pattern: str, spec, *, widths: str = "search-1m", seed: int = 0, precision: str = "fp32",
                     device: torch.device | str | None = None, compile: bool = False) -> MixtureResult:
    """Train ``pattern`` once on every length of ``spec`` (a ``search.recall.RecallBudget``) and test each.

    A non-finite loss, gradient norm or test logit raises :class:`CandidateFailed` (a search records the trial as
    failed with that reason and goes on).
    """
    started = time.perf_counter()
    device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    lengths = spec.lengths
    tasks = [spec.task(n) for n in lengths]
    datasets = [make_dataset(task, seed * 1_000 + i) for i, task in enumerate(tasks)]
    steps_per_length = [spec.mad_budget(n).steps_for(task) for n, task in zip(lengths, tasks, strict=True)]
    total = sum(steps_per_length)
    arch = _resolve_widths(widths).with_pattern(pattern).replace(
        vocab_size=round_up(spec.vocab_size, 8), max_seq_len=max(lengths))
    cuda = [device.index if device.index is not None else torch.cuda.current_device()] if device.type == "cuda" else []
    with torch.random.fork_rng(devices=cuda):  # leave the caller's global RNG alone
        torch.manual_seed(seed)
        model = build_task_model(arch, "lm", device)
    if compile:
        from composer.training.parallelize import apply_compile

        apply_compile(model)
    optimizer = torch.optim.AdamW(model.parameter_groups(0.0), lr=spec.lr)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, _lr_lambda(total, 0.1, 0.01))
    generator = torch.Generator().manual_seed(seed + 1)
    streams = [_batches(len(data.train_inputs), spec.batch_size(n), steps, generator)
               for data, n, steps in zip(datasets, lengths, steps_per_length, strict=True)]
    order = _round_robin(steps_per_length)
    autocast = _autocast(precision, device)
    late: list[float] = []
    model.train()
    try:
        for step, which in enumerate(order):
            data = datasets[which]
            idx = next(streams[which])
            with autocast():
                loss = model(data.train_inputs[idx].to(device), targets=data.train_targets[idx].to(device)).loss
            value = loss.item()
            if not math.isfinite(value):
                raise _NonFinite(f"training loss is {value} at step {step} (length {lengths[which]})", step)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            if not torch.isfinite(norm):
                raise _NonFinite(f"gradient norm is {norm.item()} at step {step} (length {lengths[which]})", step)
            optimizer.step()
            schedule.step()
            if step >= total - max(1, total // 10):
                late.append(value)
        accuracy = {str(n): _accuracy(model, data, max(1, 4 * spec.batch_size(n)), device, autocast)
                    for n, data in zip(lengths, datasets, strict=True)}
    except _NonFinite as err:
        raise CandidateFailed(f"{pattern}: recall mixture: {err.reason}", task="recall", step=err.step) from None
    return MixtureResult(accuracy, sum(late) / len(late), total, time.perf_counter() - started)


def _round_robin(steps_per_length: list[int]) -> list[int]:
    """Length indices in turn (0, 1, 2, 0, 1, 2, ...), each appearing its own number of times."""
    order, left = [], list(steps_per_length)
    while any(left):
        for i, n in enumerate(left):
            if n:
                order.append(i)
                left[i] -= 1
    return order


__all__ = ["MixtureResult", "train_on_mixture"]
