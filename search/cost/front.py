"""Where the answer stands against the best known layout on loss *and* cost, and the plot of loss against cost.

Why: a layout that wins on loss at equal parameters may pay for it in decode latency and training throughput
(the constrained ``AMSD`` answer: 34 thin layers, 2.3x Nemotron-H's decode latency at batch 1 on the CPU). The
field ranks on the loss-cost front (Nemotron-Flash, arXiv 2511.18890; Jet-Nemotron, arXiv 2508.15884). So the
answer line says which it is: the new layout **dominates** the best known layout (a paired loss interval below 0 at
no more decode latency, no less training throughput and no more cache at 32K), or it **wins on loss only**, with
what it costs more.

Measured figures (``row["cost"]["measured"]``, ``search.cost.measured``) are compared on their medians over the
repeats: two figures whose medians are within :data:`EVEN_WITHIN` of each other are *even*, else one is more; the
line says the ratio. Not by overlapping ranges: the equal-cost search's figures spread 26-34% over their repeats
on busy cores, so any two ranges overlapped and a 20% slower decode read "even". Cache is analytic and compared
exactly.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

CACHE_AT = "32768"
EVEN_WITHIN = 0.05  # two measured costs whose medians differ by at most this fraction are even


def decode_figure(measured: dict[str, Any]) -> dict[str, Any] | None:
    """Batch 1's decode figure after the longest context measured (ms per token)."""
    by_context = (measured.get("decode_ms_per_token") or {}).get("1") or {}
    if not by_context:
        return None
    return by_context[max(by_context, key=int)]


def side(mine: dict[str, Any] | None, theirs: dict[str, Any] | None, lower_is_better: bool) -> str | None:
    """``better``, ``even`` (their medians within :data:`EVEN_WITHIN` of each other) or ``worse``; None where one
    is missing."""
    if not mine or not theirs:
        return None
    if abs(mine["median"] / theirs["median"] - 1) <= EVEN_WITHIN:
        return "even"
    less = mine["median"] < theirs["median"]
    return "better" if less == lower_is_better else "worse"


def cost_standing(rows: list[dict[str, Any]], comparison: dict[str, Any]) -> dict[str, Any] | None:
    """The best new layout against the best known one (``comparison``: ``search.verdict.compare_with_known``'s) on
    loss, decode latency, training throughput and cache; None where either is missing or was not measured."""
    new, known = comparison.get("best_new"), comparison.get("best_known")
    if not new or not known:
        return None
    by_pattern = {row["pattern"]: row for row in rows}
    mine, theirs = by_pattern.get(new["pattern"]), by_pattern.get(known["pattern"])
    if mine is None or theirs is None:
        return None
    measured_mine = (mine.get("cost") or {}).get("measured")
    measured_theirs = (theirs.get("cost") or {}).get("measured")
    if not measured_mine or not measured_theirs or "error" in measured_mine or "error" in measured_theirs:
        return None
    ci = comparison.get("ci")
    loss = "better" if ci and ci[1] < 0 else "worse" if ci and ci[0] > 0 else "even" if ci else None
    decode = (decode_figure(measured_mine), decode_figure(measured_theirs))
    train = (measured_mine["train_tokens_per_s"], measured_theirs["train_tokens_per_s"])
    cache = (
        (mine.get("cost") or {}).get("cache_bytes", {}).get(CACHE_AT),
        (theirs.get("cost") or {}).get("cache_bytes", {}).get(CACHE_AT),
    )
    sides = {
        "loss": loss,
        "decode_latency": side(*decode, lower_is_better=True),
        "train_throughput": side(*train, lower_is_better=False),
        "cache_at_32k": None
        if None in cache
        else ("better" if cache[0] < cache[1] else "even" if cache[0] == cache[1] else "worse"),
    }
    ratios = {
        "decode_latency": decode[0]["median"] / decode[1]["median"] if all(decode) else None,
        "train_throughput": train[0]["median"] / train[1]["median"],
        "cache_at_32k": cache[0] / cache[1] if None not in cache and cache[1] else None,
    }
    costs = [sides[name] for name in ("decode_latency", "train_throughput", "cache_at_32k")]
    if loss == "better" and None not in costs and "worse" not in costs:
        relation = "dominates"
    elif loss == "better":
        relation = "wins on loss only"
    else:
        relation = "does not win on loss"
    limited = (mine.get("limit_cost"), theirs.get("limit_cost"))  # the limits' own figures (modeled or measured)
    if all(limited):
        ratios["limits"] = {"decode_latency": limited[0]["decode_ms"] / limited[1]["decode_ms"],
                            "train_throughput": limited[0]["train_tokens_per_s"] / limited[1]["train_tokens_per_s"],
                            "source": limited[0]["source"]}
    return {
        "new": new["pattern"],
        "known": known.get("name"),
        "known_pattern": known["pattern"],
        "relation": relation,
        "sides": sides,
        "ratios": ratios,
        "loss_ci": ci,
        "even_within": EVEN_WITHIN,
        "measured_on": f"{measured_mine.get('device_name') or measured_mine['device']}, "
        f"{measured_mine['threads']} thread(s)",
        "line": standing_line(new["pattern"], known.get("name") or known["pattern"], relation, ratios, ci),
    }


