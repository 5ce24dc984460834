"""Does hybridizing a pretrained Transformer beat training the hybrid from scratch, and does the supernet know where
attention should stay? (issue 18, docs/hybridize.md)

On a Llama this script trains itself (the teacher, ``(AM)x8`` at ``demo-4m`` widths on the offline corpus), it
measures, at equal training tokens per student:

* (a) the teacher;
* (b) the searched hybrid: ``composer hybridize --search``'s best placement of ``--keep`` kept attention layers,
  the other attention layers Gated DeltaNet, distilled from the teacher;
* (c) the same hybrid with its attention placed uniformly instead, distilled the same way;
* (d) the same hybrid pattern as (b) trained from scratch on the data (no teacher, nothing frozen);

each student over ``--seeds``, with the mean, a t interval, and the paired differences (b) - (c) and (b) - (d).
Every distilled placement starts from the supernet's layers (``composer.experiments.placement_search``), so (b) and (c) differ
only in where attention stays. The supernet's ranking is then checked: ``--placements`` placements spread over its
leaderboard (best, worst and between) are distilled separately, and the Spearman correlation between the
supernet's held-out loss and their distilled held-out loss gets a bootstrap interval over placements and seeds
(``composer.statistics.bootstrap_rank_correlation``).

    python benchmarks/hybridize_evidence.py                         # the defaults below, ~30 min on 2 CPU cores
    python benchmarks/hybridize_evidence.py --teacher-tokens 200000 --tokens 40000 --seeds 2   # a quick look

Every run lives under ``--out`` and is kept once finished, so the script resumes. Writes ``hybridize.json`` and
``hybridize.md``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from report import finish

from composer.experiments.replicates import parse_seeds
from composer.statistics import bootstrap_rank_correlation, format_interval, paired_difference, seed_summary


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", default="demo-4m", help="the teacher's widths (default demo-4m: (AM)x8)")
    parser.add_argument("--teacher-tokens", type=int, default=1_000_000, help="the teacher's training tokens")
    parser.add_argument("--replacement", default="D", help="what replaces attention: D (default), S or W")
    parser.add_argument("--keep", type=int, default=2, help="attention layers that stay (default 2 of 8)")
    parser.add_argument("--supernet-tokens", type=int, default=300_000)
    parser.add_argument("--tokens", type=int, default=300_000, help="training tokens of every student")
    parser.add_argument("--seeds", default="2", help="a count or comma-separated seeds of every student")
    parser.add_argument("--placements", type=int, default=4, help="placements distilled for the Spearman check")
    parser.add_argument("--score-tokens", type=int, default=65_536)
    parser.add_argument("--val-tokens", type=int, default=131_072, help="held-out tokens of every final score")
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--lr", type=float, default=2e-3, help="teacher and from-scratch learning rate")
    parser.add_argument("--distill-lr", type=float, default=1e-3)
    parser.add_argument("--max-documents", type=int, default=2000)
    parser.add_argument("--out", default="runs/hybridize-evidence")
    return parser.parse_args(argv)


def echo(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def trained(config, what: str) -> dict[str, Any]:
    """``composer train``'s summary of ``config``, training it unless it finished before (resuming if killed)."""
    from composer.training.checkpoint import latest_checkpoint
    from composer.training.run import train

    out = Path(config.out)
    if (out / "summary.json").is_file():
        return json.loads((out / "summary.json").read_text())
    echo(f"== {what} -> {out}")
    started = time.perf_counter()
    summary = train(config, resume=latest_checkpoint(out / "checkpoints") is not None)
    echo(f"   val_loss {summary['val_loss']:.4f} ({time.perf_counter() - started:.0f} s)")
    return summary


def spread(rows: list[dict], k: int) -> list[dict]:
    if k >= len(rows):
        return rows
    index = sorted({round(i * (len(rows) - 1) / (k - 1)) for i in range(k)})
    return [rows[i] for i in index]


