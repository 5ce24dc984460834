"""Learning curves at a halving rung and the score the same run reaches at the target, continued (issue 36).

For each pattern and seed: the ``cpu`` ladder's middle rung as the search trains it (stacked to ``demo-4m``, 125K
tokens under warmup-stable-decay with a fixed warmup, each rate of its grid, a curve of ``--curve-points``
validations spaced in log-tokens), its chosen rate's trunk kept, then the last rung continuing that trunk to
500K tokens and cooling down: the target's score of the same run, paying only the tokens it adds. The output is
``benchmarks/curve_ranking.py``'s input (rung curve and score, target score per seed), so ranking methods can be
compared on it without training again.

    python benchmarks/curve_transfer.py --patterns MMAMMM,AMAMAM --seeds 0 --out runs/curves   # ~5 min/pattern
    python benchmarks/curve_transfer.py --set am --seeds 0,1 --out runs/curves-am
    python benchmarks/curve_transfer.py --out runs/curves-am --plot docs/curves.png   # plot what is recorded

Resumable: every finished (pattern, seed) is in ``--out/curves.json`` and is not trained again; trunks are kept in
``--out/trunks`` as a search keeps them.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

SETS = {
    # the 9 A/M patterns of README's default search end to end (docs/search.md) and 3 more, 1 to 5 attention layers
    "am": ("MMAMMM", "MAMMMM", "MMAAMM", "MMAMMA", "MAAMMM", "MAMAMM", "MMAAMA", "AMAMAM", "MAAAMA",
           "AAMAMM", "AMAAMA", "AAAMAA"),
    # the 12 AMSD patterns of the rung-transfer table (transfer_default_search_amsd-2026-11-26.json)
    "amsd": ("SSSSMS", "SMDSDA", "SSSMDA", "SMSDDS", "SMSAMS", "SSSDSS", "SMSMAS", "SMSMAM", "SMSAMM", "SDAAAM",
             "AMAMAM", "AAMMMM"),
}


def budgets(rung_tokens: int, target_tokens: int, curve_points: int, lrs: tuple[float, ...], warmup: int):
    from search.lm import LMBudget

    common = dict(seq_len=128, batch_size=16, extrapolate_to="demo-4m", schedule="wsd", warmup=warmup,
                  curve_points=curve_points)
    rung = LMBudget("curve-rung", rung_tokens, lrs=lrs, keeps_trunk=True, **common)
    target = LMBudget("curve-target", target_tokens, lrs=lrs, continues=True, **common)
    return rung, target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--patterns", help="comma-separated 6-layer patterns")
    parser.add_argument("--set", choices=sorted(SETS), help="a named set of patterns")
    parser.add_argument("--seeds", default="0")
    parser.add_argument("--rung-tokens", type=int, default=125_000)
    parser.add_argument("--target-tokens", type=int, default=500_000)
    parser.add_argument("--lrs", default="1e-3,2e-3")
    parser.add_argument("--warmup", type=int, default=6, help="warmup steps, the same for every budget")
    parser.add_argument("--curve-points", type=int, default=8)
    parser.add_argument("--rung-only", action="store_true",
                        help="train the rung and record its curve, not the continued target (rank against an "
                             "independently trained target with curve_ranking.py --targets)")
    parser.add_argument("--out", required=True)
    parser.add_argument("--plot", metavar="PNG", help="only plot the curves recorded in --out (seed 0) and exit")
    args = parser.parse_args(argv)
    if args.plot:
        plot(json.loads((Path(args.out) / "curves.json").read_text()), Path(args.plot))
        return 0
    from composer.files import atomic_write_json
    from search.lm import LanguageModelEvaluator

    patterns = args.patterns.split(",") if args.patterns else list(SETS[args.set or "am"])
    seeds = [int(seed) for seed in args.seeds.split(",")]
    lrs = tuple(float(rate) for rate in args.lrs.split(","))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    record_path = out / "curves.json"
    rung, target = budgets(args.rung_tokens, args.target_tokens, args.curve_points, lrs, args.warmup)
    record = json.loads(record_path.read_text()) if record_path.exists() else {}
    record.update({"what": "issue 36: rung curves (demo-4m, wsd) and the target score continued from their trunks",
                   "rung": dataclasses.asdict(rung), "target": dataclasses.asdict(target),
                   "target_tokens": args.target_tokens,
                   "target_trunk_tokens": record.get("target_trunk_tokens"), "patterns": record.get("patterns", {})})
    evaluate_rung = LanguageModelEvaluator(rung, trunks=out / "trunks")
    evaluate_target = LanguageModelEvaluator(target, trunks=out / "trunks")
    for pattern in patterns:
        for seed in seeds:
            entry = record["patterns"].setdefault(pattern, {})
            if str(seed) in entry and (args.rung_only or entry[str(seed)].get("target") is not None):
                continue
            started = time.perf_counter()
            first = evaluate_rung(pattern, seed, lambda *a, **k: None)
            middle = time.perf_counter()
            entry[str(seed)] = {"rung": {"score": first.score, **first.details, "seconds": middle - started},
                                "target": None}
            if not args.rung_only:
                last = evaluate_target(pattern, seed, lambda *a, **k: None)
                entry[str(seed)]["target"] = {"score": last.score, **last.details,
                                              "seconds": time.perf_counter() - middle}
                record["target_trunk_tokens"] = last.details.get("trunk_tokens")
            atomic_write_json(record_path, record)
            reached = "" if args.rung_only else (f", target {entry[str(seed)]['target']['score']:.4f} "
                                                 f"({time.perf_counter() - middle:.0f} s)")
            print(f"{pattern} seed {seed}: rung {first.score:.4f} (lr {first.details['lr']:g}, "
                  f"{middle - started:.0f} s){reached}", flush=True)
    return 0


def plot(record: dict, path: Path) -> Path:
    """Each pattern's run to the target (seed 0): its curve on the held-out slice against tokens, coloured by its
    attention layers, with the rung's score (x) and the target's (o) on the full validation set, and the rung's
    cooldown start marked: where curves cross after it, the rung's snapshot misranks them."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from composer.pattern import attention_share, n_layers

    figure, ax = plt.subplots(figsize=(8, 5))
    colours = plt.get_cmap("viridis")
    trunk = None
    for pattern, seeds in sorted(record["patterns"].items()):
        entry = seeds.get("0")
        if entry is None or entry.get("target") is None:  # a --rung-only record has no run to the target
            continue
        share = attention_share(pattern)
        colour = colours(share)
        attention = round(share * n_layers(pattern))
        points = sorted(entry["target"]["curve"], key=lambda point: point["tokens"])
        ax.plot([p["tokens"] for p in points], [p["loss"] for p in points], color=colour, linewidth=1.2,
                label=f"{pattern} ({attention} attn)")
        ax.plot([entry["rung"]["tokens"]], [entry["rung"]["score"]], "x", color=colour)
        ax.plot([entry["target"]["tokens"]], [entry["target"]["score"]], "o", color=colour)
        trunk = entry["rung"].get("trunk_tokens") or trunk
    if trunk:
        ax.axvline(trunk, color="grey", linestyle=":", linewidth=1)
    ax.set_xscale("log")
    ax.set_xlabel("training tokens (demo-4m, wsd; rung 1 cools down at the dotted line)")
    ax.set_ylabel("validation loss (curve slice; x rung score, o target score)")
    ax.set_title("Rung-1 curves continued to the target")
    ax.legend(fontsize=7, ncol=2)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path


if __name__ == "__main__":
    sys.exit(main())
