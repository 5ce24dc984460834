"""The stored GPU training runs the ``loo`` command fits and predicts: which figure of
``benchmarks/results/gpu_check-2026-11-26.json`` each is, what was left out and why, one case per configuration
(repeats joined), and how the GPUs' efficiencies are grouped (:func:`grouped`, the one rule both the fit and the
table's writing use).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

from composer.config import ArchConfig
from composer.costmodel.calibration.record import RESULTS
from composer.costmodel.calibration.units import arch_for
from composer.costmodel.classes import layout_class
from composer.errors import ConfigError
from composer.files import read_json_file

# -- the stored GPU runs (benchmarks/results/gpu_check-2026-11-26.json): label, device, pattern, batch, seq,
# the path of the tokens/s figure in the file, and options. Steady-state figures (second-half medians) where the
# run stored one. Full models are llama-3.2-1b at 8 x 2048 (composer train --compile, FSDP on one GPU,
# bf16-mixed); the two-layer "steps" rows are gpu_check's compiled bare loop at 4 x 1024 (W's window 256).
GPU_RESULTS = RESULTS / "gpu_check-2026-11-26.json"
GPU_RUNS: list[dict[str, Any]] = [
    {"label": "run1 (AM)x4", "device": "h200", "pattern": "(AM)x4", "shape": [8, 2048], "vocab": 320,
     "path": ["gpu_check_run1", "c_mfu", 0, "median_tokens_per_s_second_half"]},
    {"label": "run1 (AM)x16", "device": "h200", "pattern": "(AM)x16", "shape": [8, 2048], "vocab": 320,
     "path": ["gpu_check_run1", "c_mfu", 1, "median_tokens_per_s_second_half"]},
    {"label": "run2 (SMWM)x4", "device": "h200", "pattern": "(SMWM)x4", "shape": [8, 2048], "vocab": 320,
     "path": ["run2", "smwm_x4_after_recompile_fix", "summary", "tokens_per_s"], "S": "torch"},
    {"label": "run2 (DMAM)x4 at step 30", "device": "h200", "pattern": "(DMAM)x4", "shape": [8, 2048], "vocab": 320,
     "path": ["run2", "dmam_x4_partial", "progress_tok_s_at_step_30"]},
    {"label": "run3 (AM)x16", "device": "h100", "pattern": "(AM)x16", "shape": [8, 2048], "vocab": 320,
     "path": ["run3_h100", "c_mfu", "AMx16", "median_tokens_per_s_second_half"]},
    {"label": "run3 (DMAM)x4 lr 1e-3", "device": "h100", "pattern": "(DMAM)x4", "shape": [8, 2048], "vocab": 320,
     "path": ["run3_h100", "c_mfu", "DMAMx4_lr1e-3", "median_tokens_per_s_second_half"]},
    {"label": "run3 (DMAM)x4 default lr (stopped at step 11)", "device": "h100", "pattern": "(DMAM)x4",
     "shape": [8, 2048], "vocab": 320, "path": ["run3_h100", "c_mfu", "DMAMx4_default_lr", "tokens_per_s"]},
    {"label": "run3 (SMWM)x4 lr 1e-3", "device": "h100", "pattern": "(SMWM)x4", "shape": [8, 2048], "vocab": 320,
     "path": ["run3_h100", "c_mfu", "SMWMx4_lr1e-3", "median_tokens_per_s_second_half"], "S": "torch"},
    {"label": "run4 (AM)x16", "device": "h200", "pattern": "(AM)x16", "shape": [8, 2048], "vocab": 320,
     "path": ["run4_h200_quick", "mfu", "(AM)x16", "tokens_per_s_steady"]},
    {"label": "run4 (SMWM)x4, S on mamba-ssm's Triton kernels", "device": "h200", "pattern": "(SMWM)x4",
     "shape": [8, 2048], "vocab": 320, "S": "triton",
     "path": ["run4_h200_quick", "mfu", "(SMWM)x4 S on mamba-ssm Triton kernels", "tokens_per_s_steady"]},
    {"label": "run5 (SMWM)x4, S on mamba-ssm's Triton kernels", "device": "h200", "pattern": "(SMWM)x4",
     "shape": [8, 2048], "vocab": 320, "S": "triton", "path": ["run5_h200_quick", "mfu", "SMWMx4", "tokens_per_s_steady"]},
    {"label": "run5 (AM)x16", "device": "h200", "pattern": "(AM)x16", "shape": [8, 2048], "vocab": 320,
     "path": ["run5_h200_quick", "mfu", "AMx16", "tokens_per_s_steady"]},
    {"label": "run1 steps AM", "device": "h200", "pattern": "AM", "shape": [4, 1024],
     "path": ["gpu_check_run1", "b_steps", "rows", 1, "compiled", "tokens_per_s"]},
    {"label": "run1 steps WM", "device": "h200", "pattern": "WM", "shape": [4, 1024], "window": 256,
     "path": ["gpu_check_run1", "b_steps", "rows", 2, "compiled", "tokens_per_s"]},
    {"label": "run1 steps MM", "device": "h200", "pattern": "MM", "shape": [4, 1024],
     "path": ["gpu_check_run1", "b_steps", "rows", 3, "compiled", "tokens_per_s"]},
    {"label": "run1 steps EM", "device": "h200", "pattern": "EM", "shape": [4, 1024],
     "path": ["gpu_check_run1", "b_steps", "rows", 4, "compiled", "tokens_per_s"]},
    {"label": "steps rerun SM", "device": "h200", "pattern": "SM", "shape": [4, 1024], "S": "torch",
     "path": ["steps_rerun", "S", "rows", 0, "compiled", "tokens_per_s"]},
    {"label": "steps rerun DM", "device": "h200", "pattern": "DM", "shape": [4, 1024],
     "path": ["steps_rerun", "D", "rows", 0, "compiled", "tokens_per_s"]},
    {"label": "run3 steps SM", "device": "h100", "pattern": "SM", "shape": [4, 1024], "S": "torch",
     "path": ["run3_h100", "b_steps", "rows", 0, "compiled_tokens_per_s"]},
    {"label": "run3 steps DM", "device": "h100", "pattern": "DM", "shape": [4, 1024],
     "path": ["run3_h100", "b_steps", "rows", 1, "compiled_tokens_per_s"]},
]
GPU_EXCLUDED = {
    "hybrid_train_runs": "(SMWM)x4 and (DMAM)x4 before the recompile-limit fix: dynamo hit its limit and ran later "
                         "variants eagerly, so neither is a compiled step (their notes in the file)",
    "rung0 rows (run4, run5)": "search-1m widths, eager, through the search's evaluator: launch bound, a regime the "
                               "GPU training constants do not model (their op cost is assumed 0)",
    "eager step rows": "the compiled rows of the same steps are used",
}


def grouped(key: str) -> str:
    """The default grouping of the GPUs' efficiencies, the one ``loo --write-table`` stores: S, D and the head each
    their own, A, W, M and E one (``dense``: A and M always train side by side in the stored runs, and E is in one
    run only); the optimizer's is assumed, not fitted."""
    return key if key in ("S", "D", "optimizer", "head") else "dense"


