"""Does the rate a halving ladder's rung 1 chooses stay the better one at its last rung's 4x the tokens?

Why: the last rung of the ``cpu`` ladder continues rung 1's trunks, so it trains each finalist at a rate chosen on a
quarter of its tokens. The better rate falls as training lengthens (Bjorck et al., "Scaling Optimal LR Across
Token Horizons", ICLR 2025, arXiv 2409.19913). Where it does within one ladder, a finalist is scored at a rate
that is not its own good rate, and the search's ranking and its answer carry that.

This script reads a finished search's ``--out`` (``rungs.json``: rung 1's rate sweep of every finalist and the
last rung's score at the rate(s) it continued) and the same finalists trained afresh at the last rung's budget at
the rates the search did not continue (``benchmarks/layout_rate_seed_grid.py --budget rung-cpu-2``: a fresh run of
the last rung's budget scores what the continued run scores, bit for bit on this CPU in bf16, since the data order
and the schedule are shared). For every finalist it prints rung 1's sweep and choice, the last rung's loss at
each rate, and what the carried choice cost; then the search's answer (best new against best known) both with
each finalist at the rate rung 1 chose and at its better rate at the last rung's tokens.

    python benchmarks/layout_rate_seed_grid.py --layouts L1 L2 --budget rung-cpu-2 --widths demo-4m --lrs 1e-3 \\
        --seeds 0 --threads 1 --json runs/rate500k/grid.jsonl
    python benchmarks/rung_rate_horizon.py --search runs/default --grid runs/rate500k/grid.jsonl \\
        --json benchmarks/results/rung_rate_horizon-DATE.json --plot docs/rung_rate_horizon.png
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

_ROOT = Path(__file__).resolve().parent.parent
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

from layout_grid_summary import read_rows  # noqa: E402  (the grid's JSON-lines reader, beside this script)

from composer.files import atomic_write_json  # noqa: E402
from search.evaluation import best_rate  # noqa: E402


def last_rung_losses(row: dict) -> dict[float, float]:
    """The last rung's loss at each rate it trained a finalist at (its sweep, else its one rate)."""
    details = row.get("details") or {}
    sweep = details.get("lr_sweep")
    if sweep:
        return {float(rate): loss for rate, loss in sweep.items() if loss is not None}
    return {float(details.get("lr", row.get("lr"))): row["score"]}


def finalists(search: Path, grid_rows: list[dict]) -> list[dict]:
    """Per finalist of the last rung: rung 1's sweep and choice, the last rung's loss at every rate known (the
    search's own runs, then the grid's fresh runs of the same model at the same seed)."""
    rungs = json.loads((search / "rungs.json").read_text())
    first, last = rungs[1], rungs[-1]
    at_first = {row["pattern"]: row for row in first["leaderboard"]}
    fresh: dict[str, dict[float, float]] = {}
    for row in grid_rows:
        if row.get("seed", 0) == 0 and row.get("score") is not None:
            fresh.setdefault(row["layout"], {}).update({float(r): v for r, v in row["lr_sweep"].items()
                                                        if v is not None})
    out = []
    for row in last["leaderboard"]:
        pattern = row["pattern"]
        layout = (row.get("grown") or {}).get("layout", pattern)
        sweep = {float(r): v for r, v in (at_first[pattern]["details"].get("lr_sweep") or {}).items()}
        chosen = at_first[pattern]["details"]["lr"]
        searched = last_rung_losses(row)
        losses = {**fresh.get(layout, {}), **searched}  # the search's own runs where it has them
        finite = [v for v in sweep.values() if v is not None]
        margin = sorted(finite)[1] - sorted(finite)[0] if len(finite) > 1 else None
        better = best_rate(losses)
        out.append({
            "pattern": pattern, "known": row.get("known"), "layout": layout,
            "rung1_sweep": {f"{r:g}": v for r, v in sorted(sweep.items())}, "rung1_chosen": chosen,
            "rung1_margin": margin,
            "last_rung_losses": {f"{r:g}": v for r, v in sorted(losses.items())},
            "last_rung_trained_by_search": sorted(f"{r:g}" for r in searched),
            "last_rung_better_rate": better,
            "at_chosen": losses.get(chosen), "at_better": losses[better],
            "carried_cost": None if chosen not in losses else losses[chosen] - losses[better],
        })
    return out


def answer(rows: list[dict], key: str) -> dict:
    """Best new against best known, each finalist's loss read at ``key`` (``at_chosen`` or ``at_better``)."""
    scored = [row for row in rows if row[key] is not None]
    new = min((row for row in scored if not row["known"]), key=lambda row: row[key])
    known = min((row for row in scored if row["known"]), key=lambda row: row[key])
    return {"best_new": new["pattern"], "best_new_loss": new[key], "best_known": known["pattern"],
            "best_known_name": known["known"], "best_known_loss": known[key],
            "difference": new[key] - known[key]}


