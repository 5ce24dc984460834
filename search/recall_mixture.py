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

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from composer.statistics import cluster_spread
from search.mad.evaluate import (
    CandidateFailed,
    NonFinite,
    autocast_for,
    batch_indices,
    fit,
    held_out_predictions,
    resolve_widths,
    seeded_task_model,
)
from search.mad.models import round_up
from search.mad.tasks import IGNORE_INDEX, make_dataset


@dataclass(frozen=True)
class MixtureResult:
    accuracy_by_length: dict[str, float]
    train_loss: float  # mean over the last tenth of the steps, all lengths
    steps: int
    seconds: float
    # per length: the test sequences the queries came in, and the sd of their accuracies (``sequence_accuracy``)
    test_sequences: dict[str, int] = field(default_factory=dict)
    sequence_accuracy_sd: dict[str, float | None] = field(default_factory=dict)


def sequence_accuracy(predictions: torch.Tensor, targets: torch.Tensor) -> dict[str, Any]:
    """Exact accuracy over the scored positions (``search.mad.evaluate.plain_accuracy``'s), and how it varies
    between the test sequences: ``{"accuracy", "queries", "sequences", "sequence_sd"}``.

    Why per sequence: the queries of one MQAR sequence share its keys and the model's state along it, so they are
    not independent trials; an interval over the test sample is over its sequences
    (``composer.statistics.clustered_proportion_interval``), which needs their number and the spread of their
    accuracies (``composer.statistics.cluster_spread``; ``sequence_sd`` None for one sequence). Sequences with no
    scored position are left out."""
    mask = targets != IGNORE_INDEX
    trials = mask.sum(dim=1)
    successes = ((predictions == targets) & mask).sum(dim=1)
    scored = trials > 0
    spread = cluster_spread(successes[scored].tolist(), trials[scored].tolist())
    queries = int(trials.sum())
    return {"accuracy": spread["proportion"] if queries else 0.0, "queries": queries,
            "sequences": spread["clusters"], "sequence_sd": spread["cluster_sd"]}


def train_on_mixture(pattern: str, spec, *, lr: float | None = None, widths: str = "search-1m", seed: int = 0,
                     precision: str = "fp32", device: torch.device | str | None = None,
                     compile: bool = False, on_progress: Callable[[int, int], None] | None = None) -> MixtureResult:
    """Train ``pattern`` once on every length of ``spec`` (a ``search.recall.RecallBudget``) and test each, at
    learning rate ``lr`` (default: the budget's first; ``RecallEvaluator`` runs a budget's rates in turn).
    ``on_progress(tokens trained, tokens in all)`` after every step: a search's progress lines (the probe of 8
    finalists ran 80 minutes without one).

    A non-finite loss, gradient norm or test logit raises :class:`CandidateFailed` (a search records the trial as
    failed with that reason and goes on).
    """
    started = time.perf_counter()
    lr = spec.lrs[0] if lr is None else lr
    device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    lengths = spec.lengths
    tasks = [spec.task(n) for n in lengths]
    datasets = [make_dataset(task, seed * 1_000 + i) for i, task in enumerate(tasks)]
    steps_per_length = [spec.mad_budget(n).steps_for(task) for n, task in zip(lengths, tasks, strict=True)]
    total = sum(steps_per_length)
    base = resolve_widths(widths)
    options = {symbol: {**base.options_for(symbol), **extra} for symbol, extra in spec.primitive_options.items()}
    arch = base.with_pattern(pattern).replace(vocab_size=round_up(spec.vocab_size, 8), max_seq_len=max(lengths),
                                              options={**base.options, **options})
    model = seeded_task_model(arch, "lm-shift" if spec.shift_stem else "lm", seed, device, compile)
    generator = torch.Generator().manual_seed(seed + 1)
    streams = [batch_indices(len(data.train_inputs), spec.batch_size(n), steps, generator)
               for data, n, steps in zip(datasets, lengths, steps_per_length, strict=True)]

    order = _round_robin(steps_per_length)
    tokens_of = [spec.batch_size(n) * n for n in lengths]
    total_tokens = sum(tokens_of[which] for which in order)

    def batches():
        trained = 0
        for which in order:
            data, idx = datasets[which], next(streams[which])
            yield (data.train_inputs[idx].to(device), data.train_targets[idx].to(device),
                   f" (length {lengths[which]})")
            trained += tokens_of[which]  # the step on that batch has run when the next one is asked for
            if on_progress is not None:
                on_progress(trained, total_tokens)

    autocast = autocast_for(precision, device)
    try:
        late_loss = fit(model, batches(), total, lr=lr, weight_decay=0.0, warmup_fraction=0.1,
                        min_lr_ratio=0.01, grad_clip=1.0, autocast=autocast, rate_scales=dict(spec.rate_scales))
        tested = {str(n): sequence_accuracy(*held_out_predictions(model, data, max(1, 4 * spec.batch_size(n)),
                                                                  device, autocast))
                  for n, data in zip(lengths, datasets, strict=True)}
    except NonFinite as err:
        raise CandidateFailed(f"{pattern}: recall mixture at lr {lr:g}: {err.reason}", task="recall",
                              step=err.step) from None
    return MixtureResult({n: t["accuracy"] for n, t in tested.items()}, late_loss, total,
                         time.perf_counter() - started, {n: t["sequences"] for n, t in tested.items()},
                         {n: t["sequence_sd"] for n, t in tested.items()})


def _round_robin(steps_per_length: list[int]) -> list[int]:
    """Length indices in turn (0, 1, 2, 0, 1, 2, ...), each appearing its own number of times."""
    order, left = [], list(steps_per_length)
    while any(left):
        for i, n in enumerate(left):
            if n:
                order.append(i)
                left[i] -= 1
    return order


__all__ = ["MixtureResult", "sequence_accuracy", "train_on_mixture"]
