"""Where one search trial's wall time goes: model build, data, forward per primitive, backward, optimizer,
validation, checkpoints, Lightning's own loop and the rest.

Why: issue 70 asks for twice the evidence per CPU hour, and a change to a trial's speed should go where its time
is, not where it is guessed to be. This script runs one trial exactly as ``composer search`` runs it (the ``lm``
evaluator's call, ``search.evaluators.make_evaluator``, with the search's own settings: ``--budget`` one of the
ladder's rungs, ``--widths``, the search's precision) under ``cProfile`` and sums the time of the functions that do
each job. ``cProfile`` adds its own cost to every Python call (a few percent of a trial whose time is in torch's
kernels; the ``profiler_overhead`` line compares the trial's wall time with and without it, where ``--bare`` asks).
Forward time is given per primitive (each primitive's ``forward``, cumulative); the backward pass runs in
autograd's C++ engine, so it is one figure for the whole model; what is left of Lightning's ``fit`` after its
training steps and validation is its loop (hooks, logging, progress, callbacks).

The process's start (interpreter, imports) is timed apart, in a fresh interpreter (``python -c "import ..."``),
since a search worker pays it once per worker, not per trial.

    python benchmarks/trial_profile.py                                   # the default search's rung 0: AMAMAM
    python benchmarks/trial_profile.py --budget rung-cpu-1 --widths demo-4m --pattern SDDMMSDDMAMSDDMMDM \\
        --precision fp32                                                 # the constrained search's rung 1
    python benchmarks/trial_profile.py --json benchmarks/results/trial_profile-DATE.json
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import subprocess
import sys
import time
from pathlib import Path

_ROOT = Path(__file__).resolve().parent.parent
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

from composer.files import atomic_write_json  # noqa: E402

# each figure, and the functions whose cumulative time (outermost calls only) it is: (file path part, name)
FIGURES = {
    "trial": [("search/lm/evaluator.py", "_evaluate")],
    "lightning runs": [("lightning/pytorch/trainer/trainer.py", "_run")],  # fit, and the final validate
    "model build": [("composer/model.py", "build_model")],
    "data (composer.data, all)": [("composer/data/", "*")],
    "data loader": [("torch/utils/data/dataloader.py", "__next__")],
    "data module": [("composer/data/datamodule.py", "*")],  # its hooks (prepare_data, setup, loaders): in a run
    "head and loss": [("composer/model.py", "logits_and_loss")],
    "backward": [("torch/_tensor.py", "backward")],
    "optimizer update": [("torch/optim/adam.py", "adam"), ("torch/optim/adamw.py", "adamw")],
    "gradient clipping": [("torch/nn/utils/clip_grad.py", "*")],
    "validation": [("lightning/pytorch/loops/evaluation_loop.py", "run")],
    "checkpoints and trunks": [("torch/serialization.py", "save"), ("safetensors/torch.py", "save_file")],
}


def largest(stats: pstats.Stats, part: str, name: str) -> float:
    """The largest cumulative time of one function matching (``part``, ``name``): the outermost of a nest whose
    levels nn.Module's call machinery separates (the model's ``forward`` around its layers' ``forward``)."""
    return max((ct for (path, _line, function), (_cc, _nc, _tt, ct, _callers) in stats.stats.items()
                if part in path.replace(os.sep, "/") and function == name), default=0.0)


def cumulative(stats: pstats.Stats, part: str, name: str) -> float:
    """Seconds spent in (and below) the functions of files whose path holds ``part`` named ``name`` (``*``: any),
    counted once where they call each other (the outermost calls only)."""
    total = 0.0
    for (path, _line, function), (_cc, _nc, _tt, ct, callers) in stats.stats.items():
        if part not in path.replace(os.sep, "/"):
            continue
        if name != "*" and function != name:
            continue
        # the time reached from callers outside the same group: a recursive or nested call is inside its caller's
        outside = [c for c in callers if not (part in c[0].replace(os.sep, "/")
                                              and (name == "*" or c[2] == name))]
        if not callers:  # a call the profile began inside
            total += ct
        elif outside:
            total += sum(callers[c][3] for c in outside)
    return total


def forward_by_primitive(stats: pstats.Stats) -> dict[str, float]:
    """Seconds in each primitive's ``forward`` (cumulative, training and validation together), by the registry's
    modules: the largest ``forward`` of each module, the primitive's own, around any of its parts' (attention's
    includes its rotary embedding, Mamba-2's its gated norm)."""
    from primitives.registry import REGISTRY

    modules = {Path(sys.modules[REGISTRY.get(symbol).__module__].__file__).stem for symbol in REGISTRY.symbols}
    by_file: dict[str, float] = {}
    for (path, _line, function), (_cc, _nc, _tt, ct, _callers) in stats.stats.items():
        path = path.replace(os.sep, "/")
        if "/primitives/" in path and function == "forward" and Path(path).stem in modules:
            by_file[Path(path).stem] = max(by_file.get(Path(path).stem, 0.0), ct)
    return dict(sorted(by_file.items(), key=lambda item: -item[1]))