# Which efficiencies the GPU data is fitted with: the default (grouped) and the alternatives loo reports beside it.
GPU_GROUPINGS: dict[str, Callable[[str], str]] = {
    "grouped": grouped,
    "three": lambda key: key if key in ("S", "D", "optimizer") else "dense",
    "by-kind": lambda key: {"A": "attention", "W": "attention", "M": "mlp", "E": "mlp"}.get(key, key),
    "one": lambda key: key if key == "optimizer" else "all",
    "per-primitive": lambda key: key,
}


def gpu_observations(path: Path) -> list[dict[str, Any]]:
    """The runs of ``GPU_RUNS``, each with its measured tokens/s read from ``path``; where the record next to the
    figure stores the model's parameters, they must be those of the architecture the run is costed as."""
    from composer.accounting import analyze

    stored = read_json_file(path, "the stored GPU runs")
    runs = []
    for run in GPU_RUNS:
        value: Any = stored
        for step in run["path"][:-1]:
            value = value[step]
        record, value = value, value[run["path"][-1]]
        params = analyze(gpu_arch(run)).params
        if isinstance(record, dict) and "params" in record and record["params"] != params:
            raise ConfigError(f"{run['label']}: the stored run has {record['params']:,} parameters, the "
                              f"architecture it is costed as {params:,}")
        runs.append({**run, "tokens_per_s": float(value),
                     "config": "|".join(str(run.get(k)) for k in ("device", "pattern", "shape", "S", "window"))})
    return runs


def gpu_arch(run: dict) -> ArchConfig:
    """``llama-3.2-1b`` widths with the run's pattern, vocabulary (``composer train`` used the byte tokenizer's,
    320; gpu_check's steps the preset's) and W window."""
    arch = arch_for("llama-3.2-1b", run["pattern"]).replace(vocab_size=run.get("vocab", 128_256))
    return arch.replace(options={"W": {"window": run["window"]}}) if "window" in run else arch


def gpu_cases(runs: list[dict]) -> list[dict[str, Any]]:
    """One case per configuration (device, pattern, shape, S's kernels, W's window): its repeats are one
    measurement, their median tokens/s, not several cases (three (AM)x16 runs on the H200 counted three times
    before). ``group`` is what leave-one-out holds out together: the pattern at its shape, on both GPUs and with
    either S kernel, so that no run of a held-out pattern (its twin on the other GPU) stays in the fit."""
    cases: dict[str, dict[str, Any]] = {}
    for run in runs:
        case = cases.setdefault(run["config"], {
            **{k: run[k] for k in ("device", "pattern", "shape", "config")},
            **{k: run[k] for k in ("S", "window", "vocab") if k in run},
            "group": f"{run['pattern']} at {run['shape'][0]} x {run['shape'][1]}", "runs": [], "repeats": []})
        case["runs"].append(run["label"])
        case["repeats"].append(run["tokens_per_s"])
    for case in cases.values():
        case["tokens_per_s"] = statistics.median(case["repeats"])
        case["layout_class"] = layout_class(gpu_arch(case))
    return list(cases.values())
