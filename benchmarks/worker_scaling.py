"""One search worker on every core, or one worker a core: which trains a rung's candidates sooner on this CPU.

Why: issue 70 asks for the default ``composer search`` in 15 minutes on 2 cores. It runs one worker with both
cores' threads, while ``--workers 2`` runs two workers of one thread each. Small models split over two threads
leave each thread idle at every op's barrier; two one-thread trials side by side do not wait for each other but
share the memory bandwidth and the cache. Which wins depends on the widths, so this script times both at a rung's
own shape: the same candidates trained by one process at ``cores`` threads one after another, and by ``cores``
processes at one thread side by side (each trial as the search runs it: the ``lm`` evaluator's own call,
``search.evaluators.make_evaluator``, with the search's precision). The peer is the default's layout (one worker
on every core), timed in the same run; the figure is candidates per hour, and the scores of each candidate under
both are printed, since a thread count may change a GEMM's summation order.

    python benchmarks/worker_scaling.py                                 # rung-cpu-0 at search-1m, rung-cpu-1 at demo-4m
    python benchmarks/worker_scaling.py --rungs rung-cpu-1 --patterns AMAMAM,AAMMMM --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

_ROOT = Path(__file__).resolve().parent.parent
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

from composer.files import atomic_write_json  # noqa: E402

# where each rung trains in the default search (its --preset and the ladder's extrapolate_to)
RUNG_WIDTHS = {"rung-cpu-0": "search-1m", "rung-cpu-1": "demo-4m", "rung-cpu-2": "demo-4m",
               "rung-smoke-0": "tiny"}  # the smoke rung: the plumbing, in seconds


def one_trial(budget: str, widths: str, pattern: str, precision: str, threads: int, seed: int) -> dict:
    """Train one candidate as a search worker does (in this process) and say how long it took."""
    import torch

    torch.set_num_threads(threads)
    from search.evaluators import make_evaluator

    evaluator = make_evaluator("lm", budget, widths, None, None, precision, False, None)
    started = time.perf_counter()
    result = evaluator(pattern, seed, None)
    return {"pattern": pattern, "threads": threads, "seconds": time.perf_counter() - started, "score": result.score}


def in_processes(budget: str, widths: str, patterns: list[str], precision: str, threads: int, seed: int,
                 side_by_side: bool) -> tuple[float, list[dict]]:
    """Each pattern in its own fresh process (as a spawned worker, imports excluded from its timing): all at once
    when ``side_by_side``, else one after another. Returns the wall time from the first start to the last end
    (imports included, as every layout pays them once) and each trial's record."""
    started = time.perf_counter()
    records, running = [], []
    for pattern in patterns:
        argv = [sys.executable, __file__, "--trial", budget, widths, pattern, precision, str(threads), str(seed)]
        process = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, cwd=_ROOT)
        if side_by_side:
            running.append(process)
        else:
            records.append(_finish(process))
    records += [_finish(process) for process in running]
    return time.perf_counter() - started, records


def _finish(process: subprocess.Popen) -> dict:
    out, _ = process.communicate()
    if process.returncode:
        raise SystemExit(f"a trial process failed with exit code {process.returncode}")
    return json.loads(out.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--trial":  # a child: one trial, its record on the last line of stdout
        budget, widths, pattern, precision, threads, seed = argv[1:7]
        print(json.dumps(one_trial(budget, widths, pattern, precision, int(threads), int(seed))))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rungs", default="rung-cpu-0,rung-cpu-1", help="ladder rungs, comma-separated")
    parser.add_argument("--patterns", default="AMAMAM,AAMMMM", help="one candidate per core, comma-separated")
    parser.add_argument("--precision", default="auto")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="write the records here")
    args = parser.parse_args(argv)
    patterns = args.patterns.split(",")
    cores = len(patterns)
    rows = []
    for rung in args.rungs.split(","):
        widths = RUNG_WIDTHS.get(rung)
        if widths is None:
            parser.error(f"unknown rung {rung!r}; choose from {', '.join(RUNG_WIDTHS)}")
        # the peer first, then the contender, then the peer again: a drift in the machine's load shows
        peer_a, peer_trials = in_processes(rung, widths, patterns, args.precision, cores, args.seed, False)
        wide, wide_trials = in_processes(rung, widths, patterns, args.precision, 1, args.seed, True)
        peer_b, peer_trials_b = in_processes(rung, widths, patterns, args.precision, cores, args.seed, False)
        peer = (peer_a + peer_b) / 2
        # the same without the processes' start-up (imports, paid once per worker in a search): the peer's two
        # passes' trial seconds, against the slower of the trials side by side
        trial_peer = (sum(t["seconds"] for t in peer_trials) + sum(t["seconds"] for t in peer_trials_b)) / 2
        trial_wide = max(t["seconds"] for t in wide_trials)
        row = {"rung": rung, "widths": widths, "candidates": cores,
               "one_worker_s": [peer_a, peer_b], "workers_side_by_side_s": wide,
               "speedup_vs_one_worker": peer / wide, "trial_speedup_vs_one_worker": trial_peer / trial_wide,
               "scores": {t["pattern"]: {"one_worker": t["score"], "one_worker_again": u["score"],
                                         "one_thread": w["score"]}
                          for t, u, w in zip(peer_trials, peer_trials_b, wide_trials)},
               "trials": {"one_worker": peer_trials + peer_trials_b, "side_by_side": wide_trials}}
        rows.append(row)
        print(f"{rung} at {widths}: {cores} candidates, one worker of {cores} threads {peer_a:.1f} / {peer_b:.1f} s, "
              f"{cores} workers of 1 thread {wide:.1f} s: {row['speedup_vs_one_worker']:.2f}x the default's rate "
              f"({row['trial_speedup_vs_one_worker']:.2f}x in the trials alone, without the processes' start-up)",
              flush=True)
        for pattern, scores in row["scores"].items():
            print(f"   {pattern}: score {scores['one_worker']:.4f} ({cores} threads), {scores['one_thread']:.4f} "
                  f"(1 thread)", flush=True)
    if args.json:
        import torch

        atomic_write_json(Path(args.json), {
            "benchmark": "worker_scaling", "date": time.strftime("%Y-%m-%d"),
            "command": "python benchmarks/worker_scaling.py " + " ".join(argv), "torch": torch.__version__,
            "cpus": os.cpu_count(), "load_average_end": os.getloadavg(),
            "peer": "one worker on every core (the default search's layout), timed before and after", "rows": rows})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
