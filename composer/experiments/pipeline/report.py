"""The pipeline's comparison in words, tables and plots: the conclusion (a winner only when the budget can
decide), comparison.json/.csv/.md, the downstream summary and the loss curves over seeds."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

from composer.accounting import format_bytes
from composer.errors import ConfigError
from composer.experiments import pipeline_recall
from composer.experiments.pipeline.config import COMPOSITE, CONFIDENCE, read_json
from composer.files import atomic_write_csv, atomic_write_json, atomic_write_text
from composer.statistics import (
    UNDERPOWERED,
    VERDICT_HIGHER,
    VERDICT_LOWER,
    format_interval,
    seed_summary,
)
from search.tradeoffs import CACHE_LENGTH  # the serving length the search's --max-kv and its front read: 32K


def conclusion(rows: list[dict[str, Any]], reference: str, power: dict[str, Any]) -> dict[str, Any]:
    """``{"underpowered", "conclusion"}``: the comparison's answer in one line, naming a winner only when the
    budget can decide (``power``) and the composite's paired interval against the reference excludes 0."""
    reasons = [power["reason"]] if power["underpowered"] else []
    composite = next((row for row in rows if row["model"] == COMPOSITE), None)
    decided = (composite is not None and reference != COMPOSITE
               and composite["verdict"] in (VERDICT_LOWER, VERDICT_HIGHER))
    if composite is not None and reference != COMPOSITE and not decided:
        reasons.append(f"the composite's paired difference to {reference} has an interval containing 0 "
                       f"({composite['verdict']})")
    if reasons:
        return {"underpowered": True, "conclusion": f"{UNDERPOWERED}: " + "; ".join(reasons)}
    if composite is None or reference == COMPOSITE:
        return {"underpowered": False, "conclusion": "no Llama reference trained: compare the rows"}
    word = "lower" if composite["verdict"] == VERDICT_LOWER else "higher"
    return {"underpowered": False,
            "conclusion": f"the composite's validation loss is {word} than {reference}'s by "
                          f"{composite['diff_vs_reference']:+.4f} ({format_interval(composite['diff_ci'])}, "
                          f"paired over seeds)"}


def headline(report: dict[str, Any]) -> list[tuple[str, str, float]]:
    """(task, metric, value) of every metric of an eval.json report, standard errors left out."""
    return [(task, metric, value) for task, values in report["tasks"].items()
            for metric, value in values["metrics"].items() if "_stderr" not in metric and value is not None]


