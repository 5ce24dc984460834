"""Sampler sample efficiency: trials GP, TPE and random need to find the exhaustive top-3 of a small space.

The space is ``--layers`` layers (default 8) over the primitives ``AM``: 2**8 = 256 patterns (64 at 6 layers),
small enough to score every pattern and know the true best and top-3. Every pattern is scored by a cheap,
deterministic evaluator (``ProxyLandscape`` below, loadable as ``sampler_efficiency:make``) whose landscape
mimics what MAD rewards; each sampler then runs through the real search engine
(``search.run.run_search(SearchConfig(evaluator="sampler_efficiency:make", sampler=gp|tpe|random, ...))``,
``prune=False``, ``wandb="off"``, a fresh temporary ``out`` per run) for ``--trials`` trials per seed, and the
study's trials are read back in order to count:

* **trials to best**: the 1-based number of the first trial that proposed the exhaustive best pattern;
* **trials to top-3**: the trial by which all three of the exhaustive top-3 had been proposed;

or "not found within N". Trials are Optuna trials, i.e. the engine's ``--trials`` budget: a repeated pattern
is answered from the study (not re-evaluated) but still uses up a trial. The distinct evaluations made by then
are reported alongside (``evals``), and the exhaustive rank of the best pattern each run ended with.

Summary per sampler over the seeds: median trials to best / top-3 (a run that did not find it counts as
"more than N", so a median over mostly such runs prints as ``>N``), the found-rate within N, and the
*restricted mean* E[min(T, N+1)] (not-found runs count N+1: always defined, a lower bound of the true mean).
The peer is the random sampler, run through the engine on the same seeds: GP and TPE are reported as the ratio
of their median (and restricted mean) trials to random's, lower is better. When random's median is itself
censored (">N") the median ratio is an upper bound (``<x``). Because a handful of censored random runs says
little, the random sampler's *exact* figures are printed and used as a second reference: it draws every layer
uniformly, so each trial is a uniform draw of the 2**L patterns (``random_expected``: geometric to the best,
inclusion-exclusion for the top-3; means 2**L and 2**L * (1 + 1/2 + 1/3) trials).

Driver: the real engine end to end (``run_search``: SQLite storage, the engine's ``make_sampler``, repeats answered
from the study, leaderboard, plots), not Optuna directly. Its overhead is about 0.1 s per trial plus about 2 s per
search (storage creation, plots) on 2 cores, when the per-run folders live on tmpfs (``/dev/shm``, the default
where writable: SQLite commits every trial and an fsync on disk costs more than everything else); GPSampler's own
suggestion time (about 0.4-0.6 s per trial at 60 trials) dominates the run.

Run from the repository root::

    python benchmarks/sampler_efficiency.py                       # 8 layers, 5 seeds, 60 trials: 2.5-4 min on 2 cores
    python benchmarks/sampler_efficiency.py --layers 6 --trials 40
    python benchmarks/sampler_efficiency.py --json                # one JSON object instead of the tables
    python benchmarks/sampler_efficiency.py --landscape           # print the exhaustive ranking and exit

The landscape (``ProxyLandscape``), for a pattern of n layers with k attention layers at positions a_1 < ... < a_k
(0-based) and m = n - k MLP layers; each term lies in [0, 1]:

* ``recall`` (weight 0.40): in-context recall needs attention, and it must come early so later layers can use
  what it retrieved: 0 without attention, else ``gate * (1 - exp(-k / 1.5))`` with ``gate`` 1 if the first
  attention layer is in the first half (a_1 < n/2) and 0.35 otherwise. The benefit of more attention
  saturates.
* ``induction`` (0.15): induction heads are a composition of two attention layers, easier the closer they are:
  ``1 / min gap between consecutive attention layers`` (0 with fewer than two).
* ``capacity`` (0.30): memorisation / MLP capacity: ``min(1, m / (2n/3)) ** 1.5``, full while MLPs hold at least
  two thirds of the layers, i.e. a penalty once attention exceeds about a third of them.
* ``placement`` (0.15): attention early, MLP late: the mean over layers i of ``1 - i/(n-1)`` for an attention
  layer and ``i/(n-1)`` for an MLP layer.
* ``noise``: a deterministic pseudo-noise in [-0.01, 0.01) from SHA-256 of the pattern (stands in for training
  noise; fixed per pattern, independent of the seed, so the exhaustive ranking is well defined).

score = 0.40 recall + 0.15 induction + 0.30 capacity + 0.15 placement + noise (higher is better, like MAD's mean
accuracy). Its optimum at 6 layers is ``AAMMMM``, the paper's stacked winner. It is not separable per layer: a
least-squares fit of an additive per-layer model explains about 17% of its variance at 8 layers (31% at 6), a
model with all pairwise terms about 75% (85%); the additive fit's own argmax is not the optimum.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import itertools
import json
import math
import os
import platform
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

# Plain script, not a package: the repository root (for ``search``) and this folder (so the engine can import
# ``sampler_efficiency:make``) go on the import path.
_HERE = Path(__file__).resolve().parent
_ROOT = _HERE.parent
for _path in (str(_ROOT), str(_HERE)):
    if _path not in sys.path:
        sys.path.insert(0, _path)

from search.evaluators import Evaluation

EVALUATOR = "sampler_efficiency:make"
PEER = "random"
WEIGHTS = {"recall": 0.40, "induction": 0.15, "capacity": 0.30, "placement": 0.15}
NOISE = 0.02  # peak to peak


# ----------------------------------------------------------------------------------------------- the landscape


def landscape_terms(pattern: str) -> dict[str, float]:
    """The terms of the proxy landscape for ``pattern`` (a string over ``A``/``M``); see the module docstring."""
    n = len(pattern)
    attention = [i for i, symbol in enumerate(pattern) if symbol == "A"]
    k, m = len(attention), n - len(attention)
    if k == 0:
        recall = 0.0
    else:
        gate = 1.0 if attention[0] < n / 2 else 0.35
        recall = gate * (1.0 - math.exp(-k / 1.5))
    induction = 1.0 / min(b - a for a, b in itertools.pairwise(attention)) if k >= 2 else 0.0
    capacity = min(1.0, m / (2 * n / 3)) ** 1.5
    if n > 1:
        placement = sum((1 - i / (n - 1)) if s == "A" else i / (n - 1) for i, s in enumerate(pattern)) / n
    else:
        placement = 0.5
    digest = int.from_bytes(hashlib.sha256(pattern.encode()).digest()[:8], "big") / 2**64
    return {"recall": recall, "induction": induction, "capacity": capacity, "placement": placement,
            "noise": NOISE * (digest - 0.5)}


def landscape_score(pattern: str) -> float:
    terms = landscape_terms(pattern)
    return sum(WEIGHTS[name] * terms[name] for name in WEIGHTS) + terms["noise"]


class ProxyLandscape:
    """A cheap deterministic evaluator with the interface of ``search.evaluators`` (maximise, like MAD)."""

    name = "landscape"
    direction = "maximize"

    def __init__(self, budget: str = "bench", **_) -> None:
        self.budget = budget

    def __call__(self, pattern: str, seed: int, report) -> Evaluation:
        started = time.perf_counter()
        if set(pattern) - set("AM"):
            raise ValueError(f"the proxy landscape knows only A and M layers, got {pattern!r}")
        terms = landscape_terms(pattern)
        score = sum(WEIGHTS[name] * terms[name] for name in WEIGHTS) + terms["noise"]
        report(0, score)
        return Evaluation(score=score, details={"accuracy": {k: v for k, v in terms.items() if k != "noise"}},
                          seconds=time.perf_counter() - started)


def make(**kwargs) -> ProxyLandscape:
    """Factory for ``SearchConfig(evaluator="sampler_efficiency:make")`` (called with budget=, widths=, ...)."""
    return ProxyLandscape(**kwargs)


def exhaustive(layers: int) -> list[tuple[str, float]]:
    """Every pattern of the space (the engine's own enumeration), scored, best first."""
    from search.space import SearchSpace

    patterns = SearchSpace(layers, "AM").enumerate()
    return sorted(((p, landscape_score(p)) for p in patterns), key=lambda item: (-item[1], item[0]))


# ------------------------------------------------------------------------------------------------- the runs


@contextlib.contextmanager
def captured_stderr(path: Path):
    """Send file descriptor 2 to ``path`` (the engine prints one progress line per trial there)."""
    sys.stderr.flush()
    saved = os.dup(2)
    with open(path, "w") as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)


