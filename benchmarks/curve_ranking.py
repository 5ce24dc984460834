"""Does ranking a halving rung by forecast final score agree with the target better than the rung's snapshot?

Reads recorded rung curves and target losses (``benchmarks/curve_transfer.py`` writes them) and prints, for two
rankings of the patterns, the Spearman correlation with the target's mean loss and its hierarchical bootstrap 95%
interval (``composer.statistics.bootstrap_rank_correlation``):

- **snapshot**: the rung's own score (validation loss after the rung's cooldown), what successive halving ranks
  by today;
- **forecast**: ``search.forecast.forecast``: the rung score moved by the improvement its trunk's power-law fit
  predicts up to the target's trunk end;

- **rung0** (with ``--rung0``): a lower rung's raw score per pattern (e.g. rung 0's, another model and budget),
  so the forecast is judged against the cheapest ranking too;

and the paired difference ``forecast - snapshot`` (and ``forecast - rung0``) of the Spearmans judged on the
*same* bootstrap replicates (same patterns, same seeds drawn: ``composer.statistics.compare_rank_correlations``;
``paired_difference`` pairs per-seed values, not bootstrap replicates, so it does not apply here). It also says whether the target's best
pattern survives ``could_be_best`` at ``--z`` and the attention-share hedge (``hedge_by_share``).

    python benchmarks/curve_ranking.py --input runs/curves/curves.json
    python benchmarks/curve_ranking.py --input runs/curves/curves.json --z 2 --json runs/curves/ranking.json
    python benchmarks/curve_ranking.py --input runs/curves/curves.json --targets cosine.json --rung0 rung0.json

``--seed-sd SD`` adds each candidate's rate-selection optimism (``composer.statistics.selection_optimism`` of its
rung's ``lr_sweep`` at the seed spread ``SD``): the rung keeps the lower of its rates' losses on the tokens it
reports, and the spread of that optimism across candidates is the rank bias the choice adds.

``--targets`` replaces every pattern's target by an independently trained one (``{PATTERN: loss | [loss per
seed]}``; patterns it lacks are left out): the recorded target is the rung's own run continued, which shares
the rung's seed and trunk, so its agreement with the rung is not independent of the rung's noise. ``--rung0``
reads ``{PATTERN: score}`` (lower is better; every pattern needs one).

Input (JSON)::

    {"target_tokens": int,                 # the target's training tokens
     "target_trunk_tokens": int | null,    # where the target's cooldown starts (null: 0.8 * target_tokens)
     "patterns": {
        PATTERN: {"rung": {"score": float,          # rung validation loss after its cooldown
                           "curve": [{"step": int, "tokens": int, "loss": float}, ...],
                           "trunk_tokens": int},    # where the rung's cooldown started
                  "target": float | [float, ...]},  # target loss, or one per seed
        ...}}

``curve_transfer.py``'s per-seed record is read too: ``PATTERN: {SEED: {"rung": {...}, "target": {"score": float,
...}}}``; then the pattern's snapshot is the mean of its seeds' rung scores, its forecast the mean of their
forecasts (sd combined as independent), and its target the per-seed target scores (``target_trunk_tokens``, when
null, is taken from a target's recorded ``trunk_tokens``). Patterns with no finite target are left out.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

_ROOT = Path(__file__).resolve().parent.parent
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

from composer.pattern import attention_share  # noqa: E402
from composer.statistics import (  # noqa: E402
    bootstrap_rank_correlation,
    compare_rank_correlations,
    format_interval,
    selection_optimism,
)
from search.forecast import Forecast, could_be_best, forecast, hedge_by_share  # noqa: E402


def _target_losses(target: Any) -> list[float]:
    """The target's per-seed losses from a float, a list of floats or a recorded ``{"score": ...}``."""
    values = target if isinstance(target, list) else [target]
    out = []
    for value in values:
        if isinstance(value, dict):
            value = value.get("score")
        if value is not None and math.isfinite(float(value)):
            out.append(float(value))
    return out


