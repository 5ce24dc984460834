"""PNG plots of a search: optimisation history, score against attention share, per-layer primitive frequency
among the top trials, and the Pareto front of multi-objective runs (Optuna's own matplotlib plots where they exist).
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import optuna  # noqa: E402

from composer.pattern import layers, n_layers, parse_pattern  # noqa: E402


def _save(figure, path: Path) -> Path:
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path


def plot_all(study: optuna.Study, rows: list[dict[str, Any]], out: Path, primitives: str, top_k: int = 10) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    written = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Optuna marks its matplotlib plots experimental
        if len(study.directions) == 1 and rows:
            ax = optuna.visualization.matplotlib.plot_optimization_history(study)
            written.append(_save(ax.figure, out / "optimization_history.png"))
        if len(study.directions) > 1 and rows:
            names = ["score", *[f"objective {i}" for i in range(1, len(study.directions))]]
            ax = optuna.visualization.matplotlib.plot_pareto_front(study, target_names=names)
            written.append(_save(ax.figure, out / "pareto_front.png"))
    if rows:
        written.append(_score_vs_attention(rows, out / "score_vs_attention_share.png"))
        written.append(_layer_frequency(rows[:top_k], primitives, out / "layer_frequency_top.png"))
    return written


def _score_vs_attention(rows: list[dict[str, Any]], path: Path) -> Path:
    figure, ax = plt.subplots(figsize=(6, 4))
    ax.scatter([r["attention_share"] for r in rows], [r["score"] for r in rows], alpha=0.7)
    best = rows[0]
    ax.annotate(best["compact"], (best["attention_share"], best["score"]), textcoords="offset points",
                xytext=(5, 5), fontsize=8)
    ax.set_xlabel("attention share of layers")
    ax.set_ylabel("score")
    ax.set_title("Score against attention share")
    return _save(figure, path)


def _layer_frequency(rows: list[dict[str, Any]], primitives: str, path: Path) -> Path:
    """Heat map: how often each primitive sits at each layer among the top patterns."""
    primitives = layers(parse_pattern(primitives))  # layer tokens: "AM[AS]" -> A, M, [AS]
    depth = max(n_layers(r["pattern"]) for r in rows)
    counts = [[0.0] * depth for _ in primitives]
    for row in rows:
        for layer, symbol in enumerate(layers(row["pattern"])):
            if symbol in primitives:
                counts[primitives.index(symbol)][layer] += 1 / len(rows)
    figure, ax = plt.subplots(figsize=(max(4, depth * 0.45), 0.6 * len(primitives) + 1.5))
    image = ax.imshow(counts, vmin=0, vmax=1, cmap="viridis", aspect="auto")
    ax.set_yticks(range(len(primitives)), primitives)
    ax.set_xticks(range(depth), [str(i) for i in range(depth)])
    ax.set_xlabel("layer (bottom first)")
    ax.set_title(f"Primitive frequency per layer, top {len(rows)} patterns")
    figure.colorbar(image, ax=ax, fraction=0.046)
    return _save(figure, path)


def plot_rung_curves(records: list[dict[str, Any]], out: Path) -> list[Path]:
    """``rung<k>_curves.png`` per rung whose candidates recorded curves: validation loss against tokens (log
    scale), one line per candidate ending at its final score, the candidates promoted to the next rung drawn bold
    and labelled. Why a plot: whether curves cross (a late learner overtaking a fast one) is what decides if a
    rung's snapshot ranks the target, and it is seen at a glance, not read from a table."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for index, record in enumerate(records):
        rows = [row for row in record.get("leaderboard", []) if (row.get("details") or {}).get("curve")]
        if not rows:
            continue
        promoted = set()
        if index + 1 < len(records):
            promoted = set(records[index + 1].get("promoted", []))
        figure, ax = plt.subplots(figsize=(7, 4.5))
        for row in rows:
            details = row["details"]
            points = sorted(details["curve"], key=lambda point: point["tokens"])
            tokens = [point["tokens"] for point in points if point["loss"] is not None]
            losses = [point["loss"] for point in points if point["loss"] is not None]
            bold = row["pattern"] in promoted
            label = row["compact"] + (f" ({row['known']})" if row.get("known") else "")
            line, = ax.plot(tokens, losses, linewidth=2.0 if bold else 0.8, alpha=1.0 if bold else 0.45,
                            label=label if bold or len(rows) <= 10 else None)
            ax.plot([details.get("tokens") or tokens[-1]], [row["score"]], marker="o" if bold else ".",
                    color=line.get_color())
        ax.set_xscale("log")
        ax.set_xlabel("training tokens")
        ax.set_ylabel("validation loss (curve slice; dot: final score)")
        title = f"Rung {record.get('rung', index)}: {record.get('budget', '')}"
        ax.set_title(title + (", promoted in bold" if promoted else ""))
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7, loc="upper right")
        written.append(_save(figure, out / f"rung{record.get('rung', index)}_curves.png"))
    return written


def plot_loss_against_recall(rows: list[dict[str, Any]], path: Path, front: list[str] | None = None) -> Path:
    """The finalists' loss against their recall at the probe's longest length, or (rows whose ``recall_source`` is
    ``trained``) their trained models' copy gain of random spans, with its interval over the held-out sequences as
    a bar: point area the cache of one 32K-token sequence on the model at the target, known layouts labelled by
    name, the loss-recall front drawn (``front``: the patterns of the search's front on all its objectives,
    ringed)."""
    from search.tradeoffs import CACHE_LENGTH
    from search.tradeoffs import front as front_of

    probed = [row for row in rows if row.get("recall") is not None]
    caches = [float(((row.get("cost") or {}).get("cache_bytes") or {}).get(CACHE_LENGTH) or 0) for row in probed]
    largest = max(caches) or 1.0
    figure, ax = plt.subplots(figsize=(6.5, 4.5))
    for row, cache in zip(probed, caches, strict=True):
        known = bool(row.get("known"))
        ax.scatter(row["recall"], row["score"], s=30 + 400 * cache / largest, alpha=0.6,
                   color="tab:orange" if known else "tab:blue", edgecolors="black" if front and row["pattern"] in
                   front else "none", linewidths=1.5)
        ci = row.get("recall_ci") if row.get("recall_source") == "trained" else None
        if ci is not None:
            ax.errorbar(row["recall"], row["score"], xerr=[[row["recall"] - ci[0]], [ci[1] - row["recall"]]],
                        fmt="none", ecolor="gray", elinewidth=0.8, capsize=2)
        label = f"{row['known']} {row['pattern']}" if known else row["pattern"]
        ax.annotate(label, (row["recall"], row["score"]), textcoords="offset points", xytext=(6, 4), fontsize=8)
    two = sorted((row["recall"], row["score"]) for row in front_of(probed, ["score", "recall"], point_estimates=True))
    if len(two) > 1:
        ax.plot([p[0] for p in two], [p[1] for p in two], "--", color="gray",
                label="loss-recall front (point estimates)")
        ax.legend(fontsize=8, loc="best")
    length = probed[0].get("recall_length") if probed else None
    if probed and probed[0].get("recall_source") == "trained":
        ax.set_xlabel(f"trained model's copy gain of random spans at {length} tokens (nats per token; bar: 95% over "
                      "held-out sequences)")
    else:
        ax.set_xlabel(f"recall at {length} tokens (MQAR accuracy, the pattern's mixers)")
    ax.set_ylabel("validation loss at the target")
    ax.set_title("Finalists: loss against recall (area: cache at 32K tokens; orange: known)", fontsize=9)
    return _save(figure, path)