@dataclass
class RunResult:
    sampler: str
    seed: int
    trials: int
    seconds: float
    to_best: int | None  # 1-based trial number, None: not found within ``trials``
    to_top3: int | None
    evals_to_best: int | None  # distinct patterns evaluated by then
    evals_to_top3: int | None
    distinct: int  # distinct patterns evaluated in the whole run
    best_found: str
    best_found_score: float
    best_found_rank: int  # exhaustive rank (1 = the optimum) of the best pattern the run found


def scratch_dir() -> str | None:
    """tmpfs where there is one: the engine's SQLite storage commits several times per trial, and on disk those
    commits (fsync) cost about 0.25 s per trial, more than everything else the engine does (about 0.1 s)."""
    shm = Path("/dev/shm")
    return str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else None


def run_one(sampler: str, seed: int, layers: int, trials: int, ranked: list[str], tmp: str | None) -> RunResult:
    """One search through the real engine; the study's trials read back in order."""
    import optuna

    from search.config import SearchConfig
    from search.engine import is_substitute
    from search.run import run_search
    from search.storage import make_storage

    with tempfile.TemporaryDirectory(prefix=f"composer-sampler-eff-{sampler}-", dir=tmp) as out:
        config = SearchConfig(layers=layers, primitives="AM", evaluator=EVALUATOR, budget="bench", sampler=sampler,
                              trials=trials, seed=seed, prune=False, wandb="off", out=out,
                              known=False)  # the samplers' own work: no layout handed to them first
        started = time.perf_counter()
        try:
            with captured_stderr(Path(out) / "progress.log"):
                result = run_search(config, echo=lambda _: None)
        except Exception:
            log = (Path(out) / "progress.log").read_text()[-3000:]
            print(log, file=sys.stderr)
            raise
        seconds = time.perf_counter() - started
        study = optuna.load_study(study_name=result["study"], storage=make_storage(None, out))
        ordered = sorted(study.get_trials(deepcopy=False), key=lambda t: t.number)
    seen: dict[str, int] = {}  # pattern -> 1-based trial that first proposed it
    evals_at: list[int] = []  # distinct evaluations after each trial
    evaluated = 0
    for index, trial in enumerate(ordered, start=1):
        pattern = trial.user_attrs.get("pattern")
        if pattern is not None and pattern not in seen:
            seen[pattern] = index
        if pattern is not None and not is_substitute(trial.user_attrs):
            evaluated += 1
        evals_at.append(evaluated)
    to_best = seen.get(ranked[0])
    firsts = [seen.get(p) for p in ranked[:3]]
    to_top3 = max(firsts) if all(f is not None for f in firsts) else None
    return RunResult(
        sampler=sampler, seed=seed, trials=len(ordered), seconds=seconds, to_best=to_best, to_top3=to_top3,
        evals_to_best=evals_at[to_best - 1] if to_best else None,
        evals_to_top3=evals_at[to_top3 - 1] if to_top3 else None,
        distinct=evaluated, best_found=result["best"]["pattern"], best_found_score=result["best"]["score"],
        best_found_rank=ranked.index(result["best"]["pattern"]) + 1,
    )