def load(path: str | Path, targets: dict[str, Any] | None = None) -> dict[str, Any]:
    """The input, normalised to ``{"target_tokens", "target_trunk_tokens", "patterns": {p: {"rungs", "target"}}}``
    (``rungs``: one rung record per seed, ``target``: the finite per-seed target losses); with ``targets``, each
    pattern's target is ``targets[pattern]`` instead (patterns without one are left out)."""
    data = json.loads(Path(path).read_text())
    for key in ("target_tokens", "patterns"):
        if key not in data:
            raise ValueError(f"{path}: no {key!r} (see the input format in this script's docstring)")
    target_trunk = data.get("target_trunk_tokens")
    patterns = {}
    for pattern, entry in data["patterns"].items():
        if "rung" in entry:
            rungs, target = [entry["rung"]], _target_losses(entry.get("target"))
        else:  # curve_transfer.py: {seed: {"rung": ..., "target": ...}}
            seeds = sorted(entry, key=lambda seed: int(seed) if str(seed).lstrip("-").isdigit() else str(seed))
            rungs = [entry[seed]["rung"] for seed in seeds]
            target = [v for seed in seeds for v in _target_losses(entry[seed].get("target"))]
            if target_trunk is None:
                target_trunk = next((entry[s]["target"].get("trunk_tokens") for s in seeds
                                     if isinstance(entry[s].get("target"), dict)
                                     and entry[s]["target"].get("trunk_tokens") is not None), None)
        if targets is not None:
            target = _target_losses(targets.get(pattern))
        if not target:
            print(f"{pattern}: no finite target loss, left out", file=sys.stderr)
            continue
        patterns[pattern] = {"rungs": rungs, "target": target}
    return {"target_tokens": int(data["target_tokens"]), "target_trunk_tokens": target_trunk, "patterns": patterns}


def pattern_forecast(rungs: list[dict[str, Any]], target_tokens: int, target_trunk_tokens: int | None,
                     noise_floor: float, seed: int, fit_from: float = 0.0) -> Forecast:
    """One pattern's forecast: its single rung's, or the mean of its seeds' rungs' with the sds combined as
    independent errors (``sqrt(sum sd^2) / m``) and a normal 95% interval."""
    each = [forecast(rung.get("curve"), rung["score"], rung.get("trunk_tokens"), target_tokens,
                     target_trunk_tokens=target_trunk_tokens, noise_floor=noise_floor, seed=seed,
                     fit_from=fit_from) for rung in rungs]
    if len(each) == 1:
        return each[0]
    m = len(each)
    mean = sum(f.mean for f in each) / m
    sd = math.sqrt(sum(f.sd ** 2 for f in each)) / m
    return Forecast(mean=mean, sd=sd, low=mean - 1.96 * sd, high=mean + 1.96 * sd,
                    method=f"{each[0].method} (mean of {m} seeds)", fit=None,
                    points_used=sum(f.points_used for f in each))


