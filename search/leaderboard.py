"""Leaderboard of a study: one row per scored pattern, best first; written as JSON and CSV next to best.json."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import optuna
from optuna.trial import TrialState

from composer.files import atomic_write_csv, atomic_write_json
from composer.pattern import attention_share, compact_pattern
from search.engine import is_substitute
from search.growth import GROWN, LEGACY_ATTRIBUTES


def scored_model(row: dict[str, Any]) -> dict[str, Any]:
    """The model a leaderboard row's score was trained on: its ``pattern``, the preset it trained at (``widths``),
    its ``params`` (every parameter, embedding and head included), ``non_embedding_params`` and
    ``attention_share``, and ``grown`` (``search.growth.grown_line``: what growing the searched pattern to it
    dropped, or None). On a rung at the target that is the searched pattern grown to the target's size (the
    evaluation's ``details["grown"]``, ``search.growth.Grown``): ``AAMMMM`` scored at ``tiny`` as ``AAMMM``, 172,416
    non-embedding parameters where the pattern at the search's widths has 221,632 (the row's
    ``non_embedding_params``). An evaluator that does not say where it trained (no ``details["widths"]``): the
    searched pattern at the search's preset, ``widths`` None. Also reads a row written before these keys
    (``composer report`` of an older search)."""
    from composer.accounting import non_embedding_params, total_params
    from composer.presets import get_preset
    from search.growth import Grown, grown_line

    details = row.get("details") or {}
    widths = details.get("widths")
    if not widths:
        return {"pattern": row["pattern"], "widths": None, "params": row.get("params"),
                "non_embedding_params": row.get("non_embedding_params"),
                "attention_share": attention_share(row["pattern"]), "grown": None}
    grown = Grown.stored_in(details, widths)
    if grown is None:  # trained at the search's widths: the pattern itself
        arch = get_preset(widths).arch.with_pattern(row["pattern"])
        return {"pattern": row["pattern"], "widths": widths, "params": total_params(arch),
                "non_embedding_params": non_embedding_params(arch),
                "attention_share": attention_share(row["pattern"]), "grown": None}
    return {"pattern": grown.layout, "widths": grown.widths, "params": grown.params,
            "non_embedding_params": grown.non_embedding_params, "attention_share": attention_share(grown.layout),
            "grown": grown_line(row["pattern"], grown.layout, grown.widths)}


def leaderboard(study: optuna.Study, maximize: bool, known: dict[str, str] | None = None,
                only: set[str] | None = None) -> list[dict[str, Any]]:
    """Completed, trained trials (cached repeats folded into their original), sorted by score; with ``only``,
    just those patterns (a rung ranks its promotions, not what an earlier run of it trained).

    ``known`` maps a known layout's pattern to its name (``search.known``); a row's ``known`` is that name (also
    when the sampler proposed the layout itself) or None for a new pattern. ``lr`` is the learning rate the
    evaluator chose for the pattern (None for evaluators without one)."""
    known = known or {}
    pareto = set()
    if len(study.directions) > 1:
        pareto = {t.number for t in study.best_trials}
    rows = []
    for trial in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
        attrs = trial.user_attrs
        if "pattern" not in attrs or is_substitute(attrs) or (only is not None and attrs["pattern"] not in only):
            continue
        pattern = attrs["pattern"]
        row = {
            "pattern": pattern,
            "compact": compact_pattern(pattern),
            "score": trial.values[0],
            "params": attrs.get("params"),
            "non_embedding_params": attrs.get("non_embedding_params"),
            "attention_share": attention_share(pattern),
            "kv_cache_bytes_per_token": attrs.get("kv_cache_bytes_per_token"),
            # its model at the target (search.growth.Grown's record; a trial of an older study: its old names)
            **{key: attrs[key] for key in (GROWN, *LEGACY_ATTRIBUTES[0]) if attrs.get(key)},
            "cost": attrs.get("cost"),
            "known": known.get(pattern) or attrs.get("known"),
            "lr": attrs.get("lr"),
            "trial": trial.number,
            "seconds": attrs.get("seconds"),
            "details": attrs.get("details", {}),
        }
        row["scored_model"] = scored_model(row)  # the model the score is of: at the target, its grown layout
        if attrs.get("limit_cost"):  # its figures under --max-latency / --min-throughput (search.cost.limits)
            row["limit_cost"] = attrs["limit_cost"]
        if len(trial.values) > 1:
            row["objectives"] = list(trial.values)
            row["pareto"] = trial.number in pareto
        if "tokens_per_s" in attrs:
            row["tokens_per_s"] = attrs["tokens_per_s"]
        if (attrs.get("details") or {}).get("trained_recall"):  # the trained model's recall (search.trained_recall)
            row["trained_recall"] = attrs["details"]["trained_recall"]
        rows.append(row)
    rows.sort(key=lambda r: (-r["score"] if maximize else r["score"], r["trial"]))
    for rank, row in enumerate(rows, start=1):
        row["rank"] = rank
    return [{"rank": row.pop("rank"), **row} for row in rows]


def _pruned_reason(pruned_at: Any) -> str | None:
    if not isinstance(pruned_at, dict):
        return None
    value = pruned_at.get("value")
    score = f" with {value:.4f}" if isinstance(value, (int, float)) else ""
    return f"pruned after task {pruned_at.get('step')}{score}: below the median of earlier trials"


def failures(study: optuna.Study) -> list[dict[str, Any]]:
    """Failed and skipped trials with their reasons (nothing is silently dropped)."""
    out = []
    for trial in study.get_trials(deepcopy=False):
        attrs = trial.user_attrs
        stopped = any(key in attrs for key in ("pruned_at", "skip_reason", "fail_reason"))
        if trial.state not in (TrialState.FAIL, TrialState.PRUNED) and not stopped:
            continue
        reason = attrs.get("fail_reason") or attrs.get("skip_reason") or _pruned_reason(attrs.get("pruned_at")) or (
            "pruned: below the median of earlier trials" if trial.state == TrialState.PRUNED
            else f"{trial.state.name.lower()} without a recorded reason (its worker stopped)"
        )
        state = ("failed" if "fail_reason" in attrs else "pruned" if "pruned_at" in attrs
                 else "skipped" if "skip_reason" in attrs else trial.state.name.lower())
        out.append({"trial": trial.number, "pattern": attrs.get("pattern"), "state": state, "reason": reason})
    return out


def write_leaderboard(rows: list[dict[str, Any]], out: Path, extra: dict[str, Any]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_json(out / "leaderboard.json", rows)
    columns = ["rank", "pattern", "compact", "score", "known", "lr", "params", "non_embedding_params",
               "scored_pattern", "scored_widths", "scored_non_embedding_params",
               "attention_share", "kv_cache_bytes_per_token", "cache_bytes_4096", "cache_bytes_32768", "trial",
               "seconds", "trained_recall_gain"]
    # the serving cost at 4K and 32K tokens as columns of their own; the model the score was trained on beside the
    # searched pattern's size (scored_model)
    flat = [{**row, **{f"cache_bytes_{n}": size for n, size in (row.get("cost") or {}).get("cache_bytes", {}).items()},
             **{f"scored_{key}": (row.get("scored_model") or {}).get(key)
                for key in ("pattern", "widths", "non_embedding_params")},
             "trained_recall_gain": (row.get("trained_recall") or {}).get("value")} for row in rows]
    atomic_write_csv(out / "leaderboard.csv", flat, columns)
    best = {**rows[0], **extra} if rows else {"pattern": None, **extra}
    atomic_write_json(out / "best.json", best)