# ---------------------------------------------------------------------------------------------- statistics


def censored_median(values: list[int | None], limit: int) -> float | None:
    """Median with not-found runs counted as larger than ``limit``; None when the median itself is not found."""
    keyed = sorted(math.inf if v is None else v for v in values)
    median = statistics.median(keyed)
    return None if math.isinf(median) else float(median)


def restricted_mean(values: list[int | None], limit: int) -> float:
    """E[min(T, limit + 1)]: not-found runs count ``limit + 1``."""
    return statistics.fmean(limit + 1 if v is None else v for v in values)


def summarise(runs: list[RunResult], trials: int) -> dict:
    out = {}
    for key in ("best", "top3"):
        values = [getattr(r, f"to_{key}") for r in runs]
        evals = [getattr(r, f"evals_to_{key}") for r in runs]
        out[key] = {
            "median_trials": censored_median(values, trials),
            "restricted_mean_trials": restricted_mean(values, trials),
            "found_rate": sum(v is not None for v in values) / len(values),
            "median_evals": censored_median(evals, trials),
            "per_seed": values,
        }
    out["median_rank_of_best_found"] = statistics.median(r.best_found_rank for r in runs)
    out["seconds_per_trial"] = sum(r.seconds for r in runs) / max(1, sum(r.trials for r in runs))
    out["distinct_evaluations_mean"] = statistics.fmean(r.distinct for r in runs)
    return out