def evaluate(data: dict[str, Any], z: float = 1.0, n_boot: int = 10000, seed: int = 0,
             noise_floor: float = 0.0, fit_from: float = 0.0, rung0: dict[str, float] | None = None,
             seed_sd: float | None = None) -> dict[str, Any]:
    """The report: per-pattern figures, the rankings' Spearman with intervals, the forecast's paired differences
    (against the snapshot, and against ``rung0``'s scores when given), and whether the target's best survives
    ``could_be_best`` and the share hedge."""
    names = list(data["patterns"])
    if len(names) < 3:
        raise ValueError(f"a rank correlation needs at least 3 patterns with a target, got {len(names)}")
    target_tokens, target_trunk = data["target_tokens"], data["target_trunk_tokens"]
    forecasts, rows = {}, []
    for name in names:
        entry = data["patterns"][name]
        fc = pattern_forecast(entry["rungs"], target_tokens, target_trunk, noise_floor, seed, fit_from)
        forecasts[name] = fc
        rows.append({"pattern": name, "attention_share": attention_share(name),
                     "rung_score": sum(float(r["score"]) for r in entry["rungs"]) / len(entry["rungs"]),
                     "forecast": fc.as_dict(), "points_used": fc.points_used,
                     "target": sum(entry["target"]) / len(entry["target"]), "target_seeds": len(entry["target"])})
    losses = [data["patterns"][name]["target"] for name in names]
    scores = {"snapshot": [-row["rung_score"] for row in rows],  # evidence's scores are higher-is-better
              "forecast": [-forecasts[name].mean for name in names]}
    if rung0 is not None:
        missing = [name for name in names if name not in rung0]
        if missing:
            raise ValueError(f"--rung0 has no score for {', '.join(missing)}")
        scores["rung0"] = [-float(rung0[name]) for name in names]
        for row in rows:
            row["rung0_score"] = float(rung0[row["pattern"]])
    methods = {method: bootstrap_rank_correlation(values, losses, n_boot=n_boot, seed=seed)
               for method, values in scores.items()}
    paired = compare_rank_correlations(scores, losses, reference="snapshot", n_boot=n_boot, seed=seed)["forecast"]
    extra: dict[str, Any] = {}
    if seed_sd is not None:
        extra["rate_selection"] = _rate_selection(rows, data, seed_sd)
    if rung0 is not None:
        versus = compare_rank_correlations(scores, losses, reference="rung0", n_boot=n_boot, seed=seed)["forecast"]
        extra.update({"rung0": methods["rung0"],
                      "difference_vs_rung0": {"spearman": versus["diff_vs_reference"], "ci": versus["diff_ci"],
                                              "p_better": versus["p_better"],
                                              "what": "forecast - rung0, on the same bootstrap draws"}})
    kept = could_be_best(forecasts, z=z)
    hedged = [row["pattern"] for row in hedge_by_share(rows)]
    target_best = min(rows, key=lambda row: row["target"])["pattern"]
    return {
        "target_tokens": target_tokens, "target_trunk_tokens": target_trunk, "z": z, "noise_floor": noise_floor,
        "fit_from": fit_from,
        "n_patterns": len(names), "seed": seed,
        "patterns": sorted(rows, key=lambda row: row["target"]),
        "snapshot": methods["snapshot"], "forecast": methods["forecast"],
        "difference": {"spearman": paired["diff_vs_reference"], "ci": paired["diff_ci"],
                       "p_better": paired["p_better"], "what": "forecast - snapshot, on the same bootstrap draws"},
        "could_be_best": kept, "hedge_by_share": hedged, "target_best": target_best,
        "target_best_kept": target_best in kept, "target_best_hedged": target_best in hedged, **extra,
    }


def _rate_selection(rows: list[dict[str, Any]], data: dict[str, Any], seed_sd: float) -> dict[str, Any]:
    """Each row's rate-selection optimism (mean over its seeds' rungs; 0 for a rung with one rate) and its range."""
    for row in rows:
        rungs = data["patterns"][row["pattern"]]["rungs"]
        each = [selection_optimism(list((rung.get("lr_sweep") or {}).values()), seed_sd) for rung in rungs]
        row["rate_optimism"] = sum(each) / len(each)
    values = [row["rate_optimism"] for row in rows]
    return {"seed_sd": seed_sd, "min": min(values), "max": max(values), "spread": max(values) - min(values),
            "mean": sum(values) / len(values),
            "what": "E[min of the rung's rate losses] - min of their means at the seed sd (plug-in, independent "
                    "normal noise); the spread across candidates is the rank bias of choosing the rate on the "
                    "tokens that score it"}


def _signed(value: float | None, digits: int = 3) -> str:
    return "n/a" if value is None else f"{value:+.{digits}f}"