def run(args: argparse.Namespace) -> dict[str, Any]:
    from composer.experiments.placement_search import PlacementSearch, PlacementSearchConfig
    from composer.training.config import TrainConfig

    out = Path(args.out)
    seeds = parse_seeds(args.seeds)
    common = {"seq_len": args.seq_len, "batch_size": args.batch_size, "max_documents": args.max_documents,
              "precision": "32-true", "val_tokens": args.val_tokens, "wandb": "off", "log_interval": 50,
              "val_interval": 10**6}
    teacher_summary = trained(TrainConfig(arch="(AM)x8", preset=args.preset, tokens=args.teacher_tokens,
                                          lr=args.lr, out=str(out / "teacher"), **common), "(a) teacher")
    teacher_dir = out / "teacher" / "model"
    from composer.hybridize.student import teacher_arch

    teacher = teacher_arch(teacher_dir)
    pattern = "".join(args.replacement if token == "A" else token for token in teacher.layers)
    train = {**common, "tokens": args.tokens, "lr": args.distill_lr}
    search = PlacementSearch(PlacementSearchConfig(
        source=str(teacher_dir), pattern=pattern, keep=args.keep, out=str(out / "search"), train=train,
        supernet_tokens=args.supernet_tokens, score_tokens=args.score_tokens, distill_best=False), echo=echo)
    supernet = search.train_config(arch=pattern, supernet_keep=args.keep, out=str(out / "search" / "supernet"),
                                   tokens=args.supernet_tokens)
    search.run_training(supernet, "supernet")
    ranking = search.rank_placements()["placements"]
    best, uniform = ranking[0], next(row for row in ranking if row["uniform"])
    checked = {tuple(row["kept"]): row for row in spread(ranking, args.placements)}
    checked.setdefault(tuple(best["kept"]), best)
    checked.setdefault(tuple(uniform["kept"]), uniform)

    distilled: dict[tuple[int, ...], dict[int, float]] = {}
    for kept, row in checked.items():
        init_dir = out / "search" / f"init-{'-'.join(map(str, kept))}"
        if not (init_dir / "model.safetensors").is_file():
            search.best_init(kept, init_dir)
        for seed in seeds:
            run_dir = out / "distill" / "-".join(map(str, kept)) / f"seed-{seed}"
            config = search.train_config(arch=row["pattern"], init_from=str(init_dir), seed=seed, out=str(run_dir))
            summary = trained(config, f"distil placement {list(kept)} seed {seed}")
            distilled.setdefault(kept, {})[seed] = summary["val_loss"]
    scratch = {}
    options = json.loads((out / "search" / "supernet" / "config.json").read_text())["arch"]["options"]
    for seed in seeds:
        summary = trained(TrainConfig(arch=best["pattern"], preset=args.preset, options=options, tokens=args.tokens,
                                      lr=args.lr, seed=seed, out=str(out / "scratch" / f"seed-{seed}"), **common),
                          f"(d) from scratch seed {seed}")
        scratch[seed] = summary["val_loss"]

    from composer.accounting import analyze

    def cache(pattern_text: str) -> int:
        arch = teacher.with_pattern(pattern_text).replace(options=options)
        return analyze(arch, seq_len=args.seq_len).cache_bytes_per_sequence

    b, c = distilled[tuple(best["kept"])], distilled[tuple(uniform["kept"])]
    rows = [
        {"model": "(a) teacher", "pattern": teacher.compact, "losses": {"0": teacher_summary["val_loss"]},
         **seed_summary([teacher_summary["val_loss"]]), "cache_bytes": cache(teacher.pattern)},
        {"model": "(b) searched placement, distilled", "pattern": best["compact"], "kept": best["kept"],
         "losses": {str(s): v for s, v in b.items()}, **seed_summary(list(b.values())),
         "cache_bytes": cache(best["pattern"])},
        {"model": "(c) uniform placement, distilled", "pattern": uniform["compact"], "kept": uniform["kept"],
         "losses": {str(s): v for s, v in c.items()}, **seed_summary(list(c.values())),
         "cache_bytes": cache(uniform["pattern"])},
        {"model": "(d) searched pattern from scratch", "pattern": best["compact"],
         "losses": {str(s): v for s, v in scratch.items()}, **seed_summary(list(scratch.values())),
         "cache_bytes": cache(best["pattern"])},
    ]
    order = sorted(checked, key=lambda kept: checked[kept]["val_loss"])
    correlation = bootstrap_rank_correlation([-checked[k]["val_loss"] for k in order],
                                             [[distilled[k][s] for s in seeds] for k in order], n_boot=10_000)
    report = {
        "settings": vars(args), "seeds": seeds, "teacher_tokens": teacher_summary["tokens"], "rows": rows,
        "b_minus_c": paired_difference(b, c), "b_minus_d": paired_difference(b, scratch),
        "supernet_vs_distilled": {"placements": [{"kept": list(k), "supernet_val_loss": checked[k]["val_loss"],
                                                  "distilled": {str(s): distilled[k][s] for s in seeds}}
                                                 for k in order],
                                  "spearman": correlation["spearman"], "spearman_ci": correlation["spearman_ci"]},
        "placements_scored": len(ranking),
    }
    return report


def format_report(report: dict[str, Any]) -> str:
    s = report["settings"]
    seeds = ", ".join(map(str, report["seeds"]))
    lines = [f"Teacher `(AM)x8` at {s['preset']} widths, {report['teacher_tokens']:,} tokens; every student "
             f"{s['tokens']:,} tokens, seeds {seeds}; {s['keep']} of 8 attention layers kept, the rest "
             f"{s['replacement']}; supernet {s['supernet_tokens']:,} tokens, {report['placements_scored']} "
             "placements scored.", "",
             "| model | pattern | mean val loss | 95% CI | per seed | cache/seq at seq len |",
             "|---|---|---|---|---|---|"]
    for row in report["rows"]:
        per_seed = ", ".join(f"{v:.4f}" for v in row["losses"].values())
        lines.append(f"| {row['model']} | `{row['pattern']}` | {row['mean']:.4f} | {format_interval(row['ci'])} | "
                     f"{per_seed} | {row['cache_bytes']:,} B |")
    for key, label in (("b_minus_c", "(b) - (c), searched minus uniform"),
                       ("b_minus_d", "(b) - (d), distilled minus scratch")):
        d = report[key]
        mean = "n/a" if d["mean"] is None else f"{d['mean']:+.4f}"
        lines.append(f"\n{label}: {mean}, 95% CI {format_interval(d['ci'])}, {d['verdict']} (paired over seeds).")
    sv = report["supernet_vs_distilled"]
    rho = "n/a" if sv["spearman"] is None else f"{sv['spearman']:+.2f}"
    lines += ["", f"Supernet score vs distilled loss over {len(sv['placements'])} placements: Spearman {rho}, 95% CI "
                  f"{format_interval(sv['spearman_ci'], 2)}.", "",
              "| kept layers | supernet val loss | distilled val loss per seed |", "|---|---|---|"]
    for p in sv["placements"]:
        lines.append(f"| {', '.join(map(str, p['kept']))} | {p['supernet_val_loss']:.4f} | "
                     + ", ".join(f"{v:.4f}" for v in p["distilled"].values()) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    args = parse_args(argv)
    report = run(args)
    return finish(args.out, "hybridize", report, format_report(report))


if __name__ == "__main__":
    sys.exit(main())