def random_expected(patterns: int, trials: int) -> dict:
    """The random sampler's exact figures: it draws every layer uniformly, so each trial is a uniform draw of the
    S = ``patterns`` patterns, repeats included. T_best is geometric, P(T > t) = (1 - 1/S)^t; for the top-3
    (inclusion-exclusion over the three patterns) P(T > t) = 3 (1 - 1/S)^t - 3 (1 - 2/S)^t + (1 - 3/S)^t."""
    q = [1 - k / patterns for k in (1, 2, 3)]
    survival = {
        "best": lambda t: q[0] ** t,
        "top3": lambda t: 3 * q[0] ** t - 3 * q[1] ** t + q[2] ** t,
    }
    out = {}
    for key, above in survival.items():
        median = 1
        while above(median) > 0.5:
            median += 1
        out[key] = {
            "median_trials": float(median),
            "mean_trials": patterns * (1.0 if key == "best" else 1 + 1 / 2 + 1 / 3),
            "found_rate": 1 - above(trials),
            "restricted_mean_trials": sum(above(t) for t in range(trials + 1)),  # E[min(T, trials + 1)]
        }
    return out


def ratio(ours: float | None, peer: float | None, trials: int) -> dict:
    """ours / peer with a bound where a median is censored: {"value": x, "bound": "=" | "<" | ">" | "?"}."""
    if ours is not None and peer is not None:
        return {"value": ours / peer, "bound": "="}
    if ours is not None:  # the peer's median is beyond ``trials``: the ratio is below ours / trials
        return {"value": ours / trials, "bound": "<"}
    if peer is not None:
        return {"value": trials / peer, "bound": ">"}
    return {"value": None, "bound": "?"}


def fmt_median(value: float | None, trials: int) -> str:
    return f">{trials}" if value is None else f"{value:g}"


def fmt_ratio(r: dict) -> str:
    if r["value"] is None:
        return "n/a (both >N)"
    return f"{'' if r['bound'] == '=' else r['bound']}{r['value']:.2f}"