def table(report: dict[str, Any]) -> str:
    """The report as text: a row per pattern (best target first), then the two Spearmans and their difference."""
    lines = ["| pattern | attn share | rung score | forecast | sd | target | points |",
             "|---|---|---|---|---|---|---|"]
    for row in report["patterns"]:
        fc = row["forecast"]
        sd = "inf" if fc["sd"] is None else f"{fc['sd']:.4f}"
        lines.append(f"| {row['pattern']} | {row['attention_share']:.2f} | {row['rung_score']:.4f} | "
                     f"{fc['mean']:.4f} | {sd} | {row['target']:.4f} | {row['points_used']} |")
    lines.append("")
    for method in ("rung0", "snapshot", "forecast"):
        if method not in report:
            continue
        result = report[method]
        lines.append(f"{method:<9} Spearman {_signed(result['spearman'])} "
                     f"95% {format_interval(result['spearman_ci'], 3)} (n_boot {result['n_boot']})")
    diff = report["difference"]
    p_better = "n/a" if diff["p_better"] is None else f"{diff['p_better']:.3f}"
    lines.append(f"forecast - snapshot {_signed(diff['spearman'])} 95% {format_interval(diff['ci'], 3)} "
                 f"(same draws; P(forecast better) {p_better})")
    if "rate_selection" in report:
        chosen = report["rate_selection"]
        lines.append(f"rate selection optimism at seed sd {chosen['seed_sd']:g}: {chosen['min']:.4f} to "
                     f"{chosen['max']:.4f} (spread {chosen['spread']:.4f})")
    if "difference_vs_rung0" in report:
        versus = report["difference_vs_rung0"]
        lines.append(f"forecast - rung0 {_signed(versus['spearman'])} 95% {format_interval(versus['ci'], 3)} "
                     "(same draws)")
    lines.append(f"could be best (z={report['z']:g}): {', '.join(report['could_be_best'])}; "
                 f"target's best {report['target_best']} kept: {'yes' if report['target_best_kept'] else 'no'}")
    lines.append(f"best per attention share: {', '.join(report['hedge_by_share'])}; "
                 f"target's best hedged: {'yes' if report['target_best_hedged'] else 'no'}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--input", required=True, help="recorded rung curves and target losses (JSON)")
    parser.add_argument("--z", type=float, default=1.0, help="could_be_best's width, in sds of the difference")
    parser.add_argument("--json", metavar="OUT", help="also write the report to this JSON file")
    parser.add_argument("--n-boot", type=int, default=10000, help="bootstrap replicates of the rank correlations")
    parser.add_argument("--seed", type=int, default=0, help="seed of every bootstrap (results are reproducible)")
    parser.add_argument("--noise-floor", type=float, default=0.0, help="floor of each forecast's sd (seed noise)")
    parser.add_argument("--fit-from", type=float, default=0.0,
                        help="fit only curve points past this fraction of the rung's trunk (drops the fast start)")
    parser.add_argument("--targets", metavar="JSON",
                        help="independent target losses {PATTERN: loss | [loss per seed]} instead of the recorded")
    parser.add_argument("--rung0", metavar="JSON", help="a lower rung's scores {PATTERN: score}, ranked beside")
    parser.add_argument("--seed-sd", type=float, metavar="SD",
                        help="the seed spread at the rung: each candidate's rate-selection optimism at it")
    args = parser.parse_args(argv)
    try:
        targets = json.loads(Path(args.targets).read_text()) if args.targets else None
        rung0 = json.loads(Path(args.rung0).read_text()) if args.rung0 else None
        report = evaluate(load(args.input, targets), z=args.z, n_boot=args.n_boot, seed=args.seed,
                          noise_floor=args.noise_floor, fit_from=args.fit_from, rung0=rung0, seed_sd=args.seed_sd)
    except (OSError, ValueError) as error:
        parser.exit(2, f"curve_ranking: {error}\n")
    report["input"] = str(args.input)
    print(table(report))
    if args.json:
        from composer.files import atomic_write_json

        atomic_write_json(args.json, report)
        print(f"\nreport in {args.json}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
