"""Layouts trained as a search's rung trains them, over a grid of rates and seeds: whether a gap between two
layouts at one rate and one seed is theirs, or the rate's and the seed's.

Why: the default search scored the paper's ``AAMMMM`` 0.29 behind Llama's alternation at its rung 1 (issue 71), on
one seed (the search's) and the rung's two rates. This script trains each ``--layouts`` entry (a layout of the
``--widths`` preset's size, trained as given) through the search's own ``lm`` evaluator call at ``--budget``'s
tokens, schedule and batch, once per ``--seeds`` entry, at every ``--lrs`` rate (default: the budget's own), and
writes each run's loss, each seed's best rate and the curves. Validation is the same held-out text for every seed.
Each finished (layout, seed) is appended to ``--json`` (JSON lines) as it ends, so a killed run keeps its rows and
a rerun with the same file trains only the missing ones.

    python benchmarks/layout_rate_seed_grid.py --layouts AAMMMMAAMMMMAM AMAMAMAMAMAMAM --lrs 2.5e-4,5e-4,1e-3,2e-3 \\
        --seeds 0 --precision bf16 --json runs/grid.jsonl
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

_ROOT = Path(__file__).resolve().parent.parent
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))


def done(path: Path) -> set[tuple[str, int, str, tuple[float, ...]]]:
    """The (layout, seed, precision, rates) already in ``path``."""
    if not path.is_file():
        return set()
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return {(r["layout"], r["seed"], r["precision"], tuple(sorted(float(k) for k in r["lr_sweep"]))) for r in rows}


def train(layout: str, seed: int, budget, widths: str, precision: str) -> dict:
    from search.evaluators import make_evaluator

    evaluator = make_evaluator("lm", budget, widths, None, None, precision, False, None)
    started = time.perf_counter()
    result = evaluator(layout, seed, None)
    details = result.details or {}
    return {"layout": layout, "seed": seed, "precision": precision, "budget": budget.name, "widths": widths,
            # one rate alone: the evaluator keeps no sweep, its loss is the score
            "score": result.score, "lr": details.get("lr"),
            "lr_sweep": details.get("lr_sweep") or {str(float(details.get("lr", budget.lrs[0]))): result.score},
            "seconds": time.perf_counter() - started, "curve": details.get("curve")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layouts", nargs="+", required=True, help="layouts of the preset's size, trained as given")
    parser.add_argument("--budget", default="rung-cpu-1", help="the lm budget whose tokens and schedule each run has")
    parser.add_argument("--widths", default="demo-4m")
    parser.add_argument("--lrs", help="comma-separated rates (default: the budget's)")
    parser.add_argument("--seeds", default="0", help="comma-separated seeds")
    parser.add_argument("--precision", default="bf16")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--json", required=True, help="JSON lines, appended a row per layout and seed")
    args = parser.parse_args(argv)

    import torch

    from search.lm import get_lm_budget

    torch.set_num_threads(args.threads)
    base = get_lm_budget(args.budget)
    lrs = tuple(float(x) for x in args.lrs.split(",")) if args.lrs else base.lrs
    # trained as given at --widths, every rate from scratch: no growth, no trunk kept, no edge extended
    budget = dataclasses.replace(base, name=f"{base.name}-grid", lrs=lrs, extrapolate_to=None, keeps_trunk=False,
                                 continues=False, extend_edge=False)
    path = Path(args.json)
    path.parent.mkdir(parents=True, exist_ok=True)
    have = done(path)
    for seed in (int(s) for s in args.seeds.split(",")):
        for layout in args.layouts:
            if (layout, seed, args.precision, tuple(sorted(lrs))) in have:
                continue
            row = train(layout, seed, budget, args.widths, args.precision)
            with path.open("a") as file:
                file.write(json.dumps(row) + "\n")
            sweep = ", ".join(f"{float(k):g}: {v:.4f}" for k, v in sorted(row["lr_sweep"].items(),
                                                                         key=lambda kv: float(kv[0])))
            print(f"{layout} seed {seed} {args.precision}: {sweep} ({row['seconds']:.0f} s)", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
