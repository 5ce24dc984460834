"""How reproducible a CPU decode step's time is from one process to the next, and the cost model's decode error
against the median over processes rather than against one.

Why: the cost model's CPU decode error out of sample was 20-27% (median by layout class, 2026-12-07) against a goal
of 15% (issue 68), and one model measured in three processes the same day decoded in 2.17, 3.69 and 3.75 ms a
step (``search-1m:d256``, ``AMAMAM``, one thread, batch 1): repeats within a process agree, processes do not. Were
that the rule, ``cost_model.py validate``, which times each model once in one process, could not tell a 15% model
from a 30% one. This script times every validation model's decode step (``composer.costmodel.calibration.decode_processes
.measure_serving``: batch 1, 16 steps after the case's context, median) in ``--processes`` fresh processes, each
pinned to one core in turn (interleaved: every case once per round), and reports per case the spread over
processes and within them, and the model's error against each process's figure and against their median.

    python benchmarks/decode_noise.py --processes 6 --json benchmarks/results/decode_noise-DATE.json
    python benchmarks/decode_noise.py --compare-table runs/refit/constants.json   # another fit, same figures

``--compare-table`` (repeatable) predicts the same models with another table's CPU constants (e.g. a fit written
with ``cost_model.py fit --table``) and reports its errors against the same medians: two fits judged on one set
of measurements, so their difference is the fits', not the measuring's.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import time
from pathlib import Path

_ROOT = Path(__file__).resolve().parent.parent
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))


def measure(case: tuple, core: int, new_tokens: int) -> dict:
    """One fresh process's figure for ``case``, pinned to ``core`` (``decode_processes``, as ``validate`` takes it)."""
    from composer.costmodel.calibration.decode_processes import decode_in_fresh_process

    preset, pattern, _, _, context = case
    return decode_in_fresh_process(preset, pattern, context, new_tokens, core)


def on_any_processor(device):
    """``device`` predicting on any processor without a warning: on purpose, since the error of a table's CPU fit
    on this processor is what this benchmark reports."""
    return dataclasses.replace(device, processor="")


def spread(values: list[float]) -> float:
    """(max - min) / median: the spread the one timing harness gives a figure (``composer.costmodel.timing``)."""
    from composer.costmodel.timing import figure

    return figure(values)["spread"]