def downstream_summary(reports: dict[int, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per ``task/metric``: the mean over seeds with its Student-t interval (:func:`seed_summary`), the
    per-seed values and lm-eval's per-run standard errors (the sampling error of the task's documents)."""
    keys: dict[str, None] = {}
    for report in reports.values():
        keys.update({f"{task}/{metric}": None for task, metric, _ in headline(report)})
    summary = {}
    for key in keys:
        task, metric = key.split("/", 1)
        values, stderrs = {}, {}
        for seed, report in reports.items():
            metrics = report["tasks"].get(task, {}).get("metrics", {})
            values[str(seed)] = metrics.get(metric)
            stderr_name = metric.replace(",", "_stderr,", 1) if "," in metric else f"{metric}_stderr"
            stderrs[str(seed)] = metrics.get(stderr_name)
        stats = seed_summary(list(values.values()), CONFIDENCE)
        summary[key] = {"mean": stats["mean"], "std": stats["std"], "ci": stats["ci"], "per_seed": values,
                        "stderr_per_seed": stderrs}
    return summary


def format_downstream(comparison: dict[str, Any]) -> str:
    """Markdown table of the eval stage: per model, each task metric's mean over seeds and its interval."""
    rows = comparison["models"]
    keys = list(dict.fromkeys(key for row in rows for key in row.get("eval", {})))
    if not keys:
        return ""
    percent = round(100 * comparison["confidence"])
    lines = ["| model | " + " | ".join(keys) + " |", "|" + "---|" * (len(keys) + 1)]
    for row in rows:
        cells = []
        for key in keys:
            stats = row.get("eval", {}).get(key)
            if stats is None or stats["mean"] is None:
                cells.append("n/a")
                continue
            ci = f" [{stats['ci'][0]:.4f}, {stats['ci'][1]:.4f}]" if stats["ci"] is not None else ""
            cells.append(f"{stats['mean']:.4f}{ci}")
        lines.append(f"| {row['model']} | " + " | ".join(cells) + " |")
    options = comparison.get("eval", {})
    limit = f", at most {options['limit']} documents per task" if options.get("limit") else ""
    seeds = ", ".join(map(str, comparison["seeds"]))
    lines += ["", f"Downstream (lm-evaluation-harness{limit}): mean over seeds {seeds} with the "
                  f"Student-t {percent}% interval over seeds; each run's own standard error (the sampling "
                  "error of the task's documents) is in comparison.json and the runs' eval.json."]
    return "\n".join(lines)


def require_file(path: Path) -> Any:
    data = read_json(path)
    if data is None:
        raise ConfigError(f"{path} does not exist; run the stage that writes it first")
    return data


CSV_COLUMNS = ("model", "pattern", "layers", "seeds", "chosen_lr", "lr_source", "search_lr", "val_loss", "val_loss_std", "val_loss_ci_low",
               "val_loss_ci_high", "diff_vs_reference", "diff_ci_low", "diff_ci_high", "verdict", "spiked_seeds",
               "diverged_seeds", "tokens_per_s", "tokens_per_s_ratio", "params", "non_embedding_params",
               "kv_cache_bytes_per_token", "state_bytes", "cache_bytes_32768", "active_params")


def comparison_notes(seeds: list[int], validation: dict[str, Any]) -> list[str]:
    """What a reader must know before trusting the table; empty when nothing needs saying."""
    notes = []
    if len(seeds) < 2:
        notes.append("one seed: no interval, so no difference in this table is evidence; train with seeds: [0, 1, 2]")
    if not validation["same"]:
        notes.append("the runs were scored on different validation text (val_fingerprint differs): their losses "
                     "are not comparable; use one data, data_seed and seq_len for every run")
    return notes


def _cache(row: dict[str, Any], length: str) -> str:
    """A row's cache per sequence at ``length`` tokens, or n/a (a comparison written before it was kept)."""
    size = (row.get("cache_bytes") or {}).get(length)
    return "n/a" if size is None else format_bytes(size)


def _number(value: float | None, spec: str) -> str:
    return "n/a" if value is None else format(value, spec)


def format_comparison(comparison: dict[str, Any]) -> str:
    """A Markdown table: mean validation loss over seeds with its interval, the paired difference to the
    reference with its interval, and the verdict in words; the best mean is marked."""
    rows, reference = comparison["models"], comparison["reference"]
    percent = round(100 * comparison["confidence"])
    finite = [row["val_loss"] for row in rows if row["val_loss"] is not None]
    # no winner is starred when the budget cannot decide (comparisons written before issue 16 lack the field)
    best = min(finite) if finite and not comparison.get("underpowered") else None
    header = ("model", "pattern", "layers", "lr", "val loss (mean ± std)", f"{percent}% CI",
              f"Δ vs {reference} (paired)", f"{percent}% CI", "verdict", "tokens/s", "ratio", "params", "active",
              "KV B/token", "state B", "cache @32K")
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in rows:
        std = f" ± {row['val_loss_std']:.4f}" if row["val_loss_std"] is not None else ""
        marks = [f"{label}: seed {', '.join(map(str, row[key]))}"
                 for key, label in (("spiked_seeds", "spiked"), ("diverged_seeds", "diverged")) if row.get(key)]
        cells = [
            row["model"], f"`{row['pattern']}`", str(row["layers"]), _number(row.get("chosen_lr"), "g"),
            "all seeds diverged" if row["val_loss"] is None else
            f"{row['val_loss']:.4f}{std}{' *' if row['val_loss'] == best else ''}",
            format_interval(row["val_loss_ci"]),
            "—" if row["model"] == reference else _number(row["diff_vs_reference"], "+.4f"),
            "—" if row["model"] == reference else format_interval(row["diff_ci"]),
            row["verdict"] + (f" ({'; '.join(marks)})" if marks else ""),
            _number(row["tokens_per_s"], ",.0f"), _number(row["tokens_per_s_ratio"], ".2f"),
            f"{row['params']:,}", _number(row.get("active_params"), ","), f"{row['kv_cache_bytes_per_token']:,}",
            _number(row.get("state_bytes"), ","),
            _cache(row, CACHE_LENGTH),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    validation = comparison["validation"]
    seeds = ", ".join(map(str, comparison["seeds"]))
    footer = [
        "",
        f"Seeds {seeds} (every model trained once per seed on the same data, tokens and schedule). Intervals are "
        f"Student-t {percent}% intervals over seeds; Δ is each model's loss minus {reference}'s at the same seed. "
        "'within noise': the interval contains 0. active: the parameters one token uses (fewer than params with "
        "MoE layers); state B: the fixed recurrent state one sequence keeps (Mamba-2, Gated DeltaNet), beside the "
        "KV cache that grows with it. cache @32K: all of one sequence's cache at 32,768 tokens (bf16), as the "
        "search's --max-kv reads it.",
    ]
    if validation["same"]:
        footer.append(f"Validation: the same {validation['val_tokens']:,} held-out tokens for every run "
                      f"(fingerprint {validation['val_fingerprint']}).")
    power = comparison.get("power")
    if power:
        footer.append(
            f"Power: seed std within a model {_number(power['within_seed_std'], '.4f')}, std of the models' means "
            f"{_number(power['between_model_std'], '.4f')} (ratio {_number(power['separation'], '.2f')}); the seeds "
            f"rank the models alike at Spearman {_number(power['noise_ceiling'], '.2f')} (threshold "
            f"{power['threshold']}).")
    if comparison.get("conclusion"):
        footer.append(f"**Conclusion:** {comparison['conclusion']}.")
    footer += [f"**Note:** {note}" for note in comparison["notes"]]
    return "\n".join(lines + footer)


def _csv_row(row: dict[str, Any]) -> dict[str, Any]:
    low_high = lambda ci: (None, None) if ci is None else ci  # noqa: E731
    loss_low, loss_high = low_high(row["val_loss_ci"])
    diff_low, diff_high = low_high(row["diff_ci"])
    downstream = {key: stats["mean"] for key, stats in row.get("eval", {}).items()}
    return {**row, **downstream, **pipeline_recall.csv_fields(row),
            "cache_bytes_32768": (row.get("cache_bytes") or {}).get(CACHE_LENGTH),
            "seeds": " ".join(map(str, row["seeds"])),
            "spiked_seeds": " ".join(map(str, row.get("spiked_seeds", []))),
            "diverged_seeds": " ".join(map(str, row.get("diverged_seeds", []))), "val_loss_ci_low": loss_low,
            "val_loss_ci_high": loss_high, "diff_ci_low": diff_low, "diff_ci_high": diff_high}


def write_comparison(comparison: dict[str, Any], out: Path) -> None:
    atomic_write_json(out / "comparison.json", comparison)
    downstream = tuple(dict.fromkeys(key for row in comparison["models"] for key in row.get("eval", {})))
    recall = pipeline_recall.CSV_COLUMNS if comparison.get("recall") else ()
    atomic_write_csv(out / "comparison.csv", [_csv_row(row) for row in comparison["models"]],
                     CSV_COLUMNS + recall + downstream)
    tables = [format_comparison(comparison), pipeline_recall.format_recall(comparison), format_downstream(comparison)]
    atomic_write_text(out / "comparison.md", "\n\n".join(t for t in tables if t) + "\n")


def read_loss_curve(run_dir: Path, column: str = "val/loss") -> list[tuple[float, float]]:
    """(tokens seen, loss) points from the run's CSV logs (all versions, so a resumed run's curve is whole)."""
    summary = read_json(run_dir / "summary.json") or {}
    tokens_per_step = summary.get("tokens", 0) / max(1, summary.get("steps", 1))
    points: dict[int, float] = {}
    for metrics in sorted((run_dir / "logs").glob("version_*/metrics.csv")):
        with open(metrics, newline="") as f:
            for row in csv.DictReader(f):
                if row.get(column) and row.get("step"):
                    points[int(row["step"])] = float(row[column])
    return [(step * tokens_per_step, loss) for step, loss in sorted(points.items())]


def seed_band(run_dirs: list[Path], column: str) -> tuple[list[float], list[float], list[float], list[float]]:
    """(tokens, mean, low, high) over the seeds' curves at the points every seed logged (same schedule)."""
    curves = [dict(read_loss_curve(run, column)) for run in run_dirs]
    curves = [curve for curve in curves if curve]
    if not curves:
        return [], [], [], []
    tokens = sorted(set.intersection(*(set(curve) for curve in curves)))
    values = [[curve[t] for curve in curves] for t in tokens]
    return (tokens, [sum(v) / len(v) for v in values], [min(v) for v in values], [max(v) for v in values])


def plot_loss_curves(runs: dict[str, list[Path]], path: Path) -> Path:
    """Validation and training loss against tokens: the mean over seeds as a line, the seeds' range as a band."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_val, ax_train) = plt.subplots(1, 2, figsize=(11, 4))
    for name, run_dirs in runs.items():
        style = {"linewidth": 2.2 if name == COMPOSITE else 1.3}
        for ax, column in ((ax_val, "val/loss"), (ax_train, "train/loss")):
            tokens, mean, low, high = seed_band(run_dirs, column)
            if tokens:
                (line,) = ax.plot(tokens, mean, label=f"{name} ({len(run_dirs)} seeds)", **style)
                if len(run_dirs) > 1:
                    ax.fill_between(tokens, low, high, color=line.get_color(), alpha=0.2, linewidth=0)
    for ax, title in ((ax_val, "validation loss"), (ax_train, "training loss")):
        ax.set_xlabel("tokens")
        ax.set_ylabel("loss")
        ax.set_title(f"{title}: mean over seeds, band = min..max")
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
