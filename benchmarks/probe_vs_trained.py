"""Does the mixers-only recall probe rank layouts as their trained models' own recall does? (issue 48)

The search's ``--min-recall`` may keep the probe (``search.recall``: a pattern's sequence mixers alone, trained on
MQAR) only as an early filter, and only if it predicts the recall of the model that is trained. This script reads
both and says how far they agree:

- the trained models' recall: the copy gain of random spans at the longest distance (``search.trained_recall``'s
  figure) from ``benchmarks/recall_scale.py``'s report (``recall_scale.json``: one seed per layout) or
  ``benchmarks/trained_recall.py``'s (``runs.json`` / a stored ``trained_recall_*.json``: every seed), each with
  its t interval over held-out sequences;
- the probe: accuracy at its longest length per mixer stack and seed (``benchmarks/recall_vs_length.py``'s report,
  or the stored ``benchmarks/results/recall_probe-*.json``). A layout's stack is its 6-layer pattern's mixers
  (``search.recall.mixer_stack``): ``llama`` -> ``AAA``, ``SDDMAS:keep`` -> ``SDDAS``.

The Spearman of the two rankings comes with a 95% bootstrap interval: each draw resamples the probe's seeds of
every stack and draws every trained figure from a normal with its own standard error, so both measurements'
noise is in it. With k layouts the rank correlation can only take a few values and even a perfect agreement of 4
layouts has a permutation p of 1/24: the report says so rather than reading a point value.

A finished search whose finalists were probed (``--min-recall``) and whose last rung measured their trained models'
recall (``recall_sequences``: the cpu ladder's rung 2 does) holds both for every finalist: ``--from-search OUT`` reads
them from its ``leaderboard.json`` (the trained figure there is already averaged over the finalist's seeds, its
interval over the held-out sequences), so the comparison needs no run of its own.

    python benchmarks/probe_vs_trained.py --trained runs/recall_scale/recall_scale.json \\
        --probe benchmarks/results/recall_probe-2026-11-27.json --probe runs/probe-more/runs.json
    python benchmarks/probe_vs_trained.py --from-search runs/amsd-constrained
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np
from report import finish

from composer.cli.format import old_spelling

KIND = "random"  # search.trained_recall.KIND: only a copy predicts random spans
FAMILY_FITS = {"llama": "AMAMAM", "nemotron-h": "SMSAMS", "samba": "SMSMWM"}  # benchmarks/trained_recall.py's
BOOTSTRAP = 4000


def probe_stack(layout: str) -> str:
    """The mixer stack the probe trains for ``layout``: its 6-layer pattern's sequence mixers."""
    from search.recall import mixer_stack

    return mixer_stack(FAMILY_FITS.get(layout) or layout.partition(":")[0])


