"""Fit and validate the cost model (``composer/costmodel``): its constants from single layers, its predictions
against whole models it never saw, and the stored GPU runs with each pattern left out.

    python benchmarks/cost_model.py fit --device cpu        # one thread, ~3 min: rewrites the table's cpu entry
    python benchmarks/cost_model.py validate --device cpu   # one thread, ~3 min: 12 held-out models, measured
    python benchmarks/cost_model.py loo                     # seconds: the stored H100/H200 runs, by pattern
    python benchmarks/cost_model.py loo --write-table       # ... and the grouped fit as the GPUs' constants
    python benchmarks/cost_model.py fit --device cpu --quick --table /tmp/t.json --out /tmp/r   # plumbing only

``fit`` (:mod:`.cpu_fit`), ``validate`` (:mod:`.validate`) and ``loo`` (:mod:`.leave_one_out`) each say what
they measure. Every measurement runs on one thread (``--threads``, default 1): the ``cpu`` constants are one
thread's, and on this 2-core machine a second job then keeps a core of its own. Timings read this process's CPU
time by default (``--clock``, :mod:`.timing`), which the machine's other jobs do not inflate the way they do the
wall clock. A usage error is one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from composer.costmodel import TABLE_PATH, load_table
from composer.costmodel.calibration.cases import FIT_SHAPES, PRIMITIVES
from composer.costmodel.calibration.cpu_fit import cmd_fit
from composer.costmodel.calibration.gpu_runs import GPU_RESULTS
from composer.costmodel.calibration.leave_one_out import cmd_loo
from composer.costmodel.calibration.record import RESULTS
from composer.costmodel.calibration.timing import CLOCK, QUIET, QUIET_LOG
from composer.costmodel.calibration.validate import cmd_validate
from composer.costmodel.timing import CLOCKS
from composer.errors import ComposerUsageError, ConfigError


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    for name, help_text in (("fit", "fit the cpu constants to single-layer microbenchmarks"),
                            ("validate", "held-out whole models: measured vs predicted"),
                            ("loo", "the stored GPU runs, leave one configuration out")):
        p = sub.add_parser(name, help=help_text)
        p.add_argument("--table", type=Path, default=None, help=f"the constants table (default {TABLE_PATH})")
        p.add_argument("--out", type=Path, default=RESULTS, help="where the results JSON goes (benchmarks/results)")
        if name in ("fit", "validate"):
            p.add_argument("--device", default="cpu", help="cpu: the machine this runs on")
            p.add_argument("--quick", action="store_true", help="tiny widths, one step: the plumbing, not figures")
            p.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
            p.add_argument("--steps", type=int, default=5, help="timed steps per measurement (default 5)")
            p.add_argument("--clock", choices=tuple(CLOCKS), default="cpu",
                           help="what a timing reads: cpu (default), this process's CPU time, steady on a shared "
                                "machine; wall, the wall clock (then each timing waits for a quiet machine)")
            p.add_argument("--no-wait", action="store_true",
                           help="on the wall clock, time at once without waiting for a quiet machine")
    fit = sub.choices["fit"]
    fit.add_argument("--widths", type=lambda s: s.split(","), default=list(FIT_SHAPES),
                     help=f"presets whose widths the layers are timed at (default {','.join(FIT_SHAPES)})")
    fit.add_argument("--primitives", default=PRIMITIVES, help=f"primitives to fit (default {PRIMITIVES})")
    fit.add_argument("--provisional", action="store_true", help="mark the fitted constants provisional")
    fit.add_argument("--no-write", action="store_true", help="write the results JSON only, not the table")
    fit.add_argument("--note", default="", help="a sentence the fit's source records (e.g. how idle the machine was)")
    fit.add_argument("--precision", choices=("auto", "fp32", "bf16"), default="auto",
                     help="what training is timed in: auto (default) is bf16 autocast where this CPU has native "
                          "bf16, as composer search trains there, else fp32; validate trains in the fit's")
    sub.choices["validate"].add_argument(
        "--cases", choices=("validation", "development"), default="validation",
        help="validation (default): models whose widths and patterns the fit never ran; development: the "
             "2026-11-29 set at the fit's widths, for trying a change before the one validation run")
    sub.choices["validate"].add_argument(
        "--decode-processes", type=int, default=5, metavar="N",
        help="each model's decode figure is the median over N fresh processes pinned to the cores in turn "
             "(default 5; 0: this process's own, which another process can time 2x apart); --quick runs 1")
    loo = sub.choices["loo"]
    loo.add_argument("--results", type=Path, default=GPU_RESULTS, help="the stored GPU runs")
    loo.add_argument("--write-table", action="store_true", help="store the grouped fit as the GPU constants")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    CLOCK["name"] = getattr(args, "clock", "cpu")
    QUIET["enabled"] = CLOCK["name"] == "wall" and not (getattr(args, "quick", False)
                                                        or getattr(args, "no_wait", False))
    QUIET_LOG.clear()
    try:
        if getattr(args, "threads", 1) < 1 or getattr(args, "steps", 1) < 1:
            raise ConfigError("--threads and --steps must be positive")
        unknown = [s for s in getattr(args, "primitives", "") if s not in PRIMITIVES]
        if unknown:
            raise ConfigError(f"unknown primitive(s) {unknown}; fit knows {PRIMITIVES}")
        bad = [w for w in getattr(args, "widths", []) if w not in FIT_SHAPES]
        if bad and not getattr(args, "quick", False):
            raise ConfigError(f"no fit shapes for width(s) {bad}; choose from {', '.join(FIT_SHAPES)}")
        if getattr(args, "device", "cpu") not in load_table(args.table).devices:
            load_table(args.table).device(args.device)  # the one-line error that names the choices
        return {"fit": cmd_fit, "validate": cmd_validate, "loo": cmd_loo}[args.command](args, argv)
    except ComposerUsageError as err:
        print(f"cost_model.py {args.command}: error: {err}", file=sys.stderr)
        return 2