def process_start(modules: str) -> float:
    """Seconds a fresh interpreter takes to import what a search worker imports before its first trial."""
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", f"import {modules}"], check=True, cwd=_ROOT)
    return time.perf_counter() - started


def run_trial(args: argparse.Namespace):
    from search.evaluators import make_evaluator

    evaluator = make_evaluator("lm", args.budget, args.widths, None, None, args.precision, False, None)
    return lambda: evaluator(args.pattern, args.seed, None)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--budget", default="rung-cpu-0", help="an lm budget: a ladder's rung (default: the default "
                                                               "search's rung 0)")
    parser.add_argument("--widths", default="search-1m", help="the preset the trial trains at")
    parser.add_argument("--pattern", default="AMAMAM", help="the candidate")
    parser.add_argument("--precision", default="auto", help="as the search's --precision")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (a search worker's: one per worker)")
    parser.add_argument("--bare", action="store_true", help="also run the trial once without the profiler")
    parser.add_argument("--json", help="write the result here")
    args = parser.parse_args(argv)

    import torch

    torch.set_num_threads(args.threads)
    start = process_start("torch, lightning, composer.training, search.evaluators")
    bare = None
    if args.bare:
        trial = run_trial(args)
        started = time.perf_counter()
        trial()
        bare = time.perf_counter() - started
    trial = run_trial(args)
    profile = cProfile.Profile()
    started = time.perf_counter()
    profile.enable()
    result = trial()
    profile.disable()
    wall = time.perf_counter() - started
    stats = pstats.Stats(profile)
    got = {name: sum(cumulative(stats, part, function) for part, function in spec) for name, spec in FIGURES.items()}
    got["forward"] = largest(stats, "composer/model.py", "forward")  # ComposerModel.forward, training and validation
    forward = forward_by_primitive(stats)
    trial_s = got["trial"] or wall
    preparation = max(got["data (composer.data, all)"] - got["data loader"], 0.0)  # the data module's hooks too
    outside_runs = max(preparation - got["data module"], 0.0)  # the evaluator's own checks, before Lightning
    breakdown = {
        "model build": got["model build"],
        "data: preparation (outside the loader)": preparation,
        "data: the loader's batches": got["data loader"],
        **{f"forward: {name}": seconds for name, seconds in forward.items()},
        "forward: head and loss": got["head and loss"],
        "forward: the rest (embedding, norms, residuals)": max(got["forward"] - sum(forward.values())
                                                              - got["head and loss"], 0.0),
        "backward (whole model)": got["backward"],
        "optimizer update (AdamW)": got["optimizer update"],
        "gradient clipping": got["gradient clipping"],
        "checkpoints and trunks": got["checkpoints and trunks"],
    }
    breakdown["lightning's loop (its runs less the rows above)"] = max(
        got["lightning runs"] - got["data loader"] - got["data module"] - got["forward"] - got["backward"]
        - got["optimizer update"] - got["gradient clipping"] - got["checkpoints and trunks"], 0.0)
    breakdown["the rest (the evaluator outside Lightning)"] = max(
        trial_s - got["lightning runs"] - got["model build"] - outside_runs, 0.0)
    overlapping = {"validation (its forward is in the forward rows)": got["validation"],
                   "forward, training and validation": got["forward"]}
    details = result.details or {}
    record = {"benchmark": "trial_profile", "date": time.strftime("%Y-%m-%d"),
              "command": "python benchmarks/trial_profile.py " + " ".join(argv if argv is not None else sys.argv[1:]),
              "budget": args.budget, "widths": args.widths, "pattern": args.pattern, "precision": args.precision,
              "threads": args.threads, "torch": torch.__version__, "load_average": os.getloadavg(),
              "trial_wall_s": wall, "trial_s_bare": bare, "process_start_s": start,
              "score": result.score, "lr": details.get("lr"), "tokens_per_s": details.get("tokens_per_s"),
              "seconds": breakdown, "overlapping": overlapping,
              "note": "each primitive's forward row is its forward in training and validation; the overlapping "
                      "rows are totals the breakdown already splits"}
    print(f"{args.pattern} at {args.widths}, {args.budget}, {args.precision}, {args.threads} thread(s): trial "
          f"{wall:.1f} s under cProfile" + (f" ({bare:.1f} s without)" if bare else "")
          + f"; a fresh process's imports {start:.1f} s")
    for job, seconds in breakdown.items():
        print(f"  {job:52} {seconds:8.2f} s  {seconds / wall:6.1%}")
    print(f"  {'(sum of the rows)':52} {sum(breakdown.values()):8.2f} s")
    for job, seconds in overlapping.items():
        print(f"  of which {job}: {seconds:.2f} s")
    if args.json:
        atomic_write_json(args.json, record)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
