"""What a rate/seed grid of layouts (``benchmarks/layout_rate_seed_grid.py``) says: each layout at each seed's own
best rate, paired against a baseline layout, and, where the grid recorded them (``--diagnostics``), how the runs
trained: the early training loss, each layer's gradient norm and each attention head's entropy.

Why: issue 71 asks whether the paper's adjacent attention layers (``AAMMMM``) lose to Llama's alternation because
of a defect or because of the layout. The losses answer "how much"; the diagnostics answer "how": a plateau shows
in the training loss, a layer that does not train in its gradient norm, heads that collapse onto one key (or stay
uniform and learn nothing) in their entropy. For every (layout, seed) the diagnostics are read at that seed's best
rate, so each layout is seen as it would be chosen.

    python benchmarks/layout_grid_summary.py runs/controlled-bf16.jsonl runs/controlled-fp32.jsonl \\
        --baseline AMAMAMAMAMAMAM --json benchmarks/results/adjacent_attention-DATE.json --plot docs/reports/...png
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

_ROOT = Path(__file__).resolve().parent.parent
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

from composer.statistics import paired_difference  # noqa: E402

COLLAPSED_NATS = 1.0  # a head whose mean entropy is below this attends to about e (2.7) keys or fewer
LOSS_STEPS = (10, 20, 30, 40, 50, 60)  # training-loss checkpoints read from each run's early curve


def read_rows(paths: list[Path]) -> list[dict]:
    rows = []
    for path in paths:
        rows.extend(json.loads(line) for line in path.read_text().splitlines() if line.strip())
    return rows


def chosen_rate(row: dict) -> tuple[str, float | None, bool]:
    """The rate the project's one chooser (``search.evaluation.best_rate``) takes from the row's sweep, as its key
    in ``lr_sweep``, its loss, and whether it is at the grid's edge (the lowest or highest rate tried): a best rate
    at the edge says the optimum may lie beyond it."""
    from search.evaluation import best_rate

    keys = {float(k): k for k in row["lr_sweep"]}
    rate = best_rate({float(k): v for k, v in row["lr_sweep"].items()})
    if rate is None:
        return "", None, False
    return keys[rate], row["lr_sweep"][keys[rate]], len(keys) > 1 and rate in (min(keys), max(keys))


def loss_at(record: dict, steps: tuple[int, ...] = LOSS_STEPS) -> dict[str, float]:
    """The training loss at each of ``steps`` (the mean of the 3 steps ending there: one batch is noisy)."""
    by_step = {r["step"]: r["loss"] for r in record.get("loss", [])}
    out = {}
    for step in steps:
        window = [by_step[s] for s in range(step - 2, step + 1) if s in by_step]
        if window:
            out[str(step)] = statistics.fmean(window)
    return out


def gradient_profile(record: dict) -> list[float]:
    """Each layer's median gradient norm over the recorded steps."""
    rows = record.get("grad_norm", [])
    if not rows:
        return []
    return [statistics.median(row["norms"][i] for row in rows) for i in range(len(rows[0]["norms"]))]


def entropy_profile(record: dict) -> dict[str, dict]:
    """Each attention layer at the last recorded step: its heads' mean and lowest entropy, the heads below
    :data:`COLLAPSED_NATS`, whether the layer before it is attention too (adjacent), and its mean entropy at
    every recorded step."""
    entropy = record.get("entropy", [])
    layers = record.get("layers", [])
    if not entropy:
        return {}
    last = entropy[-1]["heads"]
    return {index: {"symbol": layers[int(index)], "adjacent": int(index) > 0 and layers[int(index) - 1] == "A",
                    "mean": statistics.fmean(heads), "lowest": min(heads),
                    "collapsed": sum(h < COLLAPSED_NATS for h in heads), "heads": len(heads),
                    "over_steps": {str(row["step"]): statistics.fmean(row["heads"][index]) for row in entropy}}
            for index, heads in last.items()}


def setting_of(row: dict) -> str:
    """The setting a row's runs share: its precision and its budget (a budget with another warmup is another)."""
    return f"{row['precision']} {row.get('budget', '')}".strip()


