"""``loo``: each pattern of the stored GPU runs predicted from the others.


``loo``: the training runs stored in ``benchmarks/results/gpu_check-2026-11-26.json`` (H100 and H200, bf16,
compiled, ``llama-3.2-1b`` widths; :data:`~composer.costmodel.calibration.gpu_runs.GPU_RUNS` lists each with the path of its figure in that file). Repeats
of one configuration are one case (their median); each pattern (at its shape: its runs on both GPUs and with
either S kernel) is held out together and its cases predicted with efficiencies fitted to the *other* patterns.
Errors per case, per held-out pattern, per layout class and pooled. There are 20 runs of 16 configurations and 10
patterns, and A and M always train side by side in the full models, so the data cannot fit one constant per
primitive (E is in one run only): the default, ``grouped``, fits four (``dense``: A, W, M and E; the head; S; D);
``three`` (the head in ``dense``), ``by-kind`` (attention and MLP apart), ``one`` and ``per-primitive`` are reported
beside it. ``--write-table`` stores the grouped fit to all cases as the GPUs' training (and, assumed alike,
prefill) efficiencies; without it the table is not touched.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from composer.costmodel import (
    TABLE_PATH,
    design_row,
    error_summary,
    fit_nonnegative,
    load_table,
    predicted_s,
    relative_error,
    step_work,
    write_table,
)
from composer.costmodel.calibration.gpu_runs import (
    GPU_EXCLUDED,
    GPU_GROUPINGS,
    gpu_arch,
    gpu_cases,
    gpu_observations,
)
from composer.costmodel.calibration.markdown import loo_table
from composer.costmodel.calibration.record import command_line, log, shown, today
from composer.costmodel.calibration.store import store_gpu_fit
from composer.costmodel.classes import LAYOUT_CLASSES
from composer.costmodel.fit import efficiency_name
from composer.files import atomic_write_json, make_output_dir


def gpu_rows(cases: list[dict], table, group: Callable[[str], str]) -> list:
    """One row per case: its step at the device's datasheet roofs, the optimizer's and the embedding gradient's
    assumed efficiencies known, no op term (the table's GPU training op cost is 0: launches overlap)."""
    rows = []
    for case in cases:
        device = table.device(case["device"])
        batch, seq = case["shape"]
        units = step_work(gpu_arch(case), "train", batch, seq, 2)
        known = {efficiency_name("train", key): 1 / device.efficiency_of("train", key).value
                 for key in ("optimizer", "embedding")}
        rows.append(design_row(units, "train", device.peak_flops.value, device.bandwidth.value, None,
                               batch * seq / case["tokens_per_s"], known=known, group=group, label=case["config"],
                               tags={"group": case["group"]}))
    return rows


def cmd_loo(args: argparse.Namespace, argv: list[str] | None) -> int:
    table = load_table(args.table)
    runs = gpu_observations(Path(args.results))
    cases = gpu_cases(runs)
    groups = list(dict.fromkeys(case["group"] for case in cases))
    log(f"loo: {len(runs)} stored GPU training runs, {len(cases)} configurations (repeats joined), {len(groups)} "
        f"patterns held out in turn (both GPUs' runs together), from {shown(args.results)}")
    report: dict[str, Any] = {
        "benchmark": "cost_model loo", "date": today(), "command": command_line(argv), "results": shown(args.results),
        "runs": [{k: run[k] for k in ("label", "device", "pattern", "shape", "path", "tokens_per_s", "config")}
                 for run in runs],
        "cases": [{k: v for k, v in case.items()} for case in cases], "held_out_groups": groups,
        "excluded": GPU_EXCLUDED, "groupings": {}, "error_definition": "predicted / measured tokens/s - 1",
        "method": "each pattern (at its shape: every run of it on either GPU, with either S kernel) held out "
                  "together and predicted from efficiencies fitted to the other patterns; one case per "
                  "configuration, its repeats' median; datasheet peaks, the assumed optimizer efficiency, no op term",
    }
    for name, group in GPU_GROUPINGS.items():
        rows = gpu_rows(cases, table, group)
        predictions: list[dict[str, Any]] = []
        for case, row in zip(cases, rows, strict=True):
            solution = fit_nonnegative([r for r in rows if r.tags["group"] != case["group"]])
            unseen = sorted(n for n, v in row.coefficients.items() if v > 0 and n not in solution)
            zero = sorted(n for n, v in row.coefficients.items() if v > 0 and solution.get(n) == 0)
            entry = {"config": case["config"], "group": case["group"], "layout_class": case["layout_class"],
                     "measured_tokens_per_s": case["tokens_per_s"], "repeats": len(case["repeats"])}
            if unseen or zero:
                entry["not_predicted"] = "; ".join(
                    [f"no other pattern has {', '.join(unseen)}"] * bool(unseen)
                    + [f"the other patterns attribute no time to {', '.join(zero)}"] * bool(zero))
            else:
                tokens = case["shape"][0] * case["shape"][1]
                entry["predicted_tokens_per_s"] = tokens / predicted_s(row, solution)
                entry["error"] = relative_error(entry["predicted_tokens_per_s"], case["tokens_per_s"])
            predictions.append(entry)
        full = fit_nonnegative(rows)
        efficiencies = {n.removeprefix("efficiency.train."): 1 / v for n, v in full.items() if v > 0}
        predicted = [p for p in predictions if "error" in p]
        report["groupings"][name] = {
            "constants_fitted": len(full), "efficiency_all_cases": efficiencies, "predictions": predictions,
            "errors": error_summary([p["error"] for p in predicted]),
            "errors_by_class": {c: error_summary([p["error"] for p in predicted if p["layout_class"] == c])
                                for c in LAYOUT_CLASSES},
            "errors_by_held_out_group": {g: error_summary([p["error"] for p in predicted if p["group"] == g])
                                         for g in groups},
            "not_predicted": sum("error" not in p for p in predictions)}
        s = report["groupings"][name]["errors"]
        log(f"  {name:<14} {len(full)} constants: median |error| {s['median_abs']:.1%}, worst {s['worst_abs']:.1%} "
            f"over {s['n']} configurations ({report['groupings'][name]['not_predicted']} not predictable)")
    out = make_output_dir(args.out)
    path = out / f"cost_model_gpu_loo-{report['date']}.json"
    atomic_write_json(path, report)
    if args.write_table:
        store_gpu_fit(table.raw, report, path)
        write_table(table.raw, args.table)
        log(f"  wrote the grouped GPU training efficiencies to {args.table or TABLE_PATH}")
    print(loo_table(report))
    log(f"results in {path}")
    return 0