# --------------------------------------------------------------------------------------------------- main


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description="Trials GP, TPE and random sampling need to find the exhaustive best and top-3 patterns of "
        "a small A/M space under a cheap deterministic proxy landscape, through the real search engine.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--layers", type=int, default=8, help="searched layers (2**layers patterns; 6 or 8)")
    p.add_argument("--trials", type=int, default=60, help="trials per search (the budget N)")
    p.add_argument("--seeds", type=int, default=5, help="sampler seeds 0..seeds-1 per sampler")
    p.add_argument("--samplers", default="gp,tpe,random", help="comma-separated; random is the peer")
    p.add_argument("--tmp", default=None, help="parent of the per-run output folders (default: /dev/shm where "
                   "writable, else the system temp dir)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of the tables")
    p.add_argument("--landscape", action="store_true", help="print the exhaustive ranking (top 10) and exit")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    samplers = [s.strip() for s in args.samplers.split(",") if s.strip()]
    if args.layers < 2 or 2**args.layers > 4096:
        raise SystemExit("--layers must be between 2 and 12 (the space is enumerated)")
    ranking = exhaustive(args.layers)
    if args.landscape:
        for rank, (pattern, score) in enumerate(ranking[:10], start=1):
            terms = " ".join(f"{k} {v:.3f}" for k, v in landscape_terms(pattern).items())
            print(f"{rank:>3} {pattern} {score:.4f}  ({terms})")
        return 0

    import optuna

    log = (lambda *a: None) if args.json else (lambda *a: print(*a, file=sys.stderr, flush=True))
    log(f"space: {args.layers} layers over AM = {len(ranking)} patterns; exhaustive top-3: "
        + ", ".join(f"{p} {s:.4f}" for p, s in ranking[:3]) + f" (4th {ranking[3][1]:.4f})")
    tmp = args.tmp or scratch_dir()
    started = time.perf_counter()
    runs: dict[str, list[RunResult]] = {}
    for sampler in samplers:
        runs[sampler] = []
        for seed in range(args.seeds):
            r = run_one(sampler, seed, args.layers, args.trials, [p for p, _ in ranking], tmp)
            runs[sampler].append(r)
            log(f"  {sampler:<6} seed {seed}: best at trial {r.to_best or '-':>3}, top-3 by {r.to_top3 or '-':>3}, "
                f"best found {r.best_found} (rank {r.best_found_rank}), {r.distinct} distinct of {r.trials} trials, "
                f"{r.seconds:.1f} s")
    total = time.perf_counter() - started

    summary = {s: summarise(rs, args.trials) for s, rs in runs.items()}
    n = len(ranking)
    expected = random_expected(n, args.trials)
    ratios: dict = {}
    for s in summary:
        if s == PEER:
            continue
        ratios[s] = {}
        for key in ("best", "top3"):
            ours = summary[s][key]
            entry = {
                "median_vs_expected": ratio(ours["median_trials"], expected[key]["median_trials"], args.trials),
                "restricted_mean_vs_expected": ours["restricted_mean_trials"] / expected[key]["restricted_mean_trials"],
            }
            if PEER in summary:
                peer = summary[PEER][key]
                entry["median"] = ratio(ours["median_trials"], peer["median_trials"], args.trials)
                entry["restricted_mean"] = ours["restricted_mean_trials"] / peer["restricted_mean_trials"]
            ratios[s][key] = entry
    report = {
        "space": {"layers": args.layers, "primitives": "AM", "patterns": n},
        "exhaustive_top": [{"pattern": p, "score": s} for p, s in ranking[:5]],
        "trials": args.trials,
        "seeds": list(range(args.seeds)),
        "peer": PEER,
        "random_expected": expected,
        "summary": summary,
        "ratios_vs_peer": ratios,
        "runs": {s: [r.__dict__ for r in rs] for s, rs in runs.items()},
        "driver": "search.run.run_search (real engine: SQLite storage, dedup of repeats, leaderboard, plots)",
        "seconds_total": total,
        "versions": {"optuna": optuna.__version__, "python": platform.python_version()},
    }
    if args.json:
        print(json.dumps(report, indent=2))
        return 0

    print(f"\nSampler efficiency: {args.layers} layers over AM ({n} patterns), {args.trials} trials per search, "
          f"seeds 0..{args.seeds - 1}; optuna {optuna.__version__}; peer: {PEER}")
    print("exhaustive top-3: " + ", ".join(f"{p} ({s:.4f})" for p, s in ranking[:3]))
    header = (f"{'sampler':<15} {'med. to best':>12} {'med. to top-3':>13} {'found best':>10} {'found top-3':>11} "
              f"{'r.mean best':>11} {'r.mean top-3':>12} {'med. evals top-3':>16} {'rank found':>10} {'s/trial':>8}")
    print(header)
    print("-" * len(header))
    for s, row in summary.items():
        print(f"{s:<15} {fmt_median(row['best']['median_trials'], args.trials):>12} "
              f"{fmt_median(row['top3']['median_trials'], args.trials):>13} "
              f"{row['best']['found_rate']:>10.0%} {row['top3']['found_rate']:>11.0%} "
              f"{row['best']['restricted_mean_trials']:>11.1f} {row['top3']['restricted_mean_trials']:>12.1f} "
              f"{fmt_median(row['top3']['median_evals'], args.trials):>16} {row['median_rank_of_best_found']:>10g} "
              f"{row['seconds_per_trial']:>8.3f}")
    e_best, e_top3 = expected["best"], expected["top3"]
    print(f"{'random (exact)':<15} {e_best['median_trials']:>12g} {e_top3['median_trials']:>13g} "
          f"{e_best['found_rate']:>10.0%} {e_top3['found_rate']:>11.0%} "
          f"{e_best['restricted_mean_trials']:>11.1f} {e_top3['restricted_mean_trials']:>12.1f}")
    if ratios:
        print(f"\ntrials relative to random, lower is better ('measured': the {PEER} sampler run above; 'exact': its "
              f"exact distribution;\n'<x': the peer's median is beyond {args.trials} trials, so the ratio is below x; "
              f"'>x': ours is beyond {args.trials}, so it is above x)")
        header = (f"{'sampler':<8} {'against':<17} {'median best':>11} {'median top-3':>13} {'r.mean best':>11} "
                  f"{'r.mean top-3':>12}")
        print(header)
        print("-" * len(header))
        for s, r in ratios.items():
            if "median" in r["best"]:
                print(f"{s:<8} {PEER + ' (measured)':<17} {fmt_ratio(r['best']['median']):>11} "
                      f"{fmt_ratio(r['top3']['median']):>13} {r['best']['restricted_mean']:>11.2f} "
                      f"{r['top3']['restricted_mean']:>12.2f}")
            print(f"{s:<8} {PEER + ' (exact)':<17} {fmt_ratio(r['best']['median_vs_expected']):>11} "
                  f"{fmt_ratio(r['top3']['median_vs_expected']):>13} {r['best']['restricted_mean_vs_expected']:>11.2f} "
                  f"{r['top3']['restricted_mean_vs_expected']:>12.2f}")
    print(f"\n(r.mean = restricted mean E[min(T, {args.trials + 1})], a run that did not find it counted as "
          f"{args.trials + 1}; random's exact means: {e_best['mean_trials']:.0f} trials to the best, "
          f"{e_top3['mean_trials']:.0f} to the top-3; total {total:.0f} s, driver: search.run.run_search)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