def search_summary(out: Path) -> dict:
    """A search's own answer (its verdict and interval) and each rung's candidates and wall time."""
    best = json.loads((out / "best.json").read_text())
    return {"search": str(out), "answer": best.get("answer"), "recommended": best.get("recommended"),
            "vs_known": best.get("vs_known"),
            "rungs": [{k: r.get(k) for k in ("rung", "budget", "candidates", "wall_seconds")}
                      for r in json.loads((out / "rungs.json").read_text())]}


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    # a run that spiked (0.4 above the rest) would squash the others: such points sit at the top, labelled
    everything = [v for row in rows for v in row["last_rung_losses"].values()]
    top = min(everything) + 0.15
    for row in rows:
        losses = {float(r): v for r, v in row["last_rung_losses"].items()}
        rates = sorted(losses)
        shown = [min(losses[r], top) for r in rates]
        line, = ax.plot(rates, shown, marker="o", label=f"{row['pattern']}"
                        + (f" ({row['known']})" if row["known"] else "") + f", rung 1 chose {row['rung1_chosen']:g}")
        for rate in rates:
            if losses[rate] > top:
                ax.annotate(f"{losses[rate]:.3f} (off scale)", (rate, top), textcoords="offset points",
                            xytext=(-70, -12), fontsize=7, color=line.get_color())
        chosen = row["rung1_chosen"]
        if chosen in losses:
            ax.scatter([chosen], [min(losses[chosen], top)], s=90, facecolors="none", edgecolors="black", zorder=3)
    ax.set_ylim(min(everything) - 0.01, top + 0.01)
    ax.set_xscale("log")
    ax.set_xlabel("learning rate (circled: the rate rung 1 chose and the last rung continued)")
    ax.set_ylabel("validation loss at the last rung (500K tokens)")
    ax.set_title("Rung 1's rate at the last rung's 4x tokens")
    ax.legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--search", required=True, help="a finished halving search's --out (its rungs.json)")
    parser.add_argument("--grid", nargs="*", default=[], help="layout_rate_seed_grid.py JSONL files: the finalists "
                                                              "at the last rung's budget at other rates")
    parser.add_argument("--after", help="the --out of the same search run again with the fix, to set beside")
    parser.add_argument("--wall-seconds", nargs="+", type=float, default=[],
                        help="the whole search's wall time (e.g. /usr/bin/time's), and the --after search's")
    parser.add_argument("--json", help="write the record here")
    parser.add_argument("--plot", help="write the figure here (PNG)")
    args = parser.parse_args(argv)
    search = Path(args.search)
    if not (search / "rungs.json").is_file():
        parser.error(f"{search / 'rungs.json'} does not exist; --search takes a finished search's --out")
    grid_rows = read_rows([Path(path) for path in args.grid])
    rows = finalists(search, grid_rows)
    print(f"{'pattern':<8}{'known':<16}{'rung 1 sweep':<26}{'chose':>7}  {'last rung losses':<32}{'better':>8}"
          f"{'cost':>8}")
    for row in rows:
        sweep = ", ".join(f"{r}: {v:.4f}" for r, v in row["rung1_sweep"].items() if v is not None)
        last = ", ".join(f"{r}: {v:.4f}" for r, v in row["last_rung_losses"].items())
        cost = "-" if row["carried_cost"] is None else f"{row['carried_cost']:+.4f}"
        print(f"{row['pattern']:<8}{row['known'] or '':<16}{sweep:<26}{row['rung1_chosen']:>7g}  {last:<32}"
              f"{row['last_rung_better_rate']:>8g}{cost:>8}")
    carried, better = answer(rows, "at_chosen"), answer(rows, "at_better")
    for name, said in (("at rung 1's rate", carried), ("at the better rate", better)):
        print(f"answer {name}: best new {said['best_new']} {said['best_new_loss']:.4f} against best known "
              f"{said['best_known_name']} {said['best_known']} {said['best_known_loss']:.4f}: "
              f"{said['difference']:+.4f}")
    moved = [row for row in rows if row["carried_cost"] not in (None, 0.0)]
    print(f"{len(moved)} of {len(rows)} finalists were better at another rate at the last rung's tokens")
    record = {"benchmark": "rung_rate_horizon", "date": time.strftime("%Y-%m-%d"),
              "command": "python benchmarks/rung_rate_horizon.py " + " ".join(argv if argv is not None
                                                                               else sys.argv[1:]),
              "search": str(search), "finalists": rows, "answer_at_rung1_rate": carried,
              "answer_at_better_rate": better}
    record["before"] = search_summary(search)
    if args.after:
        record["after"] = {**search_summary(Path(args.after)), "last_rung": finalists(Path(args.after), [])}
    for name, seconds in zip(("before", "after"), args.wall_seconds):
        if name in record:
            record[name]["wall_seconds"] = seconds
    if args.json:
        atomic_write_json(Path(args.json), record)
    if args.plot:
        plot(rows, Path(args.plot))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