def summarize(rows: list[dict], baseline: str) -> dict:
    """Per setting (:func:`setting_of`): each layout's widths, parameters, per-seed best rate and loss (and whether at the edge),
    diagnostics at that rate; each layout against ``baseline`` paired by seed at each one's best rate and at each
    rate both tried."""
    by_setting: dict[str, dict[str, dict[int, dict]]] = defaultdict(lambda: defaultdict(dict))
    for row in rows:
        seeds = by_setting[setting_of(row)][row["layout"]]
        if row["seed"] in seeds:  # the same runs at further rates: one sweep (a rate trained again: the later run)
            earlier = seeds[row["seed"]]
            row = {**earlier, "lr_sweep": {**earlier["lr_sweep"], **row["lr_sweep"]},
                   "diagnostics": {**(earlier.get("diagnostics") or {}), **(row.get("diagnostics") or {})}}
        seeds[row["seed"]] = row
    result = {}
    for precision, layouts in sorted(by_setting.items()):
        summary = {}
        for layout, seeds in layouts.items():
            per_seed = {}
            for seed, row in sorted(seeds.items()):
                key, loss, edge = chosen_rate(row)
                record = (row.get("diagnostics") or {}).get(key, {})
                per_seed[str(seed)] = {"lr": float(key) if key else None, "loss": loss, "at_edge": edge,
                                       "lr_sweep": row["lr_sweep"], "train_loss": loss_at(record),
                                       "grad_norm": gradient_profile(record), "entropy": entropy_profile(record)}
            first = next(iter(seeds.values()))
            summary[layout] = {"widths": first.get("widths"), "non_embedding_params": first.get("non_embedding_params"),
                               "seeds": per_seed}
        comparisons = []
        if baseline in summary:
            reference = summary[baseline]["seeds"]
            for layout, entry in summary.items():
                if layout == baseline:
                    continue
                mine = entry["seeds"]
                rates = sorted({k for s in mine.values() for k in s["lr_sweep"]} &
                               {k for s in reference.values() for k in s["lr_sweep"]}, key=float)
                comparisons.append({
                    "layout": layout, "baseline": baseline,
                    "at_best_rates": paired_difference({s: v["loss"] for s, v in mine.items()},
                                                       {s: v["loss"] for s, v in reference.items()}),
                    "at_each_rate": {rate: paired_difference(
                        {s: v["lr_sweep"].get(rate) for s, v in mine.items() if rate in v["lr_sweep"]},
                        {s: v["lr_sweep"].get(rate) for s, v in reference.items() if rate in v["lr_sweep"]})
                        for rate in rates}})
        result[precision] = {"layouts": summary, "against_baseline": comparisons}
    return result


def plot(result: dict, path: Path) -> None:
    """Per precision, a row of three panels: the early training loss at each seed's best rate, each layer's median
    gradient norm, and each attention layer's mean head entropy over the steps."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    precisions = list(result)
    figure, axes = plt.subplots(len(precisions), 3, figsize=(16, 4.2 * len(precisions)), squeeze=False)
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for row_axes, precision in zip(axes, precisions, strict=True):
        loss_ax, grad_ax, entropy_ax = row_axes
        for colour, (layout, entry) in zip(colours, result[precision]["layouts"].items(), strict=False):
            for number, (seed, data) in enumerate(entry["seeds"].items()):
                label = f"{layout} ({entry['widths']})" if number == 0 else None
                steps = [int(k) for k in data["train_loss"]]
                loss_ax.plot(steps, list(data["train_loss"].values()), color=colour, alpha=0.8, label=label,
                             marker="o", markersize=3)
                if data["grad_norm"]:
                    grad_ax.plot(range(len(data["grad_norm"])), data["grad_norm"], color=colour, alpha=0.7,
                                 label=label, marker="o", markersize=3)
                for index, layer in data["entropy"].items():
                    over = layer["over_steps"]
                    entropy_ax.plot([int(k) for k in over], list(over.values()), color=colour, alpha=0.6,
                                    linestyle="--" if layer["adjacent"] else "-",
                                    label=label if index == next(iter(data["entropy"])) else None)
        loss_ax.set(title=f"{precision}: training loss at each seed's best rate", xlabel="step", ylabel="loss")
        grad_ax.set(title="median gradient norm per layer", xlabel="layer", ylabel="norm", yscale="log")
        entropy_ax.set(title="attention entropy, mean over heads (dashed: after another A)", xlabel="step",
                       ylabel="nats")
        for ax in row_axes:
            ax.grid(alpha=0.3)
        loss_ax.legend(fontsize=7)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=80)
    plt.close(figure)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("grids", nargs="+", help="JSON-lines files of benchmarks/layout_rate_seed_grid.py")
    parser.add_argument("--baseline", required=True, help="the layout every other is paired against")
    parser.add_argument("--json", help="write the summary here")
    parser.add_argument("--plot", help="write the figure (PNG) here")
    parser.add_argument("--plot-settings", help="comma-separated settings (precision and budget, as printed) the "
                        "figure shows, a row each (default: all)")
    args = parser.parse_args(argv)
    result = summarize(read_rows([Path(p) for p in args.grids]), args.baseline)
    for precision, entry in result.items():
        print(f"{precision}:")
        for layout, data in entry["layouts"].items():
            best = ", ".join(f"s{s} {v['lr']:g}{'*' if v['at_edge'] else ''} {v['loss']:.4f}"
                             for s, v in data["seeds"].items() if v["loss"] is not None)
            print(f"  {layout:<16} {data['widths']:<14} {best}")
        for row in entry["against_baseline"]:
            pair = row["at_best_rates"]
            if pair.get("ci"):
                print(f"  {row['layout']} - {row['baseline']}: {pair['mean']:+.4f} "
                      f"[{pair['ci'][0]:+.4f}, {pair['ci'][1]:+.4f}] {pair['verdict']}")
    if args.json:
        from composer.files import atomic_write_json

        atomic_write_json(Path(args.json), {"benchmark": "layout_grid_summary", "grids": args.grids,
                                            "baseline": args.baseline, "settings": result})
    if args.plot:
        shown = args.plot_settings.split(",") if args.plot_settings else list(result)
        missing = [name for name in shown if name not in result]
        if missing:
            print(f"error: --plot-settings {', '.join(missing)}: not in the grids (they hold {', '.join(result)})",
                  file=sys.stderr)
            return 2
        plot({name: result[name] for name in shown}, Path(args.plot))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
