"""The fitted constants written into the table (``constants.json``): the CPU's from ``fit``, the GPUs' training
efficiencies from ``loo --write-table``; every figure names the source it came from, and a source no figure names
any more is dropped.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from composer.costmodel.calibration.cases import KEYS
from composer.costmodel.calibration.gpu_runs import grouped
from composer.costmodel.calibration.record import log, shown


def store_cpu_fit(raw: dict, roofs: dict, counts: dict, constants: dict, results: dict, results_path: Path,
                  args: argparse.Namespace) -> None:
    """Write the fit into the table's ``cpu`` entry and counts, each figure naming this fit as its source."""
    date = results["date"]
    status = {"status": "provisional"} if args.provisional else {}
    where = shown(results_path)
    fit_id, roofs_id, counts_id = f"fit-cpu-{date}", f"roofs-cpu-{date}", f"counts-cpu-{date}"
    common = {"date": date, "command": results["command"], "results": where, "threads": results["threads"],
              "torch": results["torch"], **status}
    note = "non-negative least squares on relative error over the single-layer timings"
    raw["sources"][fit_id] = {"kind": "fitted", **common, "note": note + (f"; {args.note}" if args.note else ""),
                              "train_precision": results["train_precision"], "clock": results["clock"],
                              "widths": results["fit_widths"],
                              "patterns": results["fit_patterns"]}
    raw["sources"][roofs_id] = {"kind": "measured", **common,
                                "note": f"best of fp32 {roofs['gemm_n']}^3 GEMMs; best of "
                                        f"{roofs['copy_bytes'] / 2**20:.0f} MiB copies (read + write)"}
    raw["sources"][counts_id] = {"kind": "measured", **common, "note": "torch.profiler over one call of each"}
    kept = {key: value for key, value in raw["counts"]["per_key"].items() if key not in counts}
    if kept:
        log(f"  counts of {', '.join(kept)} kept from {raw['counts']['source']} (not measured by this fit)")
    raw["counts"] = {"source": counts_id, "unit_note": raw["counts"].get("unit_note", ""),
                     "per_key": {**kept, **counts}}
    cpu = raw["devices"]["cpu"]
    cpu["peak_flops"] = {"value": roofs["peak_flops"], "source": roofs_id}
    cpu["bandwidth"] = {"value": roofs["bandwidth"], "source": roofs_id}
    cpu["threads"] = results["threads"]
    # the constants are this processor's (composer.costmodel.processor): on another, predictions warn once and
    # validate refuses
    cpu["processor"] = results["processor"]
    cpu["description"] = f"this project's CPU ({results['processor']}), eager PyTorch"
    cpu["train_precision"] = results["train_precision"]
    cpu["batch_slices"] = True  # the counts carry per-slice figures: predictions count the CPU kernels' slices
    for phase, value in constants["op_cost_s"].items():
        cpu["op_cost_s"][phase] = {"value": value, "source": fit_id}
    cpu["activation_passes"] = {phase: {key: {"value": value, "source": fit_id} for key, value in keys.items()}
                                for phase, keys in constants["activation_passes"].items()}
    for phase, keys in constants["efficiency"].items():
        for key, value in keys.items():
            if value is not None:
                cpu["efficiency"][phase][key] = {"value": value, "source": fit_id}
            else:
                log(f"  warning: no {phase} time could be attributed to {key}: its efficiency keeps "
                    f"{cpu['efficiency'][phase].get(key)}")
    used = {c["source"] for c in _constants(raw)}
    for source_id in [s for s in raw["sources"] if s not in used and s != raw["counts"]["source"]]:
        del raw["sources"][source_id]  # sources no constant names any more (an older fit's)


def _constants(raw: dict) -> list[dict]:
    out = []
    for device in raw["devices"].values():
        out += [device["peak_flops"], device["bandwidth"], *device["op_cost_s"].values()]
        out += [c for keys in device["efficiency"].values() for c in keys.values()]
        out += [c for keys in device.get("activation_passes", {}).values() for c in keys.values()]
    return out


def store_gpu_fit(raw: dict, report: dict, path: Path) -> None:
    """The grouped fit to every run, as each key's training (and, assumed alike, prefill) efficiency on both GPUs."""
    efficiencies = report["groupings"]["grouped"]["efficiency_all_cases"]
    source_id = f"gpu-fit-{report['date']}"
    where = shown(path)
    s = report["groupings"]["grouped"]["errors"]
    raw["sources"][source_id] = {
        "kind": "fitted", "date": report["date"], "command": report["command"], "results": where,
        "note": f"one efficiency for A, W, M and E ('dense'), one for the head, one for S, one for D, shared by H100 and "
                f"H200, fitted to the {len(report['cases'])} configurations ({len(report['runs'])} stored compiled "
                f"training runs, repeats joined) of {report['results']}; leave one pattern out (both GPUs' runs "
                f"of it together): median |error| {s['median_abs']:.1%}, worst "
                f"{s['worst_abs']:.1%}. S mixes the PyTorch path and mamba-ssm's Triton kernels; D is the "
                f"PyTorch path (fla's backward refuses Hopper with Triton 3.6)"}
    for device in ("h100", "h200"):
        for key in KEYS:
            value = efficiencies[grouped(key)]
            raw["devices"][device]["efficiency"]["train"][key] = {"value": value, "source": source_id}
            raw["devices"][device]["efficiency"]["prefill"][key] = {"value": value, "source": "assumed-gpu-prefill"}
    used = {c["source"] for c in _constants(raw)}
    for stale in [s for s in raw["sources"] if s.startswith(("gpu-fit-", "placeholder-gpu")) and s not in used]:
        del raw["sources"][stale]