def _machine() -> dict[str, str]:
    """The CPU's model name and torch's version: the table's CPU constants are one machine's fit."""
    import torch

    from composer.evaluation.bench_cost import device_name

    return {"machine": device_name(torch.device("cpu")), "torch": torch.__version__}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--processes", type=int, default=6, help="fresh processes per model (pinned in turn)")
    parser.add_argument("--new-tokens", type=int, default=16)
    parser.add_argument("--quick", action="store_true", help="the quick validation's two tiny models, 2 processes")
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--compare-table", action="append", default=[], metavar="PATH",
                        help="also predict with this table's cpu constants (repeatable)")
    args = parser.parse_args(argv)
    from composer.costmodel import load_table, predict_decode
    from composer.costmodel.calibration.cases import QUICK_VALIDATION, VALIDATION
    from composer.costmodel.calibration.decode_processes import cores as decode_cores
    from composer.costmodel.calibration.decode_processes import interleaved
    from composer.costmodel.calibration.units import arch_for
    from composer.costmodel.classes import layout_class
    from composer.costmodel.fit import error_summary, relative_error

    cases = QUICK_VALIDATION if args.quick else VALIDATION
    processes = 2 if args.quick else args.processes
    table = load_table()
    fitted = table.device("cpu")
    cpu_entry = on_any_processor(fitted)
    started = time.perf_counter()

    def measured(i: int, core: int, round_: int) -> dict:
        figure = measure(cases[i], core, args.new_tokens)
        print(f"round {round_ + 1}/{processes} core {core} {cases[i][0]} {cases[i][1]}: "
              f"{1e3 * figure['median_s']:.3f} ms", flush=True)
        return figure

    figures = interleaved(len(cases), processes, measured)
    rows = []
    for i, (preset, pattern, _, _, context) in enumerate(cases):
        arch = arch_for(preset, pattern)
        medians = [f["median_s"] for f in figures[i]]
        predicted = predict_decode(arch, cpu_entry, context=context + args.new_tokens // 2, table=table).seconds
        rows.append({"preset": preset, "pattern": arch.pattern, "compact": arch.compact,
                     "layout_class": layout_class(arch), "context": context,
                     "process_medians_ms": [1e3 * m for m in medians],
                     "cores": [f["core"] for f in figures[i]],
                     "across_processes_spread": spread(medians),
                     "within_process_spread": statistics.median(spread(f["steps_s"]) for f in figures[i]),
                     "predicted_ms": 1e3 * predicted, "median_ms": 1e3 * statistics.median(medians),
                     "error_vs_median": relative_error(predicted, statistics.median(medians)),
                     "errors_vs_each": [relative_error(predicted, m) for m in medians]})
    classes = sorted({r["layout_class"] for r in rows})
    compared = []
    for path in args.compare_table:
        other = load_table(path)
        entry = on_any_processor(other.device("cpu"))
        errors = []
        for i, (preset, pattern, _, _, context) in enumerate(cases):
            predicted = predict_decode(arch_for(preset, pattern), entry, context=context + args.new_tokens // 2,
                                       table=other).seconds
            errors.append({"predicted_ms": 1e3 * predicted,
                           "error_vs_median": relative_error(predicted, rows[i]["median_ms"] / 1e3)})
        compared.append({
            "table": path, "fitted_on": other.device("cpu").processor,
            "fit_source": other.device("cpu").efficiency["decode"]["M"].source, "rows": errors,
            "error_vs_median_by_class": {c: error_summary([e["error_vs_median"] for e, r in zip(errors, rows)
                                                           if r["layout_class"] == c]) for c in classes}})
    result = {
        "benchmark": "decode_noise", "date": time.strftime("%Y-%m-%d"), "command": " ".join(sys.argv),
        # the table's CPU constants are one machine's fit: a figure on another CPU model says how far they carry
        **_machine(), "table_fitted_on": fitted.processor,
        "processes": processes, "new_tokens": args.new_tokens, "cores": decode_cores(),
        "table_fit_source": fitted.efficiency["decode"]["M"].source,
        "seconds": time.perf_counter() - started, "rows": rows, "compared_tables": compared,
        "across_processes_spread_median": statistics.median(r["across_processes_spread"] for r in rows),
        "within_process_spread_median": statistics.median(r["within_process_spread"] for r in rows),
        "error_vs_median_by_class": {c: error_summary([r["error_vs_median"] for r in rows if r["layout_class"] == c])
                                     for c in classes},
        # what a single process's figure gives: each class's median |error| over the cases, per round
        "error_vs_one_process_by_class": {c: [error_summary([r["errors_vs_each"][k] for r in rows
                                                             if r["layout_class"] == c])["median_abs"]
                                              for k in range(processes)] for c in classes},
    }
    for r in rows:
        print(f"{r['preset']:<16} {r['compact']:<26} processes {', '.join(f'{m:.2f}' for m in r['process_medians_ms'])} "
              f"ms (spread {r['across_processes_spread']:.0%}, within {r['within_process_spread']:.0%}); "
              f"model {r['predicted_ms']:.2f} ({r['error_vs_median']:+.0%} of the median)")
    for c in classes:
        print(f"{c}: median |error| vs the median over processes "
              f"{result['error_vs_median_by_class'][c]['median_abs']:.0%}; vs one process, by round: "
              + ", ".join(f"{e:.0%}" for e in result["error_vs_one_process_by_class"][c]))
    for other in compared:
        print(f"{other['table']} ({other['fit_source']}): " + "; ".join(
            f"{c} median |error| vs the median over processes {other['error_vs_median_by_class'][c]['median_abs']:.0%}"
            for c in classes))
    if args.json:
        from composer.files import atomic_write_json

        atomic_write_json(Path(args.json), result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
