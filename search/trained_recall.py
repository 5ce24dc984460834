"""Recall of the model a search trains, measured on that model (issue 48), and its figure over seeds.

Why: the recall probe (``search.recall``) trains a finalist's mixers alone on MQAR, a model that is neither ranked,
costed nor recommended. A budget with ``recall_sequences`` (``search.lm.LMBudget``; the ladders' last rungs) has
every run at the candidate's chosen rate scored by :func:`composer.evaluation.context_recall.measure` once it has
trained: the model ``composer train`` exported to ``<run>/model``, at the run's context, on the run's held-out
text (its validation split, which no training seed changes), so every seed of every candidate is scored on the
same sequences.

The figure the search reads (:func:`seed_averaged`) is the copy gain of **random** spans at the longest distance
that fits the context, in nats per token: only a copy earlier in the context predicts random tokens, so it measures
retrieval alone (a text span is partly predictable from the text's statistics). The sequences are the same for
every seed, so each sequence's gain is averaged over the seeds first and the t interval is over the sequences: the
interval says how much the figure would move on other held-out sequences for these trained models, not what other
training seeds would recall (with one seed it cannot say that either way).
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from composer.statistics import format_interval, seed_summary

if TYPE_CHECKING:  # torch-free at import: the summary and `composer report` read this module
    from composer.evaluation.loading import HeldOutCache

KIND = "random"  # the spans the figure reads: only a copy predicts them
PER_SEED = "recall"  # details key: seed -> compact report
SUMMARY = "trained_recall"  # details and row key: the figure over seeds
SETTINGS = ("seq_len", "span", "lead", "distances", "ngram", "sequences", "seed")
AR_KEYS = ("ngram", "windows", "hit_share", "hit_advantage", "hit_advantage_ci", "repeat_gain", "repeat_gain_ci", "n")
AR_GAINS = ("hit_advantages", "repeat_gains")  # the AR slice's per-window contrasts (context_recall.ar_slice)
# A model that copies from its context pays near 0 nats on a random span's second copy. One whose every interval
# (each seed, each distance) leaves the second copy costing more than this share of the first's does not retrieve:
# its gains are the few hundredths of a nat that position and short context give (docs/reports/
# trained-recall-2026-11-28.md: 6.49 nats against 6.56 for Llama's layout at the CPU target).
RETRIEVAL_SHARE = 0.5


def measure_run(model_dir: str | Path, seq_len: int, sequences: int, cache: HeldOutCache,
                device: str | None = None) -> dict[str, Any]:
    """The compact recall report (:func:`compact`) of the model ``composer train`` exported to ``model_dir``, at
    ``seq_len`` on its run's validation split: ``composer eval --tasks recall``'s measurement
    (:func:`composer.evaluation.context_recall.measure_model_dir`, its checks included), with the split and
    tokenizer read once per search through ``cache``."""
    import torch

    from composer.evaluation.context_recall import TASK, measure_model_dir

    started = time.perf_counter()
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    report = measure_model_dir(model_dir, seq_len=seq_len, device=device, cache=cache, sequences=sequences,
                               per_sequence=True)[TASK]
    return compact(report, time.perf_counter() - started)


def compact(report: dict[str, Any], seconds: float) -> dict[str, Any]:
    """What a run's details keep of a ``context_recall.measure(..., per_sequence=True)`` report: its settings, every
    copy row without its per-sequence gains, the AR slice's contrasts, the per-sequence gains of random spans at
    the longest distance (``random_gains``), which :func:`seed_averaged` averages over seeds, and the AR slice's
    per-window contrasts (``ar_gains``; :func:`ar_averaged`)."""
    longest = max(report["distances"])
    rows = [{key: value for key, value in row.items() if key not in ("gains", "gain_sd")} for row in report["copy"]]
    chosen = next(row for row in report["copy"] if row["kind"] == KIND and row["distance"] == longest)
    return {"settings": {key: report[key] for key in SETTINGS}, "copy": rows,
            "ar_slice": {key: report["ar_slice"].get(key) for key in AR_KEYS},
            "random_gains": list(chosen["gains"]), "seconds": seconds,
            "ar_gains": {key: report["ar_slice"][key] for key in AR_GAINS if key in report["ar_slice"]}}


def _alike(per_seed: Mapping[str, dict[str, Any]], seeds: list[str]) -> bool:
    """Whether every seed was scored with the same settings (so on the same sequences)."""
    return all(per_seed[seed]["settings"] == per_seed[seeds[0]]["settings"] for seed in seeds)


def sequence_averaged(per_seed_values: list[list[float | None]]) -> dict[str, Any] | None:
    """Each sequence's value averaged over the seeds (a sequence missing at any seed left out), then the mean and
    its 95% t interval over the sequences; None when the seeds list different numbers of sequences."""
    if not per_seed_values or len({len(values) for values in per_seed_values}) != 1:
        return None
    by_sequence = [math.fsum(values) / len(values) for values in zip(*per_seed_values, strict=True)
                   if all(value is not None for value in values)]
    summary = seed_summary(by_sequence)
    return {"value": summary["mean"], "ci": summary["ci"], "sd": summary["std"], "sequences": summary["n"]}


def seed_averaged(per_seed: Mapping[str, dict[str, Any]]) -> dict[str, Any] | None:
    """The figure over the seeds' compact reports: the random copy gain at the longest distance, each sequence
    averaged over the seeds, with its 95% t interval over the sequences (module docstring). None when there is no
    report, or when the seeds were not scored alike (other settings: their sequences are not the same)."""
    seeds = sorted(per_seed, key=int)
    if not seeds or not _alike(per_seed, seeds):
        return None
    settings = per_seed[seeds[0]]["settings"]
    figure = sequence_averaged([per_seed[seed]["random_gains"] for seed in seeds])
    if figure is None:
        return None
    return {**figure, "kind": KIND,
            "distance": max(settings["distances"]), "seq_len": settings["seq_len"], "span": settings["span"],
            "seeds": [int(seed) for seed in seeds],
            "seconds": math.fsum(per_seed[seed].get("seconds") or 0.0 for seed in seeds),
            "unit": "nats per token: the first copy's loss minus the second's",
            "interval": "95% t over the sequences, each averaged over the seeds (the same sequences for every seed)"}


def ar_averaged(per_seed: Mapping[str, dict[str, Any]], key: str) -> dict[str, Any] | None:
    """The AR slice's ``key`` contrast (``hit_advantages``: the rest's loss minus the hits'; ``repeat_gains``: a
    hit's first occurrence's loss minus the hit's) over the seeds' compact reports, each window averaged over the
    seeds and the interval over windows, as :func:`seed_averaged`; None for reports without per-window values
    (measured before they were kept) or seeds not scored alike."""
    seeds = sorted(per_seed, key=int)
    if not seeds or not _alike(per_seed, seeds) or any(key not in per_seed[seed].get("ar_gains", {})
                                                      for seed in seeds):
        return None
    figure = sequence_averaged([per_seed[seed]["ar_gains"][key] for seed in seeds])
    return None if figure is None else {**figure, "seeds": [int(seed) for seed in seeds]}


def retrieval(per_seed: Mapping[str, dict[str, Any]]) -> dict[str, Any] | None:
    """Whether the trained models retrieve, read off their random copy gains at every distance and seed against the
    first copy's loss (``RETRIEVAL_SHARE``): ``"yes"`` where some interval's low end saves at least that share of
    the first copy's loss, ``"no"`` where every interval's high end saves less, else ``"unclear"``; with the
    share of the first copy's loss the second still costs at the longest distance, averaged over the seeds
    (``second_copy_share``: near 1 without retrieval, near 0 for a copying model). None without reports."""
    rows = [row for report in per_seed.values() for row in report["copy"]
            if row["kind"] == KIND and row.get("gain_ci") and row["first_loss"] > 0]
    if not rows:
        return None
    saved_low = max(row["gain_ci"][0] / row["first_loss"] for row in rows)
    saved_high = max(row["gain_ci"][1] / row["first_loss"] for row in rows)
    longest = [row for row in rows if row["distance"] == max(r["distance"] for r in rows)]
    verdict = "yes" if saved_low >= RETRIEVAL_SHARE else "no" if saved_high < RETRIEVAL_SHARE else "unclear"
    return {"retrieves": verdict, "saved_share_low": saved_low, "saved_share_high": saved_high,
            "second_copy_share": math.fsum(row["second_loss"] / row["first_loss"] for row in longest) / len(longest),
            "threshold": RETRIEVAL_SHARE}


def combined(ours: Mapping[str, dict[str, Any]] | None, theirs: Mapping[str, dict[str, Any]] | None
             ) -> tuple[dict[str, dict[str, Any]], dict[str, Any] | None] | None:
    """A record's per-seed reports with another's further seeds (a confirmation's) and their figure, or None when
    either has none or the two were not scored alike (the figure stays the first's)."""
    if not ours or not theirs:
        return None
    merged = {**theirs, **ours}
    figure = seed_averaged(merged)
    return (merged, figure) if figure is not None else None


def describe(figure: dict[str, Any] | None) -> str:
    """``recall (random copy gain at 96 tokens) +0.41 [+0.30, +0.52]``: a summary line's clause."""
    if not figure or figure.get("value") is None:
        return "recall not measured"
    return (f"recall (random copy gain at {figure['distance']} tokens) {figure['value']:+.2f} "
            f"{format_interval(figure['ci'], 2)}")


__all__ = ["AR_GAINS", "KIND", "PER_SEED", "RETRIEVAL_SHARE", "SUMMARY", "ar_averaged", "combined", "compact",
           "describe", "measure_run", "retrieval", "seed_averaged", "sequence_averaged"]
