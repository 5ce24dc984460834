"""Layouts trained as a search's rung trains them, over a grid of rates and seeds: whether a gap between two
layouts at one rate and one seed is theirs, or the rate's and the seed's.

Why: the default search scored the paper's ``AAMMMM`` 0.29 behind Llama's alternation at its rung 1 (issue 71), on
one seed (the search's) and the rung's two rates. This script trains each ``--layouts`` entry (a layout of the
``--widths`` preset's size, trained as given) through the search's own ``lm`` evaluator call at ``--budget``'s
tokens, schedule and batch, once per ``--seeds`` entry, at every ``--lrs`` rate (default: the budget's own), and
writes each run's loss, each seed's best rate and the curves. Validation is the same held-out text for every seed.
Each finished (layout, seed) is appended to ``--json`` (JSON lines) as it ends, so a killed run keeps its rows and
a rerun with the same file trains only the missing ones.

Issue 71's controlled test adds two things. ``--match-params REFERENCE`` trains every layout at the width (a
``--widths`` preset scaled to another ``d_model``, :func:`matched_widths`) whose non-embedding parameters are
nearest REFERENCE's at ``--widths``, so that layouts of other attention counts or depths compare at equal
parameters, not equal widths. ``--diagnostics STEPS`` records every run's per-layer gradient norms and per-head
attention entropy over its first STEPS steps (``composer.training.diagnostics.LayerDiagnostics``) in its row.

    python benchmarks/layout_rate_seed_grid.py --layouts AAMMMMAAMMMMAM AMAMAMAMAMAMAM --lrs 2.5e-4,5e-4,1e-3,2e-3 \\
        --seeds 0 --precision bf16 --json runs/grid.jsonl
    python benchmarks/layout_rate_seed_grid.py --layouts AAMMMMAAMMMMAM AMAMAMAMAMAMAM AMMAMMAMMAMMAM AAMMMMAAMMMM \\
        --match-params AAMMMMAAMMMMAM --diagnostics 300 --lrs 5e-4,1e-3,2e-3 --seeds 0,1,2 --json runs/controlled.jsonl
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


def done(path: Path) -> set[tuple[str, int, str, tuple[float, ...], str]]:
    """The (layout, seed, precision, rates, budget name) already in ``path``."""
    if not path.is_file():
        return set()
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return {(r["layout"], r["seed"], r["precision"], tuple(sorted(float(k) for k in r["lr_sweep"])), r["budget"])
            for r in rows}


def matched_widths(layout: str, reference: str, widths: str) -> str:
    """The preset (``widths`` scaled, ``composer.presets.scaled_name``) at which ``layout`` has the non-embedding
    parameters nearest ``reference``'s at ``widths``: growth's own width match at the layout's own depth
    (``scaling.extrapolate.grow_to_depth``), which refuses a layout no width brings within its tolerance."""
    from composer.accounting import non_embedding_params
    from composer.pattern import parse_pattern
    from composer.presets import get_preset, scaled_name
    from scaling.extrapolate import grow_to_depth

    goal = non_embedding_params(get_preset(widths).arch.with_pattern(reference))
    grown = grow_to_depth(layout, widths, len(parse_pattern(layout)), target_params=goal)
    return scaled_name(widths, grown.arch.d_model)


def train(layout: str, seed: int, budget, widths: str, precision: str, diagnostics: int = 0) -> dict:
    from composer.accounting import non_embedding_params
    from composer.presets import get_preset
    from search.evaluators import make_evaluator

    evaluator = make_evaluator("lm", budget, widths, None, None, precision, False, None)
    records = {}
    if diagnostics:
        from composer.training.diagnostics import LayerDiagnostics

        def run_callbacks(pattern: str, lr: float, run_seed: int) -> list:
            records[str(float(lr))] = LayerDiagnostics(steps=diagnostics)
            return [records[str(float(lr))]]

        evaluator.run_callbacks = run_callbacks
    started = time.perf_counter()
    result = evaluator(layout, seed, None)
    details = result.details or {}
    row = {"layout": layout, "seed": seed, "precision": precision, "budget": budget.name, "widths": widths,
           "non_embedding_params": non_embedding_params(get_preset(widths).arch.with_pattern(layout)),
           # one rate alone: the evaluator keeps no sweep, its loss is the score
           "score": result.score, "lr": details.get("lr"),
           "lr_sweep": details.get("lr_sweep") or {str(float(details.get("lr", budget.lrs[0]))): result.score},
           "seconds": time.perf_counter() - started, "curve": details.get("curve")}
    if diagnostics:
        row["diagnostics"] = {lr: callback.record for lr, callback in records.items()}
    return row


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
    parser.add_argument("--match-params", metavar="REFERENCE",
                        help="train each layout at the width whose non-embedding parameters are nearest REFERENCE's")
    parser.add_argument("--warmup", type=float, help="the schedule's warmup (steps, or a fraction) instead of the "
                        "budget's: whether a longer warmup removes an early instability")
    parser.add_argument("--diagnostics", type=int, default=0, metavar="STEPS",
                        help="record per-layer gradient norms and per-head attention entropy over the first STEPS")
    args = parser.parse_args(argv)

    import torch

    from search.lm import get_lm_budget

    torch.set_num_threads(args.threads)
    base = get_lm_budget(args.budget)
    lrs = tuple(float(x) for x in args.lrs.split(",")) if args.lrs else base.lrs
    # trained as given at --widths, every rate from scratch: no growth, no trunk kept, no edge extended
    budget = dataclasses.replace(base, name=f"{base.name}-grid", lrs=lrs, extrapolate_to=None, keeps_trunk=False,
                                 continues=False, extend_edge=False)
    if args.warmup is not None:
        warmup = int(args.warmup) if args.warmup >= 1 else args.warmup
        budget = dataclasses.replace(budget, name=f"{budget.name}-warmup{warmup:g}", warmup=warmup)
    path = Path(args.json)
    path.parent.mkdir(parents=True, exist_ok=True)
    have = done(path)
    for seed in (int(s) for s in args.seeds.split(",")):
        for layout in args.layouts:
            if (layout, seed, args.precision, tuple(sorted(lrs)), budget.name) in have:
                continue
            widths = matched_widths(layout, args.match_params, args.widths) if args.match_params else args.widths
            row = train(layout, seed, budget, widths, args.precision, args.diagnostics)
            with path.open("a") as file:
                file.write(json.dumps(row) + "\n")
            sweep = ", ".join(f"{float(k):g}: {v:.4f}" for k, v in sorted(row["lr_sweep"].items(),
                                                                         key=lambda kv: float(kv[0])))
            print(f"{layout} seed {seed} {args.precision}: {sweep} ({row['seconds']:.0f} s)", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
