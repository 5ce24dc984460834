"""How many training tokens does a comparison need before its seeds agree on the ranking?

Trains fixed patterns (eight six-layer A/M interleavings, each stacked to the target preset with the project's
extrapolator, exactly as ``composer transfer`` does) once per seed at each token budget, and reports per budget:

- the **noise ceiling**: the mean Spearman correlation of the patterns' validation losses between seeds
  (``composer.statistics.noise_ceiling``), against ``composer.statistics.POWER_THRESHOLD``, the level at which
  ``composer transfer`` and ``composer pipeline`` name a result;
- the **separation**: the spread of the patterns' mean losses over the pooled seed spread within a pattern
  (``composer.statistics.seed_separation``); near 1 the patterns differ by about what reseeding one moves it;
- the smallest budget that reaches the threshold, which is what ``composer transfer``'s default budget uses.

    python benchmarks/noise_ceiling.py                          # 300K, 1M, 3M tokens x 8 patterns x 2 seeds, CPU
    python benchmarks/noise_ceiling.py --tokens 300000,1000000  # the budgets measured in docs/evidence.md
    python benchmarks/noise_ceiling.py --tokens 20000 --patterns AAMMMM,AMAMAM,MMMMMM --seq-len 64

The named peer of every row is the threshold itself (the ratio column is ceiling / threshold). Runs live under
``--out/tokens-<N>/train/<pattern>/seed-<s>``; finished runs are never retrained, so the script resumes and a
budget added later reuses every other. Writes ``noise_ceiling.json``, ``.md`` and ``.png`` under ``--out``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from report import finish

from composer.experiments.replicates import (
    finished_summary,
    parse_seeds,
    plan_replicates,
    run_replicates,
    shared_validation,
)
from composer.statistics import POWER_THRESHOLD, seed_separation, seed_summary

# Eight of proxy_transfer.py's twelve patterns: seven that land within ~0.15 of each other at 500K tokens and the
# paper's stacked winner AAMMMM, which lands well above them; the no-attention and all-attention extremes are
# left out because any budget separates them, and they would flatter the ceiling.
DEFAULT_PATTERNS = ("AMMAMM", "MAMAMA", "AMMMMM", "MAMMAA", "MMAAMM", "MMMMAA", "AMAMAM", "AAMMMM")


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", default="300000,1000000,3000000", help="comma-separated token budgets")
    parser.add_argument("--patterns", default=",".join(DEFAULT_PATTERNS), help="comma-separated patterns")
    parser.add_argument("--seeds", default="2", help="training seeds: a count or a list (default 2)")
    parser.add_argument("--to", default="demo-4m", help="target preset (default demo-4m)")
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--lr", type=float, default=2e-3, help="shared by every pattern (transfer's default)")
    parser.add_argument("--max-documents", type=int, default=2000, help="of the data (default: offline corpus)")
    parser.add_argument("--data", help="training text (default: the offline corpus)")
    parser.add_argument("--precision", default="32-true")
    parser.add_argument("--val-tokens", type=int, help="tokens of the final validation (default: the whole split)")
    parser.add_argument("--threshold", type=float, default=POWER_THRESHOLD)
    parser.add_argument("--out", default="runs/noise-ceiling")
    parser.add_argument("--report-only", action="store_true",
                        help="train nothing: report from the runs that finished (a budget part-way through uses the "
                             "patterns every seed has finished)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    return parser.parse_args(argv)


def measure(args: argparse.Namespace, echo=print) -> dict:
    from scaling.extrapolate import extrapolate

    budgets = [int(part) for part in args.tokens.split(",") if part]
    patterns = [part.strip() for part in args.patterns.split(",") if part.strip()]
    seeds = parse_seeds(args.seeds)
    base = {"seq_len": args.seq_len, "batch_size": args.batch_size, "lr": args.lr, "schedule": "cosine",
            "warmup": 0.05, "max_documents": args.max_documents, "data": args.data, "precision": args.precision,
            "val_interval": 1_000_000, "log_interval": 50, "wandb": "off", "val_tokens": args.val_tokens}
    models = {p: extrapolate(p, args.to, method="auto").pattern for p in patterns}
    out = Path(args.out)
    rows = []
    for tokens in budgets:
        started = time.perf_counter()
        plan = plan_replicates(models, seeds, out / f"tokens-{tokens}" / "train", {**base, "tokens": tokens},
                               args.to, run_prefix="noise-ceiling-")
        if args.report_only:
            summaries = {(r.name, r.seed): summary for r in plan if (summary := finished_summary(r)) is not None}
        else:
            summaries = run_replicates(plan, echo=echo)
        done = [p for p in patterns if all((p, s) in summaries for s in seeds)]
        if len(done) < 3:
            echo(f"   {tokens:,} tokens: {len(done)} pattern(s) finished at every seed; skipped (3 needed)")
            continue
        losses = {p: {s: summaries[(p, s)]["val_loss"] for s in seeds} for p in done}
        power = seed_separation(losses, threshold=args.threshold)  # the noise ceiling among the rest
        ceiling = power["noise_ceiling"]
        rows.append({
            "tokens": tokens,
            "patterns": done,
            "noise_ceiling": ceiling,
            "noise_ceiling_pairs": power["noise_ceiling_pairs"],
            "spearman_brown": power["noise_ceiling_spearman_brown"],
            "ratio_to_threshold": None if ceiling is None else ceiling / args.threshold,
            "within_seed_std": power["within_seed_std"],
            "between_model_std": power["between_model_std"],
            "separation": power["separation"],
            "reaches_threshold": ceiling is not None and ceiling >= args.threshold,
            "mean_loss": {p: seed_summary(list(losses[p].values()))["mean"] for p in done},
            "losses": {p: {str(s): v for s, v in losses[p].items()} for p in done},
            "spiked": {p: [s for s in seeds if summaries[(p, s)].get("loss_spikes")] for p in done},
            "validation": shared_validation(summaries.values()),
            "seconds_this_call": time.perf_counter() - started,
        })
    smallest = next((row["tokens"] for row in rows if row["reaches_threshold"]), None)
    return {"patterns": patterns, "targets": models, "seeds": seeds, "to": args.to, "threshold": args.threshold,
            "train": base, "budgets": rows, "smallest_budget_reaching_threshold": smallest}


def format_table(report: dict) -> str:
    lines = ["| tokens | patterns | noise ceiling | / threshold | Spearman-Brown | within-seed std | between-pattern std | "
             "separation | decides |", "|---|---|---|---|---|---|---|---|---|"]
    for row in report["budgets"]:
        def number(value, spec):
            return "n/a" if value is None else format(value, spec)

        lines.append(f"| {row['tokens']:,} | {len(row['patterns'])} | {number(row['noise_ceiling'], '.3f')} | "
                     f"{number(row['ratio_to_threshold'], '.2f')} | {number(row['spearman_brown'], '.3f')} | "
                     f"{number(row['within_seed_std'], '.4f')} | {number(row['between_model_std'], '.4f')} | "
                     f"{number(row['separation'], '.2f')} | {'yes' if row['reaches_threshold'] else 'no'} |")
    smallest = report["smallest_budget_reaching_threshold"]
    lines += ["", f"{len(report['patterns'])} patterns x seeds {', '.join(map(str, report['seeds']))} at "
                  f"{report['to']}; threshold {report['threshold']} (composer.statistics.POWER_THRESHOLD). Smallest "
                  f"budget that decides: {'none measured' if smallest is None else f'{smallest:,} tokens'}."]
    return "\n".join(lines)


def plot(report: dict, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [row for row in report["budgets"] if row["noise_ceiling"] is not None]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
    left.plot([r["tokens"] for r in rows], [r["noise_ceiling"] for r in rows], "o-", label="noise ceiling")
    left.axhline(report["threshold"], color="grey", linestyle="--", label=f"threshold {report['threshold']}")
    left.set_xscale("log")
    left.set_xlabel("training tokens per run")
    left.set_ylabel("Spearman between seeds")
    left.set_ylim(-1.05, 1.05)
    left.legend(fontsize=8)
    left.grid(alpha=0.3, which="both")
    for pattern in report["patterns"]:
        points = [(r["tokens"], r["mean_loss"][pattern]) for r in report["budgets"]
                  if r["mean_loss"].get(pattern) is not None]
        if not points:
            continue
        right.plot(*zip(*points, strict=True), "o-", label=pattern, markersize=3)
    right.set_xscale("log")
    right.set_xlabel("training tokens per run")
    right.set_ylabel(f"val loss at {report['to']} (mean over seeds)")
    right.legend(fontsize=7, ncol=2)
    right.grid(alpha=0.3, which="both")
    fig.suptitle("Does the budget decide? Seeds' rank agreement and the patterns' losses", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def main(argv=None) -> int:
    args = parse_args(argv)
    report = measure(args, echo=lambda line: print(line, file=sys.stderr))
    return finish(args.out, "noise_ceiling", report, format_table(report), as_json=args.json,
                  plot=plot if report["budgets"] else None)


if __name__ == "__main__":
    raise SystemExit(main())
