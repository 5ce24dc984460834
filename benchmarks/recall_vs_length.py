"""Recall accuracy against sequence length: which mixers keep recalling as the context outgrows a fixed state?

Trains each pattern on Zoology's multi-query associative recall (MQAR) at every length of the budget, with the
key-value pairs growing with the length (``search.recall``: ``length // kv_ratio`` pairs, 4 at 64 tokens and 64 at
1,024), and prints accuracy per length beside each pattern's KV cache and fixed state at the training widths. The
named peer is pure attention (``AMAMAM``, Llama's layout), measured in the same run: the ratio columns are each
pattern's accuracy over attention's at the same length.

    python benchmarks/recall_vs_length.py                         # the default patterns, cpu budget, seed 0
    python benchmarks/recall_vs_length.py --budget smoke --patterns AMAMAM,SMSMSM
    python benchmarks/recall_vs_length.py --lengths 64,256,1024 --steps 600 --seeds 0,1
    python benchmarks/recall_vs_length.py --lrs 1e-3,3e-3                 # each pattern's own learning rate

With ``--lrs`` every pattern trains at each rate and is reported at the one with the lowest final training loss
(the mean over the last tenth of the steps, on training sequences): the choice never looks at the test queries,
and one rate for all would compare the patterns at a rate that suits some and stalls others (docs/recall.md).

Each (pattern, rate, seed) result is a JSON file under ``--out``; a finished one is never retrained, so the script
resumes (and several invocations over disjoint ``--patterns`` can share one ``--out``). Writes ``recall.json``,
``recall.md`` and ``recall.png`` under ``--out``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

from report import finish

from composer.accounting import analyze
from composer.errors import ConfigError
from composer.experiments.lr_sweep import parse_rates
from composer.experiments.replicates import parse_seeds
from composer.files import atomic_write_json
from composer.presets import get_preset
from composer.statistics import proportion_interval, seed_summary
from search.recall import RecallEvaluator, get_recall_budget, lowest_final_loss, parse_lengths

REFERENCE = "AA"  # pure attention: the named peer
# Zoology's 2-layer models without MLPs: with MLPs between them (AMAM) attention is still on its plateau after
# 3,000 steps, where the 2 attention layers alone reach 0.87 at 4,000 (docs/recall.md). Attention, Mamba-2, Gated
# DeltaNet and sliding-window attention alone, then hybrids: Mamba-2 or Gated DeltaNet under an attention layer
# (Jamba/Qwen3-Next-like), Mamba-2 under SWA (Samba-like, no full attention) and attention beside Mamba-2 in one
# parallel layer (Hymba-like)
DEFAULT_PATTERNS = (REFERENCE, "SS", "DD", "WW", "SA", "DA", "SW", "[AS]S")


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--patterns", default=",".join(DEFAULT_PATTERNS), help="comma-separated patterns")
    parser.add_argument("--reference", default=REFERENCE, help=f"the pattern every ratio divides by (default "
                        f"{REFERENCE}, pure attention)")
    parser.add_argument("--budget", default="cpu", help="search.recall budget: smoke, cpu (default) or gpu")
    parser.add_argument("--lengths", help="comma-separated lengths (default: the budget's)")
    parser.add_argument("--kv-ratio", type=int, help="tokens per key-value pair (default 16)")
    parser.add_argument("--steps", type=int, help="optimizer steps per length (default: the budget's)")
    parser.add_argument("--tokens-per-step", type=int, help="tokens per optimizer step at every length (default: "
                        "the budget's)")
    parser.add_argument("--lr", type=float, help="learning rate (default: the budget's)")
    parser.add_argument("--lrs", help="comma-separated learning rates: each pattern is reported at the one with "
                        "the lowest final training loss")
    parser.add_argument("--per-length", action="store_true", help="train each length on its own instead of one "
                        "model on the mixture of lengths (Zoology's protocol, the default)")
    parser.add_argument("--widths", default="search-1m", help="preset whose widths every pattern trains at")
    parser.add_argument("--seeds", default="1", help="a count (1: seed 0, the default) or comma-separated seeds")
    parser.add_argument("--precision", default="auto", help="auto (default: bf16 autocast where the device has "
                        "it, 1.5x faster than fp32 on this CPU), fp32 or bf16")
    parser.add_argument("--out", default="runs/recall")
    parser.add_argument("--json", action="store_true", help="print recall.json instead of the table")
    return parser.parse_args(argv)


def budget_of(args: argparse.Namespace):
    budget = get_recall_budget(args.budget)
    changes = {}
    if args.lengths:
        changes["lengths"] = parse_lengths(args.lengths)
    if args.kv_ratio:
        changes["kv_ratio"] = args.kv_ratio
    if args.steps:
        changes["steps"] = args.steps
    if args.tokens_per_step:
        changes["tokens_per_step"] = args.tokens_per_step
    if args.lr:
        changes["lrs"] = (args.lr,)
    if args.lrs:
        changes["lrs"] = parse_rates(args.lrs, "--lrs")
    if args.per_length:
        changes["mixture"] = False
    return budget.replace(**changes) if changes else budget


def result_path(out: Path, pattern: str, seed: int, lr: float | None = None) -> Path:
    """One file per (pattern, seed), and per rate in a sweep."""
    safe = pattern.replace("[", "(").replace("]", ")")
    return out / "runs" / (f"{safe}-seed{seed}.json" if lr is None else f"{safe}-lr{lr:g}-seed{seed}.json")


def run(args: argparse.Namespace) -> dict:
    out = Path(args.out)
    (out / "runs").mkdir(parents=True, exist_ok=True)
    budget = budget_of(args)
    seeds = parse_seeds(args.seeds)
    rates = sorted(budget.lrs)
    sweep = len(rates) > 1
    patterns = [p for p in args.patterns.replace(" ", "").split(",") if p]
    results: dict[str, dict[float, dict[int, dict]]] = {}
    total, done, trained, started = len(patterns) * len(rates) * len(seeds), 0, 0, time.perf_counter()
    for lr in rates:
        evaluator = RecallEvaluator(budget.replace(lrs=(lr,)), args.widths, precision=args.precision)
        settings = settings_of(evaluator, args.widths)
        for pattern in patterns:
            for seed in seeds:
                path = result_path(out, pattern, seed, lr if sweep else None)
                done += 1
                stored = json.loads(path.read_text()) if path.exists() else None
                if stored is not None and stored.get("settings") == settings:
                    results.setdefault(pattern, {}).setdefault(lr, {})[seed] = stored
                    continue
                evaluation = evaluator(pattern, seed, lambda index, value: None)
                record = {"pattern": pattern, "seed": seed, "settings": settings, "score": evaluation.score,
                          "seconds": evaluation.seconds, **evaluation.details}
                atomic_write_json(path, record)
                results.setdefault(pattern, {}).setdefault(lr, {})[seed] = record
                trained += 1
                elapsed = time.perf_counter() - started
                print(f"[{done}/{total}] {pattern} lr {lr:g} seed {seed}: mean {evaluation.score:.3f} "
                      + " ".join(f"{n}:{a:.2f}" for n, a in evaluation.details["accuracy_by_length"].items())
                      + f" ({evaluation.seconds:.0f} s, ETA {elapsed / trained * (total - done) / 60:.0f} min)",
                      file=sys.stderr, flush=True)
    settings = {**settings, "lr": rates[0] if not sweep else None, "lrs": rates}
    return report(results, settings, args.reference)


def settings_of(evaluator: RecallEvaluator, widths: str) -> dict:
    """What a stored result must match to be reused (anything else changes what it measured)."""
    budget = evaluator.spec
    return {"budget": budget.name, "lengths": list(budget.lengths), "kv_ratio": budget.kv_ratio,
            "steps": budget.steps, "tokens_per_step": budget.tokens_per_step, "vocab_size": budget.vocab_size,
            "lr": budget.lrs[0], "mixture": budget.mixture, "mixers_only": budget.mixers_only,
            "shift_stem": budget.shift_stem, "rate_scales": dict(budget.rate_scales),
            "primitive_options": budget.primitive_options, "widths": widths,
            "precision": evaluator.precision}


def chosen_rate(by_lr: dict[float, dict[int, dict]]) -> float:
    """The rate whose seeds end with the lowest mean training loss (the evaluator's rule, applied to the mean over
    seeds; a non-finite loss never wins)."""
    def mean_final_loss(runs: dict[int, dict]) -> float:
        return sum(r.get("train_loss", math.inf) for r in runs.values()) / len(runs)

    return lowest_final_loss({lr: mean_final_loss(runs) for lr, runs in by_lr.items()})


def accuracy_interval(accuracies: list[float], queries: int) -> tuple[list[float] | None, str]:
    """A t interval over training seeds when there are two or more; with one seed, Wilson's interval over the
    test queries, which says how far the test sample alone could move the accuracy (not another seed). The t
    interval is cut to [0, 1]: with 2 seeds it is wide, and an accuracy below 0 or above 1 is no possible value."""
    if len(accuracies) >= 2:
        low, high = seed_summary(accuracies)["ci"]
        return [max(0.0, low), min(1.0, high)], "seeds"
    return proportion_interval(round(accuracies[0] * queries), queries), "test queries"


def report(results: dict[str, dict[float, dict[int, dict]]], settings: dict,
           reference_pattern: str = REFERENCE) -> dict:
    """Per pattern (at its chosen rate when several were swept): accuracy and interval per length, ratios to the
    reference, cache and state; ``sweep`` keeps every rate's mean accuracy and final training loss."""
    widths = get_preset(settings["widths"]).arch
    test_examples = get_recall_budget(settings["budget"]).test_examples
    rows = []
    for pattern, by_lr in results.items():
        lr = chosen_rate(by_lr)
        by_seed = by_lr[lr]
        lengths = [str(n) for n in settings["lengths"]]
        accuracy = {n: sum(r["accuracy_by_length"][n] for r in by_seed.values()) / len(by_seed) for n in lengths}
        intervals = {n: accuracy_interval([r["accuracy_by_length"][n] for r in by_seed.values()],
                                          test_examples * (int(n) // settings["kv_ratio"])) for n in lengths}
        stats = analyze(widths.with_pattern(pattern), seq_len=max(settings["lengths"]))
        sweep = {f"{rate:g}": {"mean": sum(r["score"] for r in runs.values()) / len(runs),
                               "train_loss": sum(r.get("train_loss", float("nan")) for r in runs.values()) / len(runs)}
                 for rate, runs in sorted(by_lr.items())}
        rows.append({"pattern": pattern, "seeds": sorted(by_seed), "lr": lr, "sweep": sweep,
                     "lr_at_edge": len(by_lr) > 1 and lr in (min(by_lr), max(by_lr)),
                     "accuracy_by_length": accuracy,
                     "interval_by_length": {n: ci for n, (ci, _) in intervals.items()},
                     "interval_kind": next(iter(intervals.values()))[1],
                     "mean": sum(accuracy.values()) / len(accuracy),
                     "kv_cache_bytes_per_token": stats.kv_cache_bytes_per_token,
                     "cache_bytes_at_longest": stats.cache_bytes_per_sequence,
                     "state_bytes": stats.state_bytes_per_sequence,
                     "seconds": sum(r["seconds"] for r in by_seed.values())})
    reference = next((row for row in rows if row["pattern"] == reference_pattern), None)
    for row in rows:
        row["vs_attention"] = None if reference is None else {
            n: (row["accuracy_by_length"][n] / reference["accuracy_by_length"][n]
                if reference["accuracy_by_length"][n] > 0 else None) for n in row["accuracy_by_length"]}
    return {"settings": settings, "reference": reference_pattern, "patterns": rows,
            "chance": 1.0 / (settings["vocab_size"] - settings["vocab_size"] // 2)}


def rate_text(settings: dict) -> str:
    rates = settings.get("lrs") or [settings["lr"]]
    if len(rates) == 1:
        return f"lr {rates[0]:g}"
    return f"lr chosen per pattern from {', '.join(f'{r:g}' for r in rates)} by final training loss"


def format_table(data: dict) -> str:
    settings = data["settings"]
    lengths = [str(n) for n in settings["lengths"]]
    lines = [
        f"MQAR accuracy by length ({settings['budget']} budget: {settings['steps']} steps of "
        f"{settings['tokens_per_step']:,} tokens per length, 1 pair per {settings['kv_ratio']} tokens, vocab "
        f"{settings['vocab_size']}, {rate_text(settings)}, {settings['widths']} widths, {settings['precision']}, "
        + ("one model trained on the mixture of lengths" if settings.get("mixture", True) else
           "one model per length") + "); "
        f"chance {data['chance']:.4f}; ratio: accuracy / {data['reference']}'s at the same length; 95% intervals "
        + ("over the training seeds" if all(r["interval_kind"] == "seeds" for r in data["patterns"]) else
           "over the test queries where a pattern has one seed (Wilson: the test sample's noise, not a seed's)"),
        "",
        "| pattern | lr | seeds | " + " | ".join(f"{n} ({int(n) // settings['kv_ratio']} pairs)" for n in lengths)
        + " | mean | KV B/token | cache at " + lengths[-1] + " | state | s |",
        "|" + "---|" * (len(lengths) + 8),
    ]
    for row in data["patterns"]:
        cells = []
        for n in lengths:
            ratio = (row["vs_attention"] or {}).get(n)
            ci = row["interval_by_length"][n]
            interval = "" if ci is None else f" [{ci[0]:.3f}, {ci[1]:.3f}]"
            shown_ratio = "" if ratio is None or row["pattern"] == data["reference"] else f" ({ratio:.2f}x)"
            cells.append(f"{row['accuracy_by_length'][n]:.3f}{interval}{shown_ratio}")
        lines.append(f"| `{row['pattern']}` | {row['lr']:g}{' (edge)' if row.get('lr_at_edge') else ''} | "
                     f"{','.join(map(str, row['seeds']))} | "
                     + " | ".join(cells)
                     + f" | {row['mean']:.3f} | {row['kv_cache_bytes_per_token']:,} | "
                     f"{row['cache_bytes_at_longest'] / 1024:,.0f} KiB | {row['state_bytes'] / 1024:,.0f} KiB | "
                     f"{row['seconds']:.0f} |")
    return "\n".join(lines + sweep_table(data))


def sweep_table(data: dict) -> list[str]:
    """Each rate's mean accuracy and final training loss per pattern (nothing when one rate was run)."""
    rates = data["settings"].get("lrs") or []
    if len(rates) < 2:
        return []
    lines = ["", "Learning-rate sweep: mean accuracy over the lengths / final training loss at each rate; the "
             "chosen rate is the lowest loss" + (" ('edge': the grid's lowest or highest rate, so a wider grid may "
                                                  "do better)" if any(r["lr_at_edge"] for r in data["patterns"])
                                                  else ""), "",
             "| pattern | " + " | ".join(f"lr {rate:g}" for rate in rates) + " |", "|" + "---|" * (len(rates) + 1)]
    for row in data["patterns"]:
        cells = []
        for rate in rates:
            point = row["sweep"].get(f"{rate:g}")
            text = "" if point is None else f"{point['mean']:.3f} / {point['train_loss']:.3f}"
            cells.append(f"**{text}**" if point is not None and rate == row["lr"] else text)
        lines.append(f"| `{row['pattern']}` | " + " | ".join(cells) + " |")
    return lines


def plot(data: dict, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lengths = data["settings"]["lengths"]
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    for row in data["patterns"]:
        ax.plot(lengths, [row["accuracy_by_length"][str(n)] for n in lengths], marker="o", label=row["pattern"])
    ax.axhline(data["chance"], color="grey", linestyle=":", label="chance")
    ax.set_xscale("log", base=2)
    ax.set_xticks(lengths, [str(n) for n in lengths])
    ax.set_xlabel(f"sequence length (1 key-value pair per {data['settings']['kv_ratio']} tokens)")
    ax.set_ylabel("MQAR test accuracy")
    ax.set_title(f"Recall vs length, {data['settings']['widths']} widths, {data['settings']['steps']} steps per length",
                 fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        data = run(args)
    except ConfigError as err:  # a bad --lrs, --lengths or budget: one line, a usage error
        print(f"error: {err}", file=sys.stderr)
        return 2
    return finish(args.out, "recall", data, format_table(data), as_json=args.json, plot=plot)


if __name__ == "__main__":
    sys.exit(main())