def standing_line(new: str, known: str, relation: str, ratios: dict[str, float | None], ci) -> str:
    """One line: how the answer stands against the best known layout at equal cost."""
    costs = ", ".join(
        f"{ratios[name]:.2f}x its {what}"
        for name, what in (
            ("decode_latency", "decode latency at batch 1"),
            ("train_throughput", "training tokens/s"),
            ("cache_at_32k", "cache at 32K"),
        )
        if ratios.get(name) is not None
    )
    interval = f"loss {ci[0]:+.4f} to {ci[1]:+.4f}" if ci else "no loss interval"
    even = f"; a cost is even where the medians are within {EVEN_WITHIN:.0%}"
    if relation == "dominates":
        return f"{new} dominates {known} at equal cost: {interval}, at {costs}{even}"
    if relation == "wins on loss only":
        return f"{new} beats {known} on loss only ({interval}), not at equal cost: {costs}{even}"
    return f"{new} does not beat {known} on loss ({interval}); it runs at {costs}{even}"


def mean_loss(row: dict[str, Any]) -> tuple[float, int]:
    """A row's loss as the verdict weighs it: the mean over its record's seeds (a confirmed finalist's 3, not its
    first seed's score, which chose it and reads low by chance), and how many seeds that is."""
    from search.evidence_record import of

    record = of(row) if row.get("evidence") else None
    return (record.mean, len(record.scores)) if record and record.scores else (row["score"], 1)


def plot_loss_against_cost(rows: list[dict[str, Any]], path: Path, answer: str | None = None) -> Path | None:
    """Loss (each row's mean over its seeds, the count named where it is more than one) against decode latency
    (batch 1) and against training tokens/s, one point per measured row: the known layouts named, the new ones by
    pattern, the answer ringed. None where nothing was measured."""
    points = []
    for row in rows:
        measured = (row.get("cost") or {}).get("measured")
        if not measured or "error" in measured or decode_figure(measured) is None:
            continue
        points.append((row, decode_figure(measured)["median"], measured["train_tokens_per_s"]["median"]))
    if not points:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    for axis, index, label in (
        (axes[0], 1, "decode ms per token, batch 1 (lower is better)"),
        (axes[1], 2, "training tokens/s (higher is better)"),
    ):
        for row, *values in points:
            x = values[index - 1]
            known = row.get("known")
            loss, seeds = mean_loss(row)
            axis.scatter(
                x,
                loss,
                marker="s" if known else "o",
                color="tab:orange" if known else "tab:blue",
                s=60 if row["pattern"] == answer else 30,
                edgecolors="black" if row["pattern"] == answer else "none",
                zorder=3,
            )
            axis.annotate(
                (known or row["pattern"]) + (f" ({seeds} seeds)" if seeds > 1 else ""),
                (x, loss),
                textcoords="offset points",
                xytext=(4, -9) if known else (4, 3),  # known layouts' names below: a new one beside stays legible
                fontsize=7,
            )
        axis.set_xlabel(label)
        axis.grid(alpha=0.3)
    axes[0].set_ylabel("loss at the target, mean over its seeds (lower is better)")
    figure.suptitle(
        "loss against cost at the target (squares: known layouts; ringed: the answer)", fontsize=10
    )
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path


__all__ = ["EVEN_WITHIN", "cost_standing", "decode_figure", "mean_loss", "plot_loss_against_cost", "side",
           "standing_line"]
