"""Does bf16 move the search's ranking? MAD scores of fixed patterns in fp32 and under bf16 autocast.

`precision auto` trains search candidates under bf16 autocast where the hardware computes bf16 natively. That is
only acceptable if the ranking the search acts on stays put. This script scores the same patterns with the same
seed in both precisions, exactly as `composer search` does (`search.mad.evaluate_pattern`), and prints the
Spearman and Kendall correlation between the two score lists with a bootstrap 95% interval over patterns, the
largest score change, and the time per candidate in each precision (ratio bf16 / fp32 last).

    python benchmarks/mad_precision.py                          # 12 patterns at the cpu budget (~10 min, 2 cores)
    python benchmarks/mad_precision.py --budget smoke --patterns AAMMMM,AMAMAM,MMMMAA
    python benchmarks/mad_precision.py --json

Scores are written to --out after every evaluation and reused on a re-run.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

_ROOT = Path(__file__).resolve().parent.parent
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

from composer.files import atomic_write_json  # noqa: E402
from composer.precision import describe_bf16_support  # noqa: E402
from composer.statistics import bootstrap_rank_correlation, format_interval  # noqa: E402

# the proxy-transfer benchmark's 12 patterns: spread over the default 6-layer A/M space
DEFAULT_PATTERNS = ("AAMMMM", "AMAMAM", "MAMAMA", "MMAAMM", "MMMMAA", "AAAMMM", "AMMMMM", "MMMMAM", "MAMMAA",
                    "AMMAMM", "AAAAAM", "MMMMMM")


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--patterns", default=",".join(DEFAULT_PATTERNS))
    parser.add_argument("--budget", default="cpu", help="MAD budget (default cpu, the search default)")
    parser.add_argument("--widths", default="search-1m")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--n-boot", type=int, default=10_000)
    parser.add_argument("--out", default="runs/mad-precision/scores.json")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    return parser.parse_args(argv)


def main(argv=None) -> int:
    from search.mad import evaluate_pattern

    args = parse_args(argv)
    patterns = [p.strip() for p in args.patterns.split(",") if p.strip()]
    out = Path(args.out)
    key = f"{args.budget}/{args.widths}/seed{args.seed}"
    stored = json.loads(out.read_text()) if out.exists() else {}
    scores = stored.setdefault(key, {"fp32": {}, "bf16": {}})
    total = 2 * len(patterns)
    for done, (pattern, precision) in enumerate(((p, q) for p in patterns for q in ("fp32", "bf16")), start=1):
        if pattern in scores[precision]:
            continue
        result = evaluate_pattern(pattern, widths=args.widths, budget=args.budget, seed=args.seed,
                                  precision=precision)
        scores[precision][pattern] = {"score": result.score, "seconds": result.seconds,
                                      "accuracies": result.accuracies}
        out.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_json(out, stored)
        print(f"[{done:>3}/{total}] {pattern} {precision}: {result.score:.4f} ({result.seconds:.1f} s)",
              file=sys.stderr, flush=True)

    fp32 = [scores["fp32"][p]["score"] for p in patterns]
    bf16 = [scores["bf16"][p]["score"] for p in patterns]
    # agreement of the bf16 ranking with the fp32 one: fp32 scores play the target (negated: "lower is better")
    agreement = bootstrap_rank_correlation(bf16, [[-s] for s in fp32], n_boot=args.n_boot)
    seconds = {q: statistics.median(scores[q][p]["seconds"] for p in patterns) for q in ("fp32", "bf16")}
    report = {
        "budget": args.budget, "widths": args.widths, "seed": args.seed, "hardware": describe_bf16_support(),
        "patterns": patterns, "fp32": fp32, "bf16": bf16,
        "spearman": agreement["spearman"], "spearman_ci": agreement["spearman_ci"],
        "kendall": agreement["kendall"], "kendall_ci": agreement["kendall_ci"],
        "max_abs_score_change": max(abs(a - b) for a, b in zip(fp32, bf16)),
        "same_best": max(patterns, key=dict(zip(patterns, fp32)).get) == max(patterns, key=dict(zip(patterns, bf16)).get),
        "median_seconds": seconds, "speedup_bf16_over_fp32": seconds["fp32"] / seconds["bf16"],
    }
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"MAD {args.budget} budget at {args.widths}, seed {args.seed}; {report['hardware']}")
    print(f"{'pattern':<10} {'fp32':>8} {'bf16':>8} {'change':>8}")
    for pattern, a, b in zip(patterns, fp32, bf16):
        print(f"{pattern:<10} {a:>8.4f} {b:>8.4f} {b - a:>+8.4f}")
    print(f"Spearman(bf16, fp32) {report['spearman']:.3f} {format_interval(report['spearman_ci'], 3)}; "
          f"Kendall {report['kendall']:.3f} {format_interval(report['kendall_ci'], 3)}; "
          f"largest change {report['max_abs_score_change']:.4f}; same best pattern: {report['same_best']}")
    print(f"median s/candidate: fp32 {seconds['fp32']:.1f}, bf16 {seconds['bf16']:.1f}; "
          f"ratio bf16 speed / fp32 speed = {report['speedup_bf16_over_fp32']:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