def _longest(copy_rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    rows = [row for row in copy_rows if row["kind"] == KIND and row.get("gain") is not None]
    return max(rows, key=lambda row: row["distance"]) if rows else None


def _figure(recall: dict[str, Any]) -> dict[str, float] | None:
    """A run's random copy gain at the longest distance with its standard error (from its 95% t interval)."""
    row = _longest(recall.get("copy") or [])
    if row is None:
        return None
    ci = row.get("ci") or row.get("gain_ci")  # a search's compact report says gain_ci
    return {"value": float(row["gain"]), "se": standard_error(ci, row.get("n") or 2), "distance": row["distance"]}


def standard_error(ci: list[float] | None, n: int) -> float:
    """The standard error behind a 95% t interval over ``n`` sequences (0 where there is no interval)."""
    from scipy import stats

    half = (ci[1] - ci[0]) / 2 if ci else 0.0
    return half / float(stats.t.ppf(0.975, max(n - 1, 1)))


def trained_figures(paths: list[Path]) -> dict[str, list[dict[str, float]]]:
    """Layout -> its trained runs' figures (a seed each), from recall_scale or trained_recall reports."""
    figures: dict[str, list[dict[str, float]]] = {}
    for path in paths:
        report = json.loads(path.read_text())
        if "models" in report:  # recall_scale.json: part a is the trained-recall comparison (demo-4m at 512)
            runs = [(m["layout"], m["result"]["recall"]) for m in report["models"]
                    if m.get("part", "a") == "a" and (m.get("result") or {}).get("recall")]
        else:  # trained_recall's runs.json: layout -> seeds -> run
            runs = [(layout, run["recall"]) for layout, entry in report["layouts"].items()
                    for run in entry.get("seeds", {}).values() if run.get("recall")]
        for layout, recall in runs:
            figure = _figure(recall)
            if figure is not None:
                figures.setdefault(layout, []).append(figure)
    return figures


def search_figures(out: Path) -> tuple[dict[str, list[dict[str, float]]], dict[str, list[float]]]:
    """A finished search's finalists, measured both ways: pattern -> its trained figure (the seed-averaged random
    copy gain, ``trained_recall``), and mixer stack -> its probe accuracy at the longest length (``recall``). A
    finalist the probe did not train, or whose trained recall was not measured, is left out of the side it lacks."""
    from search.recall import mixer_stack

    trained: dict[str, list[dict[str, float]]] = {}
    probe: dict[str, list[float]] = {}
    for row in json.loads((out / "leaderboard.json").read_text()):
        figure = row.get("trained_recall") or {}
        if figure.get("value") is not None:
            trained[row["pattern"]] = [{"value": float(figure["value"]), "distance": figure.get("distance"),
                                        "se": standard_error(figure.get("ci"), figure.get("sequences") or 2),
                                        "seeds": len(figure.get("seeds") or [0])}]  # already averaged over them
        if row.get("recall") is not None and row.get("recall_source") != "trained":
            probe.setdefault(mixer_stack(row["pattern"]), []).append(float(row["recall"]))
    return trained, probe


def probe_accuracies(paths: list[Path]) -> dict[str, list[float]]:
    """Mixer stack -> the probe's accuracy at its longest length, a value per seed."""
    accuracies: dict[str, list[float]] = {}
    for path in paths:
        report = json.loads(path.read_text())
        for run in report.get("runs", []):
            by_length = run.get("accuracy_by_length") or {}
            if by_length:
                accuracies.setdefault(run["pattern"], []).append(float(by_length[max(by_length, key=int)]))
    return accuracies


def rowwise_spearman(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Spearman of every row pair of two ``(draws, layouts)`` arrays at once (NaN where a row is constant)."""
    from scipy.stats import rankdata

    rx, ry = rankdata(x, axis=1), rankdata(y, axis=1)
    rx, ry = rx - rx.mean(axis=1, keepdims=True), ry - ry.mean(axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (rx * ry).sum(axis=1) / np.sqrt((rx * rx).sum(axis=1) * (ry * ry).sum(axis=1))


def compare(trained: dict[str, list[dict[str, float]]], probe: dict[str, list[float]],
            n_boot: int = BOOTSTRAP, seed: int = 0) -> dict[str, Any]:
    """The rows both measured and the Spearman of their rankings with its bootstrap interval (module docstring);
    the layouts one side lacks are named with what to run."""
    from composer.statistics import spearman

    rows, missing = [], []
    for layout in sorted(trained):
        stack = probe_stack(layout)
        if stack not in probe:
            missing.append({"layout": layout, "stack": stack})
            continue
        runs = trained[layout]
        rows.append({"layout": layout, "stack": stack, "probe": float(np.mean(probe[stack])),
                     "probe_seeds": probe[stack], "trained": float(np.mean([r["value"] for r in runs])),
                     "trained_se": math.sqrt(sum(r["se"] ** 2 for r in runs)) / len(runs),
                     "trained_seeds": sum(run.get("seeds", 1) for run in runs), "distance": runs[0]["distance"]})
    result: dict[str, Any] = {"rows": rows, "missing_probe": missing, "n": len(rows)}
    if len(rows) < 3:
        result.update(spearman=None, ci=None, verdict=f"{len(rows)} layouts measured both ways: a rank correlation "
                                                        "needs at least 3")
        return result
    rng = np.random.default_rng(seed)
    probes = np.stack([rng.choice(row["probe_seeds"], size=(n_boot, len(row["probe_seeds"]))).mean(axis=1)
                       for row in rows], axis=1)
    trains = np.stack([rng.normal(row["trained"], row["trained_se"] or 1e-12, size=n_boot) for row in rows], axis=1)
    draws = rowwise_spearman(probes, trains)
    draws = draws[np.isfinite(draws)]
    point = spearman([row["probe"] for row in rows], [row["trained"] for row in rows])
    ci = [float(q) for q in np.quantile(draws, [0.025, 0.975])] if draws.size else None
    perfect_p = 1 / math.factorial(len(rows))
    predicts = ci is not None and ci[0] > 0
    result.update(spearman=point, ci=ci, n_boot=int(draws.size), perfect_agreement_p=perfect_p,
                  verdict=("the probe's ranking predicts the trained models' (interval above 0)" if predicts else
                           "the probe's ranking is not shown to predict the trained models' (interval reaches 0 or "
                           f"below; with {len(rows)} layouts even a perfect agreement has permutation p "
                           f"{perfect_p:.2g})"))
    return result


def text_of(result: dict[str, Any]) -> str:
    lines = ["| layout | probe stack | probe accuracy (seeds) | trained random copy gain (seeds) |",
             "|---|---|---|---|"]
    for row in result["rows"]:
        lines.append(f"| {row['layout']} | `{row['stack']}` | {row['probe']:.3f} ({len(row['probe_seeds'])}) | "
                     f"{row['trained']:+.3f} ± {1.96 * row['trained_se']:.3f} at {row['distance']} "
                     f"({row['trained_seeds']}) |")
    if result.get("spearman") is not None:
        lo, hi = result["ci"] or (math.nan, math.nan)
        lines.append(f"\nSpearman {result['spearman']:+.2f}, 95% bootstrap [{lo:+.2f}, {hi:+.2f}] over "
                     f"{result['n']} layouts: {result['verdict']}")
    else:
        lines.append(f"\n{result['verdict']}")
    for gap in result["missing_probe"]:
        lines.append(f"no probe of {gap['layout']}'s stack {gap['stack']}: python benchmarks/recall_vs_length.py "
                     f"--budget probe --patterns {gap['stack']} --seeds 0,1 --out runs/probe-{gap['stack']}")
    return "\n".join(lines)


def plot(result: dict[str, Any], path: Path) -> None:
    """Probe accuracy against the trained models' copy gain, one point per layout (bars: the trained figure's 95%)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 4))
    for row in result["rows"]:
        ax.errorbar(row["probe"], row["trained"], yerr=1.96 * row["trained_se"], fmt="o", capsize=3)
        ax.annotate(row["layout"], (row["probe"], row["trained"]), textcoords="offset points", xytext=(5, 4))
    ax.axhline(0.0, color="grey", lw=0.8)
    ax.set_xlabel("probe: MQAR accuracy at its longest length (mixers alone)")
    ax.set_ylabel("trained model: random copy gain (nats/token)")
    if result.get("spearman") is not None:
        ax.set_title(f"Spearman {result['spearman']:+.2f} [{result['ci'][0]:+.2f}, {result['ci'][1]:+.2f}]")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trained", action="append", default=[], type=Path,
                        help="recall_scale.json or trained_recall's runs.json (repeatable)")
    parser.add_argument("--probe", action="append", default=[], type=Path,
                        help="a recall_vs_length report or benchmarks/results/recall_probe-*.json (repeatable)")
    old_spelling(parser, "--search", parser.add_argument(
        "--from-search", dest="search", type=Path,
        help="a finished composer search's --out whose finalists were probed and their trained recall measured "
             "(leaderboard.json holds both)"))
    parser.add_argument("--out", type=Path, default=Path("runs/probe_vs_trained"))
    args = parser.parse_args(argv)
    if args.search is None and not (args.trained and args.probe):
        parser.error("give --from-search OUT, or both --trained and --probe")
    if args.search is not None and not (args.search / "leaderboard.json").is_file():
        parser.error(f"{args.search}: no leaderboard.json (give the --out of a finished composer search)")
    for path in [*args.trained, *args.probe]:
        if not path.is_file():
            parser.error(f"{path}: no such file (give a report that benchmarks/recall_scale.py, trained_recall.py "
                         "or recall_vs_length.py wrote)")
    trained, probe = trained_figures(args.trained), probe_accuracies(args.probe)
    if args.search is not None:
        from_search = search_figures(args.search)
        trained.update(from_search[0])
        for stack, values in from_search[1].items():
            probe.setdefault(stack, []).extend(values)
    result = compare(trained, probe)
    result.update(trained=[str(p) for p in args.trained], probe=[str(p) for p in args.probe],
                  search=str(args.search) if args.search is not None else None,
                  command="python benchmarks/probe_vs_trained.py " + " ".join(sys.argv[1:] if argv is None else argv))
    return finish(args.out, "probe_vs_trained", result, text_of(result), plot=plot)


if __name__ == "__main__":
    sys.exit(main())
