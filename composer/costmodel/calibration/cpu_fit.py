"""``fit``: the CPU's constants from single layers.


``fit``: first the CPU's own roofs, measured (``peak_flops``: the best of 20 1024^3 fp32 GEMMs; ``bandwidth``:
the best of 20 64 MiB copies, bytes read + written), then per primitive (A, M, S, D, W, E: one residual layer,
``x + primitive(rmsnorm(x))``, at each of ``--widths``; and the head: embedding, final norm, tied LM head and loss;
each call on the next of enough copies that their weights are cold, as in a model: :class:`~composer.costmodel.calibration.units.Unit`) the median time
of a training step (forward + backward, the input requiring grad as inside a model; under bf16 autocast where
this CPU has native bf16, as ``composer search`` trains there: ``--precision``), of the optimizer over its
parameters (``clip_grad_norm_`` + AdamW), of a prefill and of a decoding step (the layer's inference cache, as
``ComposerModel.next_token_logits`` runs it); and, with ``torch.profiler``, the ops (every aten op dispatched) and
kernels (leaf ops that do work) each of those runs at 1, 2 and 4 chunks of a scan, at batch 1, and what each
further slice of the batch adds to them for each CPU kernel that runs the batch in slices (S's and D's short
convolution, S's scan: :func:`~composer.costmodel.calibration.op_counts.measure_counts`). Each timing is one row of the linear system of
:mod:`composer.costmodel.fit`; the solution (each primitive's efficiency and activation passes per phase, the op
cost per phase) is written into the table with a source naming this command, its date, the results JSON
(``benchmarks/results/cost_model_fit-<date>.json``), the widths and patterns it ran, the precision and the clock.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

import torch

from composer.costmodel import (
    TABLE_PATH,
    Counts,
    design_row,
    error_summary,
    fit_nonnegative,
    load_table,
    parse_table,
    predicted_s,
    relative_error,
    write_table,
)
from composer.costmodel.calibration.cases import FIT_SHAPES, QUICK_FIT_SHAPES
from composer.costmodel.calibration.op_counts import measure_counts
from composer.costmodel.calibration.record import command_line, log, today
from composer.costmodel.calibration.roofs import measure_roofs
from composer.costmodel.calibration.store import store_cpu_fit
from composer.costmodel.calibration.timing import CLOCK, last_wait_quiet, machine_state, quiet_summary, timed
from composer.costmodel.calibration.units import Unit, arch_for, train_precision_of, unit_work
from composer.costmodel.processor import this_cpu_model
from composer.costmodel.table import constants_digest
from composer.errors import ConfigError
from composer.files import atomic_write_json, make_output_dir
from composer.precision import device_has_native_bf16


def cmd_fit(args: argparse.Namespace, argv: list[str] | None) -> int:
    if args.device != "cpu":
        raise ConfigError(f"fit measures the machine it runs on: --device cpu (got {args.device!r}); the GPUs' "
                          "training constants come from `loo`")
    torch.set_num_threads(args.threads)
    shapes = QUICK_FIT_SHAPES if args.quick else {w: FIT_SHAPES.get(w, FIT_SHAPES["search-1m"]) for w in args.widths}
    keys = tuple(args.primitives) + ("head",)
    steps, warmup = (1, 1) if args.quick else (args.steps, 1)
    started = time.perf_counter()
    machine_before = machine_state()
    date = today()
    log(f"fit --device cpu: {torch.get_num_threads()} thread(s), widths {', '.join(shapes)}, keys {', '.join(keys)}")
    roofs = measure_roofs(args.quick)
    log(f"  roofs: {roofs['peak_flops'] / 1e9:.1f} GFLOP/s (fp32 GEMM {roofs['gemm_n']}^3), "
        f"{roofs['bandwidth'] / 1e9:.1f} GB/s (copy of {roofs['copy_bytes'] / 2**20:.0f} MiB)")
    train_precision = train_precision_of(args.precision)
    log(f"  training in {train_precision} (this CPU {'has' if device_has_native_bf16('cpu') else 'lacks'} native "
        f"bf16; --precision {args.precision})")
    counts = measure_counts(next(iter(shapes)), keys, train_precision)

    timings = []
    for preset, per_phase in shapes.items():
        arch = arch_for(preset, "AM").replace(max_seq_len=4096)
        for key in keys:
            unit = Unit(arch, key, train_precision=train_precision)
            for phase in ("train", "optimizer", "prefill", "decode"):
                shape_key = "head_train" if (key, phase) == ("head", "train") else phase
                for batch, tokens in per_phase["train" if phase == "optimizer" else shape_key]:
                    n = steps if phase != "decode" else max(steps, 4 if args.quick else 16)
                    call = unit.call(phase, batch, tokens)
                    seconds = statistics.median(timed(call, n, warmup)) / unit.layers_per_call(phase)
                    timings.append({"preset": preset, "key": key, "phase": phase, "batch": batch, "tokens": tokens,
                                    "seconds": seconds, "steps": n, "quiet": last_wait_quiet()})
                    log(f"  {preset:<11} {key:<5} {phase:<9} {batch:>2} x {tokens:<4} {1e3 * seconds:9.3f} ms")
                    if phase == "optimizer":
                        break  # one optimizer timing per unit: it does not depend on the shape

    table = load_table(args.table)
    raw = json.loads(json.dumps(table.raw))  # a copy to edit
    counts_table = parse_table({**raw, "counts": {"source": raw["counts"]["source"], "per_key": counts}})

    def counts_of(key: str, phase: str) -> Counts:
        return counts_table.counts_of(key, phase, "ops")

    rows = []
    for t in timings:
        units = unit_work(arch_for(t["preset"], "AM").replace(max_seq_len=4096), t["key"], t["phase"], t["batch"],
                          t["tokens"], train_precision)
        step_phase = "train" if t["phase"] == "optimizer" else t["phase"]
        rows.append(design_row(units, step_phase, roofs["peak_flops"], roofs["bandwidth"], counts_of, t["seconds"],
                               label=f"{t['preset']} {t['key']} {t['phase']} {t['batch']}x{t['tokens']}",
                               activation_passes=True))
    # unbounded: the CPU's peak is a measured GEMM, not a bound (a layer's larger or better-shaped GEMMs, or a
    # noisy roof measurement, can beat it), unlike a GPU's datasheet peak
    solution = fit_nonnegative(rows, max_efficiency=None)
    for t, row in zip(timings, rows, strict=True):
        t["predicted_s"] = predicted_s(row, solution)
        t["error"] = relative_error(t["predicted_s"], t["seconds"])
    constants = constants_from(solution)
    results = {
        "benchmark": "cost_model fit", "date": date, "command": command_line(argv), "device": "cpu",
        "threads": torch.get_num_threads(), "torch": torch.__version__, "processor": this_cpu_model(),
        "quick": args.quick,
        "provisional": args.provisional, "seconds": time.perf_counter() - started, "roofs": roofs,
        "train_precision": train_precision, "native_bf16": device_has_native_bf16("cpu"),
        "fit_widths": {preset: arch_for(preset, "AM").d_model for preset in shapes}, "fit_patterns": list(keys),
        "clock": CLOCK["name"],
        "machine": {"before": machine_before, "after": machine_state(), "waits": quiet_summary()},
        "counts": counts, "timings": timings, "constants": constants,
        "fit_error": {phase: error_summary([t["error"] for t in timings if t["phase"] == phase])
                      for phase in ("train", "optimizer", "prefill", "decode")},
    }
    out = make_output_dir(args.out)
    results_path = out / f"cost_model_fit-{date}.json"
    if not args.no_write:
        store_cpu_fit(raw, roofs, counts, constants, results, results_path, args)
        # what validate names to show it predicted with exactly these constants (no refit in between)
        results["cpu_constants_digest"] = constants_digest(raw, "cpu")
    atomic_write_json(results_path, results)
    log("  fit in-sample error (median |pred/meas - 1|): " + ", ".join(
        f"{phase} {summary.get('median_abs', float('nan')):.1%}" for phase, summary in results["fit_error"].items()))
    if not args.no_write:
        write_table(raw, args.table)
        log(f"  wrote the cpu constants to {args.table or TABLE_PATH} (digest {results['cpu_constants_digest']})")
    log(f"fit done in {time.perf_counter() - started:.0f} s; results in {results_path}")
    print(json.dumps({"constants": constants, "fit_error": results["fit_error"]}, indent=2))
    return 0


def constants_from(solution: dict[str, float]) -> dict[str, Any]:
    """The fitted unknowns as the table holds them: efficiency = 1 / the reciprocal fitted (None where the fit
    gave 0: no time could be attributed to that key, so it has no efficiency), op costs as fitted."""
    efficiency: dict[str, dict[str, float | None]] = {}
    passes: dict[str, dict[str, float]] = {}
    op_cost: dict[str, float] = {}
    for name, value in solution.items():
        kind, rest = name.split(".", 1)
        if kind == "efficiency":
            phase, key = rest.split(".", 1)
            efficiency.setdefault(phase, {})[key] = 1.0 / value if value > 0 else None
        elif kind == "activation_passes":
            phase, key = rest.split(".", 1)
            passes.setdefault(phase, {})[key] = value
        else:
            op_cost[rest] = value
    return {"efficiency": efficiency, "activation_passes": passes, "op_cost_s": op_cost}
