"""The Python parts of ``benchmarks/gpu_check.sh``: kernel packages, a flash-attn check, one compiled training
step per primitive, and the final report. Each subcommand writes one JSON file; ``report`` reads them all.

    python benchmarks/gpu_check.py env --out env.json [--print-missing]
    python benchmarks/gpu_check.py attention --out attention.json
    python benchmarks/gpu_check.py steps --out steps.json                    # CUDA, bf16 autocast, 1B widths
    python benchmarks/gpu_check.py steps --out steps.json --device cpu --precision fp32 --preset tiny \\
        --seq-len 64 --batch-size 2                                           # the same code path on CPU
    python benchmarks/gpu_check.py rung0 --out rung0.json                    # the gpu ladder's rung 0, timed
    python benchmarks/gpu_check.py report --dir runs/gpu-check                # gpu_check.json + the table

``steps``: a model with all six primitives (``AWMESD``), then for each primitive a two-layer pattern (``AM``,
``WM``, ``MM``, ``EM``, ``SM``, ``DM``): the bare training step of ``benchmarks/training_throughput.py`` (ComposerLM's AdamW and
schedule, ``clip_grad_norm_``, bf16 autocast as Lightning's ``bf16-mixed``) on a fresh model, eager and then
with ``composer.training.parallelize.apply_compile`` (what ``composer train --compile`` does), same seed: same
initial weights and batches. Checked: every loss finite, and the compiled losses within a tolerance of the eager
ones step by step. The step times are printed too (few steps: a sanity figure, not a benchmark).

``rung0``: the successive-halving ``gpu`` ladder's rung 0 (``rung-gpu-0``: 5M tokens at ``search-1m``, two rates),
timed on a few patterns at a fraction of its tokens through the search's own training call
(``LanguageModelEvaluator.train_once``, in one process as a search worker), then extrapolated to candidates per hour
at the full rung. Why not ``composer search --budget gpu``: it climbs the whole ladder (hours); and why not
``composer train`` per pattern: each process would pay imports and start-up that a search pays once, and train
with other validation and logging settings than a candidate does.

``report --dir DIR``: the table from the files the parts left in DIR; ``gpu_check.sh --quick`` calls it after every
part (``--summary quick.json --quiet``), reading the plan it wrote (``run.json``) to list the parts still pending.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import json
import math
import platform
import re
import statistics
import sys
import time
import traceback
import xml.etree.ElementTree as ET
from pathlib import Path

_HERE = Path(__file__).resolve().parent
_ROOT = _HERE.parent
for path in (_ROOT, _HERE):  # the repository (composer, primitives) and training_throughput.py next to this file
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

# The cuda extra's distributions: the import a primitive needs from each (same imports as primitives/*.py).
KERNEL_PROBES = {
    "flash-attn": ("flash_attn", "from flash_attn import flash_attn_func", "A, W"),
    # through the primitive's own loader: a mamba-ssm built without its CUDA extensions (gpu_wheels.sh) fails the
    # package's __init__, yet its Triton kernels load around it (primitives/mamba_ssm_triton.py)
    "mamba-ssm": ("mamba_ssm", "from primitives.mamba_ssm_triton import load_triton_kernels\n"
                  "assert load_triton_kernels() is not None, 'the Triton SSD kernels do not import'", "S"),
    "causal-conv1d": ("causal_conv1d", "from causal_conv1d import causal_conv1d_fn", "S"),
    "flash-linear-attention": ("fla", "from fla.ops.gated_delta_rule import chunk_gated_delta_rule", "D"),
}
# distributions that provide the same import (fla's ops also ship as fla-core)
DIST_ALIASES = {"flash-linear-attention": ("flash-linear-attention", "fla-core")}

# All six primitives in one model first (it compiles every primitive, so the rows after it mostly hit Inductor's
# cache, and a timeout later still leaves every primitive checked), then one small pattern per primitive, which
# tells which primitive a failure of the first row comes from.
STEP_PATTERNS = {"all six": "AWMESD", "A": "AM", "W": "WM", "M": "MM", "E": "EM", "S": "SM", "D": "DM"}
# The gpu ladder's rung 0, timed by `rung0` on these patterns: two Transformer-Mamba layouts (one known, one
# blocked) and a published hybrid with S (Nemotron-H's fit); D trains on its PyTorch path on Hopper (fla #640)
# and SDMMSD did not finish within the part's 63 s on an H200 (the quick check's first run), so it is left to
# --patterns.
RUNG0_PATTERNS = ("AMAMAM", "AAMMMM", "SMSAMS")


def fallback_peak_bf16(device_name: str) -> float | None:
    """Dense bf16 peak where Lightning's table has no entry: the product's own table (composer train uses it too),
    plus the H100 for summaries written before composer train had it. Imported here, not at the top: torch and
    Lightning take seconds to import, and ``report`` (run after every part of the quick check) needs neither."""
    from composer.training.throughput import FALLBACK_PEAK_BF16, fallback_peak

    return fallback_peak(device_name, {**FALLBACK_PEAK_BF16, "h100": 989.4e12})


# -- helpers ------------------------------------------------------------------------------------------------
def write_json(path: str | Path, data) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str))
    tmp.replace(path)


def read_json(path: Path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def error_text(err: BaseException, limit: int = 400) -> str:
    return f"{type(err).__name__}: {err}".replace("\n", " ")[:limit]


def dist_version(name: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    for dist in DIST_ALIASES.get(name, (name,)):
        try:
            return version(dist)
        except PackageNotFoundError:
            continue
    return None


def cuda_extra() -> list[str]:
    """The requirement strings of pyproject.toml's ``cuda`` extra."""
    text = (_ROOT / "pyproject.toml").read_text()
    try:
        import tomllib

        return list(tomllib.loads(text)["project"]["optional-dependencies"]["cuda"])
    except ImportError:  # Python 3.10: the one line of the extra
        match = re.search(r"^cuda\s*=\s*\[(.*?)\]", text, re.M | re.S)
        return re.findall(r'"([^"]+)"', match.group(1)) if match else []


def requirement_name(requirement: str) -> str:
    return re.split(r"[<>=!~\[; ]", requirement, maxsplit=1)[0].strip().lower().replace("_", "-")


# -- env ----------------------------------------------------------------------------------------------------
def cmd_env(args) -> int:
    import torch

    info: dict = {
        "torch": torch.__version__, "torch_cuda": torch.version.cuda, "python": platform.python_version(),
        "cuda_available": torch.cuda.is_available(),
    }
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        info.update(device=torch.cuda.get_device_name(0), capability=f"{props.major}.{props.minor}",
                    memory_gib=round(props.total_memory / 2**30, 1), device_count=torch.cuda.device_count(),
                    bf16=torch.cuda.is_bf16_supported())
    try:
        import triton

        info["triton"] = triton.__version__
    except Exception as err:  # noqa: BLE001
        info["triton"] = None
        info["triton_error"] = error_text(err)
    packages = []
    for requirement in cuda_extra():
        name = requirement_name(requirement)
        module, probe, used_by = KERNEL_PROBES.get(name, (name.replace("-", "_"), f"import {name.replace('-', '_')}",
                                                          "?"))
        row = {"requirement": requirement, "name": name, "module": module, "used_by": used_by,
               "version": dist_version(name)}
        try:
            exec(compile(probe, f"<probe {name}>", "exec"), {})
            row["ok"] = True
        except Exception as err:  # noqa: BLE001 - ImportError, OSError (undefined symbol: built for another torch)
            row["ok"] = False
            row["error"] = error_text(err)
        packages.append(row)
    info["packages"] = packages
    info["missing"] = [row["requirement"] for row in packages if not row["ok"]]
    # What the primitives themselves picked up at import (they swallow import errors and fall back to PyTorch).
    try:
        from primitives import attention, gated_deltanet, mamba2

        info["primitives"] = {
            "A/W flash_attn": attention.flash_attn_func is not None,
            "S mamba_ssm ssd": mamba2._ssd_kernel is not None,
            "S mamba_ssm gated norm": mamba2._gated_rmsnorm_kernel is not None,
            "S causal_conv1d": mamba2._conv_kernel is not None,
            "D fla chunk_gated_delta_rule": gated_deltanet._fla_chunk_gated_delta_rule is not None,
        }
    except Exception as err:  # noqa: BLE001
        info["primitives_error"] = error_text(err)
    write_json(args.out, info)
    if args.print_missing:
        for requirement in info["missing"]:
            print(requirement)
    else:
        print(json.dumps(info, indent=2))
    return 0


# -- cuda-tests: the tests that skip without CUDA ------------------------------------------------------------
def cmd_cuda_tests(args) -> int:
    """Print the node ids of test functions with a ``skipif`` decorator that mentions CUDA, written at the test or
    named once at module level (``needs_fla = pytest.mark.skipif(not torch.cuda.is_available(), ...)``)."""
    for node_id in cuda_test_ids(Path(args.root)):
        print(node_id)
    return 0


def cuda_test_ids(root: Path) -> list[str]:
    import ast

    def mentions_cuda(source: str, node: ast.AST) -> bool:
        text = ast.get_source_segment(source, node) or ""
        return "skipif" in text and "cuda" in text.lower()

    found = []
    for path in sorted(root.rglob("test_*.py")):
        source = path.read_text()
        tree = ast.parse(source)
        named = {target.id for node in tree.body if isinstance(node, ast.Assign) and mentions_cuda(source, node.value)
                 for target in node.targets if isinstance(target, ast.Name)}
        for node in ast.walk(tree):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or not node.name.startswith("test"):
                continue
            if any(mentions_cuda(source, d) or (isinstance(d, ast.Name) and d.id in named) for d in node.decorator_list):
                found.append(f"{path.relative_to(_ROOT) if path.is_relative_to(_ROOT) else path}::{node.name}")
    return found


# -- attention: A through flash-attn vs SDPA (the tests cover W's flash path only) ---------------------------
def cmd_attention(args) -> int:
    import torch

    from primitives import attention
    from primitives.attention import AttentionConfig, GroupedQueryAttention
    from primitives.base import InitScheme

    kernel, device = args.kernel_backend, torch.device(args.device)
    cuda = device.type == "cuda"
    result: dict = {"check": f"A attention: {kernel} vs sdpa, {'bf16 autocast' if cuda else 'float32'}: output, "
                             "input and weight gradients"}
    if device.type == "cuda" and not torch.cuda.is_available():
        result.update(status="skip", reason="needs CUDA")
    elif kernel == "flash" and (device.type != "cuda" or attention.flash_attn_func is None):
        result.update(status="skip", reason="needs CUDA and flash_attn (the cuda extra); flash_attn "
                      f"{'imports' if attention.flash_attn_func is not None else 'does not import'}")
    else:
        try:
            torch.manual_seed(0)
            widths = dict(d_model=1024, n_heads=16, n_kv_heads=8, head_dim=64)
            modules = {}
            for backend in (kernel, "sdpa"):
                module = GroupedQueryAttention(AttentionConfig(**widths, backend=backend))
                if not modules:
                    module.reset_parameters(InitScheme(std=0.02, n_layers=1))
                else:
                    module.load_state_dict(next(iter(modules.values())).state_dict())
                modules[backend if not modules else "reference"] = module.to(device)
            # fp32 weights under bf16 autocast, as a bf16-mixed training step runs the layer
            x = torch.randn(2, args.seq_len, widths["d_model"], device=device)
            grad = torch.randn_like(x)
            outs = {}
            for name, module in modules.items():
                xi = x.clone().requires_grad_(True)
                with torch.autocast("cuda", dtype=torch.bfloat16, enabled=cuda):
                    y = module(xi)
                y.float().backward(grad)
                outs[name] = {"output": y.float(), "input_grad": xi.grad.float(),
                              "wqkv_grad": module.wqkv.weight.grad.float(), "wo_grad": module.wo.weight.grad.float()}
            errors = {}
            for name, ref in outs["reference"].items():
                got = outs[kernel][name]
                errors[name] = ((got - ref).abs().max() / ref.abs().max().clamp_min(1e-12)).item()
            ok = all(math.isfinite(e) and e < args.tolerance for e in errors.values())
            result.update(status="pass" if ok else "fail", relative_max_error=errors, tolerance=args.tolerance,
                          flash_attn=dist_version("flash-attn"))
        except Exception as err:  # noqa: BLE001
            result.update(status="fail", error=error_text(err), traceback=traceback.format_exc()[-2000:])
    write_json(args.out, result)
    print(json.dumps(result, indent=2))
    return 0


# -- steps: one training step per primitive, eager vs compiled -----------------------------------------------
def kernels_used(model, device: torch.device, bf16: bool) -> list[str]:
    """The kernels each layer's primitive picks for tensors like the step's (its own dispatch functions)."""
    import torch

    used = []
    dtype = torch.bfloat16 if bf16 else torch.float32
    probe = torch.empty(1, device=device, dtype=dtype)
    for layer in model.layers:
        primitive = layer.primitive
        try:
            if hasattr(primitive, "_use_flash"):
                used.append(f"{primitive.symbol}:{'flash' if primitive._use_flash(probe) else 'sdpa'}")
            elif hasattr(primitive, "_kernels"):
                kernels = primitive._kernels(probe)
                names = [k for k, on in kernels.items() if on]
                used.append(f"{primitive.symbol}:{'+'.join(names) if names else 'torch'}")
            elif hasattr(primitive, "_use_kernel"):
                used.append(f"{primitive.symbol}:{'fla' if primitive._use_kernel(probe) else 'torch'}")
        except Exception as err:  # noqa: BLE001
            used.append(f"{primitive.symbol}:? ({error_text(err, 80)})")
    return sorted(set(used))


def run_mode(arch, args, device: torch.device, compiled: bool) -> dict:
    import torch

    from training_throughput import BareLoop, compiled_graphs, graph_breaks

    bf16 = args.precision == "bf16"
    warmup = args.compile_warmup if compiled else args.warmup
    record: dict = {"mode": "compiled" if compiled else "eager", "warmup": warmup, "steps": args.steps}
    loop = None
    try:
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
        if compiled:
            # every row compiles from scratch, as a training run does (Inductor's on-disk cache still applies),
            # so its graph breaks are its own and no row inherits code or recompile counts from another
            torch._dynamo.reset()
        breaks, graphs = graph_breaks(), compiled_graphs()
        # one LR schedule for both modes (its length sets every step's LR), so their losses compare step by step
        total = max(args.warmup, args.compile_warmup) + args.steps
        loop = BareLoop(arch, args.batch_size, args.seq_len, device, bf16, total_steps=total, seed=args.seed,
                        compile=compiled)
        record["params"] = loop.params
        record["kernels"] = kernels_used(loop.model, device, bf16)
        warm = loop.timed(warmup)
        times = loop.timed(args.steps)
        record.update(
            losses=[float(loss) for loss in loop.losses],
            warmup_step_times_s=warm, step_times_s=times,
            tokens_per_s=loop.tokens_per_step / statistics.median(times),
            peak_memory_gib=torch.cuda.max_memory_allocated(device) / 2**30 if device.type == "cuda" else None,
        )
        if compiled:
            record.update(graph_breaks=graph_breaks() - breaks, graphs=compiled_graphs() - graphs)
    except Exception as err:  # noqa: BLE001 - a compile error or a kernel failure: report it, go on
        record["error"] = error_text(err)
        record["traceback"] = traceback.format_exc()[-3000:]
    finally:
        del loop
        import gc

        gc.collect()
        if device.type == "cuda":
            torch.cuda.empty_cache()
    return record


def compare(eager: dict, compiled: dict, args) -> dict:
    """Status of one pattern: finite losses, and compiled close to eager step by step."""
    if "error" in eager or "error" in compiled:
        return {"status": "fail", "reason": "; ".join(f"{r['mode']}: {r['error']}" for r in (eager, compiled)
                                                      if "error" in r)}
    n = min(len(eager["losses"]), len(compiled["losses"]))
    finite = all(math.isfinite(v) for v in eager["losses"] + compiled["losses"])
    rel = [abs(c - e) / max(abs(e), 1e-6) for e, c in zip(eager["losses"][:n], compiled["losses"][:n])]
    out = {"finite": finite, "first_loss_rel_diff": rel[0] if rel else None,
           "max_loss_rel_diff": max(rel) if rel else None, "compared_steps": n,
           "speedup": compiled["tokens_per_s"] / eager["tokens_per_s"]}
    if not finite:
        out.update(status="fail", reason="non-finite loss")
    elif rel and rel[0] > args.first_tolerance:
        out.update(status="fail", reason=f"first loss differs by {rel[0]:.1e} (> {args.first_tolerance:g})")
    elif rel and max(rel) > args.tolerance:
        out.update(status="fail", reason=f"loss differs by {max(rel):.1e} within {n} steps (> {args.tolerance:g})")
    else:
        out["status"] = "pass"
    return out


def cmd_steps(args) -> int:
    import torch

    from composer.presets import get_preset

    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("steps: --device cuda but torch sees no CUDA device", file=sys.stderr)
        return 2
    if device.type == "cpu" and args.threads:
        torch.set_num_threads(args.threads)
    if args.precision == "bf16" and device.type != "cuda":
        print("steps: bf16 autocast here is CUDA's (as Lightning's bf16-mixed on a GPU); use --precision fp32 "
              "on CPU", file=sys.stderr)
        return 2
    # Past its recompile limit dynamo runs a frame eagerly without a word; here a hit is an error instead, so a
    # "compiled" row can not quietly be an eager one.
    if hasattr(torch._dynamo.config, "fail_on_recompile_limit_hit"):
        torch._dynamo.config.fail_on_recompile_limit_hit = True

    base = get_preset(args.preset).arch
    symbols = [s for s in STEP_PATTERNS if s in args.primitives or (s == "all six" and args.all_six)]
    result: dict = {
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else f"CPU ({platform.machine()})",
        "torch": torch.__version__, "preset": args.preset, "seq_len": args.seq_len, "batch_size": args.batch_size,
        "precision": "bf16 autocast" if args.precision == "bf16" else "float32", "window_W": args.window,
        "warmup": args.warmup, "compile_warmup": args.compile_warmup, "steps": args.steps,
        "tolerance": {"first_loss": args.first_tolerance, "any_loss": args.tolerance},
        "requested": symbols,  # the report's "not reached" compares against this, not against every primitive
        "rows": [],
    }
    started = time.perf_counter()
    for symbol in symbols:
        pattern = STEP_PATTERNS[symbol]
        arch = base.with_pattern(pattern).replace(
            max_seq_len=max(base.max_seq_len, args.seq_len),
            options={**base.options, "W": {**base.options.get("W", {}), "window": args.window}},
        )
        row = {"primitive": symbol, "pattern": pattern}
        t0 = time.perf_counter()
        row["eager"] = run_mode(arch, args, device, compiled=False)
        row["compiled"] = run_mode(arch, args, device, compiled=True)
        row.update(compare(row["eager"], row["compiled"], args))
        row["seconds"] = time.perf_counter() - t0
        result["rows"].append(row)
        result["seconds"] = time.perf_counter() - started
        write_json(args.out, result)  # after every row: a timeout still leaves the rows done
        e, c = row["eager"], row["compiled"]
        print(f"{symbol:<8} {pattern:<7} {row['status']:<5} "
              f"eager losses {fmt_losses(e)}  compiled {fmt_losses(c)}  "
              f"tokens/s {fmt(e.get('tokens_per_s'), ',.0f')} -> {fmt(c.get('tokens_per_s'), ',.0f')}  "
              f"first compiled step {fmt((c.get('warmup_step_times_s') or [None])[0], '.1f')} s  "
              f"graph breaks {c.get('graph_breaks', '-')}  kernels {','.join(c.get('kernels') or e.get('kernels') or ['-'])}"
              + (f"  ({row['reason']})" if row.get("reason") else ""), flush=True)
    return 0


def fmt(value, spec: str, missing: str = "-") -> str:
    return missing if value is None else format(value, spec)


def fmt_losses(record: dict) -> str:
    losses = record.get("losses")
    return "[" + ", ".join(f"{v:.4f}" for v in losses[:3]) + (", ...]" if len(losses) > 3 else "]") if losses else "-"


# -- rung0: the gpu ladder's rung 0, timed at a fraction of its tokens ---------------------------------------
def reduced_budget(name: str, fraction: float, val_tokens: int | None = None):
    """The lm budget ``name``, and the same budget at ``fraction`` of its tokens in whole steps (at least one): a
    quick check cannot train the rung's full tokens per pattern, so it times the same runs shorter and extrapolates."""
    import dataclasses

    from composer.errors import ConfigError
    from search.lm import get_lm_budget

    if not 0 < fraction <= 1:
        raise ConfigError(f"--fraction must be in (0, 1], got {fraction:g}")
    spec = get_lm_budget(name)
    step = spec.seq_len * spec.batch_size
    changes = {"name": f"{spec.name}x{fraction:g}", "tokens": max(1, int(spec.tokens * fraction) // step) * step}
    if val_tokens is not None:
        changes["val_tokens"] = val_tokens
    return spec, dataclasses.replace(spec, **changes)


def rung0_estimate(rows: list[dict], full_tokens: int, tokens: int, runs: int) -> dict:
    """Candidates per hour of one search worker at the full rung, from runs timed at ``tokens`` of its
    ``full_tokens``; a candidate is ``runs`` runs (one per rate of the budget). Only runs that trained count.

    Two figures, because a short run's time is part fixed (model build, compilation, the final validation) and
    part per token. ``candidates_per_hour`` adds the remaining tokens at each run's own training rate to its time
    (the fixed part paid once, as by the full run). ``candidates_per_hour_scaled`` multiplies the whole time by
    full/reduced tokens, so it pays the fixed part that many times: a lower bound."""
    timed = [row for row in rows if row.get("status") == "pass"]
    if not timed:
        return {}
    ratio = full_tokens / tokens
    scaled = statistics.fmean(row["seconds"] * ratio for row in timed)
    at_rate = statistics.fmean(row["seconds"] + (full_tokens - tokens) / row["tokens_per_s"] if row.get("tokens_per_s")
                               else row["seconds"] * ratio for row in timed)
    return {"patterns_timed": len(timed), "token_ratio": ratio, "runs_per_candidate": runs,
            "seconds_per_run_measured": statistics.fmean(row["seconds"] for row in timed),
            "seconds_per_candidate": runs * at_rate, "candidates_per_hour": 3600 / (runs * at_rate),
            "seconds_per_candidate_scaled": runs * scaled, "candidates_per_hour_scaled": 3600 / (runs * scaled)}


def time_rung0_run(evaluator, pattern: str, lr: float) -> dict:
    """One of a candidate's runs through the search's own call (``LanguageModelEvaluator.train_once``: the
    TrainConfig, validation and precision of ``composer search --evaluator lm``), timed end to end."""
    row: dict = {"pattern": pattern, "lr": lr}
    started = time.perf_counter()
    try:
        from search.lm import as_run

        run = as_run(evaluator.train_once(pattern, lr, seed=0))
        loss, tokens_per_s = run.loss, run.tokens_per_s
    except Exception as err:  # noqa: BLE001 - a kernel or memory failure of one pattern: record it, time the next
        row.update(status="fail", error=error_text(err), traceback=traceback.format_exc()[-2000:])
    else:
        row.update(val_loss=loss, tokens_per_s=tokens_per_s, status="pass" if loss is not None else "fail")
        if loss is None:
            row["reason"] = f"diverged at lr {lr:g}"
    row["seconds"] = time.perf_counter() - started
    return row


def cmd_rung0(args) -> int:
    """Each pattern once, at the budget's lowest rate and ``--fraction`` of its tokens, in this one process (as a
    search worker trains its candidates); rung0.json after every pattern, so a timeout keeps those done."""
    import torch

    from composer.errors import ConfigError
    from search.lm import LanguageModelEvaluator

    try:
        spec, reduced = reduced_budget(args.budget, args.fraction, args.val_tokens)
        evaluator = LanguageModelEvaluator(reduced, widths=args.widths, precision=args.precision, compile=args.compile)
    except ConfigError as err:
        print(f"rung0: {err}", file=sys.stderr)
        return 2
    step = spec.seq_len * spec.batch_size
    full_tokens = spec.tokens // step * step  # what the full rung trains: train rounds down to whole steps
    patterns = [pattern for pattern in args.patterns.split(",") if pattern]
    result: dict = {
        "check": f"{spec.name} ({spec.description}) timed at {reduced.tokens:,} of its {full_tokens:,} tokens",
        "budget": spec.name, "fraction": args.fraction, "full_tokens": full_tokens, "tokens": reduced.tokens,
        "seq_len": spec.seq_len, "batch_size": spec.batch_size, "widths": evaluator.widths,
        "lrs": list(spec.lrs), "lr": spec.lrs[0], "val_tokens": reduced.val_tokens,
        "precision": evaluator.precision, "compile": args.compile,
        "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else f"CPU ({platform.machine()})",
        "method": "one run per pattern at the lowest rate, through LanguageModelEvaluator.train_once, in one process; "
                  "candidates_per_hour: each run's time plus the remaining tokens at its training tok/s, times the "
                  "budget's runs per candidate; candidates_per_hour_scaled: the whole time x full/reduced tokens",
        "requested": patterns, "rows": [],
    }
    for pattern in patterns:
        row = time_rung0_run(evaluator, pattern, spec.lrs[0])
        result["rows"].append(row)
        result.update(rung0_estimate(result["rows"], full_tokens, reduced.tokens, spec.runs))
        write_json(args.out, result)  # after every pattern: a timeout still leaves the patterns done
        print(f"rung0 {pattern:<8} {row['status']:<4} {row['seconds']:.1f} s  val loss {fmt(row.get('val_loss'), '.4f')}  "
              f"tok/s {fmt(row.get('tokens_per_s'), ',.0f')}" + (f"  ({row.get('reason') or row.get('error')})"
                                                                if row["status"] != "pass" else ""), flush=True)
    if result.get("candidates_per_hour"):
        print(f"rung0: {result['candidates_per_hour']:.0f} candidates/hour at {spec.name}'s full {full_tokens:,} "
              f"tokens x {spec.runs} runs (whole runs scaled: {result['candidates_per_hour_scaled']:.0f}/hour)")
    return 0 if all(row["status"] == "pass" for row in result["rows"]) else 1


# -- report -------------------------------------------------------------------------------------------------
def junit_cases(path: Path) -> list[dict]:
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        return []
    cases = []
    for case in root.iter("testcase"):
        status, detail = "pass", ""
        for tag, name in (("failure", "fail"), ("error", "fail"), ("skipped", "skip")):
            element = case.find(tag)
            if element is not None:
                status, detail = name, (element.get("message") or element.text or "").strip().splitlines()[0:1]
                detail = detail[0] if detail else ""
                break
        cases.append({"test": f"{case.get('classname', '')}::{case.get('name', '')}", "status": status,
                      "seconds": float(case.get("time") or 0), "detail": detail[:200]})
    return cases


# A part's status: parts.tsv's sixth column, else its exit status: done (0), timed out (124, 137), failed. Written
# ones: skipped (on purpose: no prelude to source, steps in quick mode), no time (the budget was spent first). A
# planned part (run.json) with no row yet is pending, and not reached once the check has ended. A part in INCOMPLETE
# leaves the check incomplete: what it measures is missing.
INCOMPLETE = ("timed out", "no time", "pending", "not reached")


def parts_table(path: Path, planned=()) -> dict[str, dict]:
    """``parts.tsv`` written by gpu_check.sh: part, exit status, seconds, log, and in newer rows the part's limit,
    a written status and a detail; a planned part without a row yet is pending."""
    parts: dict[str, dict] = {name: {"status": "pending"} for name in planned}
    try:
        lines = path.read_text().splitlines()
    except OSError:
        lines = []
    for line in lines:
        name, rc, seconds, log, limit, status, detail = (line.split("\t") + [""] * 6)[:7]
        code = int(rc) if rc.lstrip("-").isdigit() else None
        parts[name] = {"status": status or ("done" if code == 0 else "timed out" if code in (124, 137) else "failed"),
                       "rc": code, "seconds": float(seconds) if seconds else None, "log": log,
                       "limit_s": int(limit) if limit.isdigit() else None}
        if detail:
            parts[name]["detail"] = detail
    return parts


def absent_row(code: str, check: str, part: dict | None, missing: str) -> tuple[str, str, str, str]:
    """The row of a check whose result file is missing, as its part explains it: not run yet (pending), not run on
    purpose or for lack of time (skip, with the part's reason), or run and failed (its exit status and log)."""
    status = (part or {}).get("status")
    if status == "pending":
        return code, check, "pending", "not run yet"
    if status in ("skipped", "no time", "not reached"):
        return code, check, "skip", part.get("detail") or status
    if part is None:
        return code, check, "fail", f"no {missing}: its part did not run"
    timed_out = " (timed out)" if status == "timed out" else ""
    return code, check, "fail", f"no {missing}; exit status {part.get('rc')}{timed_out}, see {part.get('log')}"


def steady_tokens_per_s(run: Path) -> dict:
    """Per-step tokens/s from the run's CSV log (perf/tokens_per_s, logged every --log-interval steps), with the
    logged MFU and the last training loss: all a run killed after its steps, before summary.json, leaves."""
    rates, mfus, losses = [], [], []
    for metrics in sorted(run.glob("logs/version_*/metrics.csv")):
        with metrics.open() as handle:
            for row in csv.DictReader(handle):
                value = row.get("perf/tokens_per_s")
                if value:
                    rates.append(float(value))
                    if row.get("perf/mfu"):
                        mfus.append(float(row["perf/mfu"]))
                if row.get("train/loss"):
                    losses.append(float(row["train/loss"]))
    if len(rates) < 4:
        return {"logged_steps": len(rates)}
    half = rates[len(rates) // 2:]  # the second half: compilation and warmup long over
    steady = {"logged_steps": len(rates), "median_tokens_per_s_second_half": statistics.median(half),
              "first_step_tokens_per_s": rates[0], "last_logged_train_loss": losses[-1] if losses else None}
    if len(mfus) == len(rates):
        steady["logged_mfu_second_half"] = statistics.median(mfus[len(mfus) // 2:])
    return steady


def mfu_from_log(record: dict, run: Path) -> dict:
    """A run with no summary.json: its steady figures from the CSV log when it logged its steps (killed in the
    final validation's recompilation or its checkpoint, as an H200's quick check saw twice), else a failure."""
    record.update(steady_tokens_per_s(run))
    loss = record.get("last_logged_train_loss")
    if record.get("logged_mfu_second_half") is None or loss is None or not math.isfinite(loss):
        record["status"] = "fail"
        record["reason"] = "no summary.json (see the log)"
        return record
    record.update(status="pass", from_log=True, train_loss=loss, mfu_second_half=record["logged_mfu_second_half"],
                  mfu_source="the CSV log's perf/mfu (Lightning's peak table); no summary.json")
    return record


def mfu_run(out: Path, label: str, device_name: str | None) -> dict:
    run = out / f"mfu-{label}"
    summary = read_json(run / "summary.json")
    record: dict = {"label": label, "run_dir": str(run)}
    if summary is None:
        return mfu_from_log(record, run)
    keys = ("pattern", "compact", "widths", "params", "tokens_per_s", "tokens_per_s_per_device", "mfu", "flops_per_token",
            "peak_memory_bytes", "steps", "tokens", "seq_len", "batch_size", "strategy", "precision", "compile", "train_loss",
            "val_loss", "wall_time_s", "world_size")
    record.update({key: summary.get(key) for key in keys})
    record.update(steady_tokens_per_s(run))
    record["mfu_source"] = "summary.json (Lightning's peak table)" if summary.get("mfu") is not None else None
    peak = None
    if summary.get("mfu") is None and device_name:
        peak = fallback_peak_bf16(device_name)
        if peak and summary.get("tokens_per_s_per_device"):
            record["mfu"] = summary["tokens_per_s_per_device"] * summary["flops_per_token"] / peak
            record["mfu_source"] = f"computed: {peak / 1e12:.1f} TFLOP/s dense bf16 (not in Lightning's table)"
    if summary.get("mfu") is not None:
        peak = summary["tokens_per_s_per_device"] * summary["flops_per_token"] / summary["mfu"]
    if peak and record.get("median_tokens_per_s_second_half"):
        record["mfu_second_half"] = (record["median_tokens_per_s_second_half"] / (summary.get("world_size") or 1)
                                     * summary["flops_per_token"] / peak)
    finite = summary.get("train_loss") is not None and math.isfinite(summary["train_loss"])
    record["status"] = "pass" if finite and summary.get("tokens_per_s") else "fail"
    if not finite:
        record["reason"] = f"train_loss {summary.get('train_loss')}"
    return record


def mfu_record(out: Path, label: str, device_name: str | None, part: dict | None) -> dict:
    """One MFU run's record, by its part first: a run not (yet) run is pending or skipped whatever an older run left
    in its directory, and a failed one names its exit status and log."""
    status = (part or {}).get("status")
    if status in ("pending", "skipped", "no time", "not reached"):
        _, _, row_status, reason = absent_row("c", label, part, "summary.json")
        return {"label": label, "status": row_status, "reason": reason}
    record = mfu_run(out, label, device_name)
    if part and part.get("detail") and record["status"] != "pass":  # not run, and why (a pattern not resolved)
        record["reason"] = part["detail"]
    elif part and part.get("rc") not in (0, None) and record["status"] != "pass":
        record["reason"] = (f"exit status {part['rc']}" + (" (timed out)" if status == "timed out" else "")
                            + f"; see {part.get('log')}")
    return record


def prelude_rows(part: dict | None) -> list[tuple[str, str, str, str]]:
    """Row 0 of the quick check: the carried wheels, sourced (pass), absent (skip: recorded, never fatal) or not."""
    if part is None:
        return []
    status = {"done": "pass", "skipped": "skip", "pending": "pending"}.get(part["status"], "fail")
    return [("0", "carried wheels (gpu_prelude.sh)", status, part.get("detail") or part["status"])]


def kernel_rows(cases: list[dict], attention: dict | None, parts: dict) -> list[tuple[str, str, str, str]]:
    """Part a: each CUDA-only test (kernel against the PyTorch path), and A through flash-attn against SDPA."""
    rows = [("a", case["test"].split(".")[-1], case["status"], case["detail"] or f"{case['seconds']:.1f} s")
            for case in cases]
    if not cases:
        rows.append(absent_row("a", "CUDA-only tests", parts.get("cuda-tests"), "JUnit report"))
    check = "A flash-attn vs SDPA (max rel. error)"
    if attention:
        detail = attention.get("reason") or attention.get("error") or ", ".join(
            f"{k} {v:.1e}" for k, v in attention.get("relative_max_error", {}).items())
        rows.append(("a", check, attention["status"], detail))
    elif "attention" in parts:
        rows.append(absent_row("a", check, parts["attention"], "attention.json"))
    return rows


def steps_rows(steps: dict | None, part: dict | None) -> list[tuple[str, str, str, str]]:
    """Part b: one compiled training step per primitive against eager, and the primitives asked for but not reached."""
    if not (steps and steps.get("rows")):
        return [absent_row("b", "compiled step per primitive", part, "steps.json")]
    rows = []
    for row in steps["rows"]:
        e, c = row["eager"], row["compiled"]
        if row["status"] == "pass" or "losses" in e and "losses" in c:
            detail = (f"loss {e['losses'][0]:.4f} vs {c['losses'][0]:.4f}, max rel. diff "
                      f"{fmt(row.get('max_loss_rel_diff'), '.1e')} over {row.get('compared_steps')} steps; "
                      f"tok/s x{fmt(row.get('speedup'), '.2f')}; graph breaks {c.get('graph_breaks', '-')}; "
                      f"kernels {' '.join(c.get('kernels') or ['-'])}")
            if row["status"] != "pass":
                detail = f"{row.get('reason')}; {detail}"
        else:
            detail = row.get("reason", "")
        rows.append(("b", f"{row['primitive']} ({row['pattern']}) eager vs compiled, "
                     f"{'bf16' if 'bf16' in steps['precision'] else 'fp32'}", row["status"], detail))
    # a steps.json from before "requested" existed asked for them all
    missing = [s for s in steps.get("requested", STEP_PATTERNS) if s not in {r["primitive"] for r in steps["rows"]}]
    if missing:
        part = part or {}
        rows.append(("b", f"not reached: {', '.join(missing)}", "fail",
                     f"exit status {part.get('rc')}" + (" (timed out)" if part.get("rc") == 124 else "")))
    return rows


def mfu_rows(mfu: list[dict]) -> list[tuple[str, str, str, str]]:
    """Part c: tokens/s and MFU of each `composer train` run at 1B widths."""
    rows = []
    for record in mfu:
        if record["status"] == "pass" and record.get("from_log"):
            detail = (f"{record['logged_steps']} steps logged, then killed before summary.json; 2nd half median "
                      f"{fmt(record.get('median_tokens_per_s_second_half'), ',.0f')} tok/s, MFU "
                      f"{fmt(record.get('mfu_second_half'), '.1%')} (CSV log); last loss "
                      f"{fmt(record.get('train_loss'), '.3f')}")
        elif record["status"] == "pass":
            detail = (f"{fmt(record.get('tokens_per_s'), ',.0f')} tok/s, MFU {fmt(record.get('mfu'), '.1%')} "
                      f"(summary.json, steps 2..{record.get('steps')}); 2nd half median "
                      f"{fmt(record.get('median_tokens_per_s_second_half'), ',.0f')} tok/s, MFU "
                      f"{fmt(record.get('mfu_second_half'), '.1%')}; "
                      f"peak {fmt((record.get('peak_memory_bytes') or 0) / 2**30 or None, '.1f')} GiB; "
                      f"{fmt(record.get('params'), ',')} params")
        else:
            detail = record.get("reason", "")
        compiled = "eager" if record.get("compile") is False else "compile"  # summaries before the key: compile
        what = (f"{record.get('widths')} widths, {record.get('strategy')} {record.get('precision')}, {compiled}"
                if record.get("strategy") else "composer train")
        rows.append(("c", f"{record['label']}: {what}", record["status"], detail))
    return rows


def rung0_rows(rung0: dict | None, part: dict | None) -> list[tuple[str, str, str, str]]:
    """Part d: the gpu ladder's rung 0 in candidates per hour, and a row for each pattern that failed or was not
    reached (the figure then rests on the others)."""
    if not rung0:
        return [absent_row("d", "rung 0 of the gpu ladder: candidates/hour", part, "rung0.json")] if part else []
    check = (f"{rung0['budget']} throughput, {rung0['widths']} widths, {rung0['precision']}"
             + (", compiled" if rung0.get("compile") else ""))
    if rung0.get("candidates_per_hour"):
        rows = [("d", check, "pass",
                 f"{rung0['candidates_per_hour']:.0f} candidates/hour, extrapolated to the full rung "
                 f"({rung0['full_tokens']:,} tokens x {rung0['runs_per_candidate']} rates) from "
                 f"{rung0['patterns_timed']} patterns at {rung0['tokens']:,} tokens, "
                 f"{rung0['seconds_per_run_measured']:.1f} s per run; whole runs scaled: "
                 f"{rung0['candidates_per_hour_scaled']:.0f}/hour")]
    else:
        rows = [("d", check, "fail", "no pattern trained")]
    rows += [("d", f"{check}: {row['pattern']}", "fail", row.get("reason") or row.get("error", ""))
             for row in rung0["rows"] if row["status"] != "pass"]
    missing = [pattern for pattern in rung0.get("requested", ()) if pattern not in {r["pattern"] for r in rung0["rows"]}]
    if missing:
        part = part or {}
        rows.append(("d", f"{check}: not reached: {', '.join(missing)}", "fail",
                     f"part {part.get('status', '?')}, exit status {part.get('rc')}, see {part.get('log')}"))
    return rows


def overall_status(statuses: list[str], parts: dict) -> str:
    """fail: a check failed; running: parts still pending; incomplete: a part timed out or had no time (what it
    measures is missing, though nothing failed); else pass."""
    if "fail" in statuses:
        return "fail"
    if any(part["status"] == "pending" for part in parts.values()):
        return "running"
    if any(part["status"] in INCOMPLETE for part in parts.values()):
        return "incomplete"
    return "pass"


def table_lines(report: dict, rows: list[tuple[str, str, str, str]], out: Path, work: Path) -> list[str]:
    """The printed report: the machine and its kernel packages, then one line per check; ``out`` is the summary
    written, ``work`` the parts' directory."""
    env, install = report["environment"], report["install"]
    mode = " (quick)" if report["mode"] == "quick" else ""
    where = "DRY RUN on the CPU, tiny settings" if report["dry_run"] else \
        f"{env.get('device', '?')} (x{env.get('device_count', '?')})"
    lines = ["", f"GPU check{mode}: {where}, torch {env.get('torch')} (CUDA {env.get('torch_cuda')}), triton "
                 f"{env.get('triton')}, python {env.get('python')}"]
    for package in env.get("packages", []):
        state = (f"{package.get('version') or '?'} ok" if package["ok"]
                 else f"MISSING ({package.get('error', '')[:90]})")
        lines.append(f"  {package['name']:<24} for {package['used_by']:<5} {state}")
    if install:
        lines.append(f"  install: {install.get('status')}: {install.get('detail', '')}")
    if env.get("missing"):
        lines.append("  -> the primitives fall back to their pure-PyTorch paths where a kernel package is missing; "
                     "the tests")
        lines.append("     that compare those kernels are SKIPPED below, not passed")
    lines.append("")
    width = max(len(check) for _, check, _, _ in rows)
    lines.append(f"  {'':<2} {'check':<{width}}  {'result':<7}  detail")
    lines.append("  " + "-" * (width + 60))
    lines += [f"  {part:<2} {check:<{width}}  {status.upper():<7}  {detail}" for part, check, status, detail in rows]
    lines.append("")
    statuses = [status for _, _, status, _ in rows]
    counts = ", ".join(f"{statuses.count(s)} {word}" for s, word in
                       (("pass", "passed"), ("skip", "skipped"), ("fail", "failed"), ("pending", "pending")))
    elapsed = f" in {report['elapsed_s']:.0f} s of the {report['budget_s']} s budget" if report.get("elapsed_s") else ""
    if report["mode"] == "quick":
        lines.append(f"  {counts} -> {report['overall'].upper()}{elapsed}; summary {out}, the runs in {work}/")
    else:
        lines.append(f"  {counts} -> {report['overall'].upper()}{elapsed}; everything in {work}/ (gpu_check.json, logs)")
    return lines


def cmd_report(args) -> int:
    out = Path(args.dir)
    run = read_json(out / "run.json") or {}  # the quick check's plan (mode, budget, parts); the full check has none
    env = read_json(out / "env.json") or read_json(out / "env_before.json") or {}
    before = read_json(out / "env_before.json") or {}
    parts = parts_table(out / "parts.tsv", run.get("planned", ()))
    if args.final:
        for part in parts.values():
            if part["status"] == "pending":
                part.update(status="not reached", detail="not reached: the check ended before it")
    install = read_json(out / "install.json") or {}
    attention = read_json(out / "attention.json")
    steps = read_json(out / "steps.json")
    rung0 = read_json(out / "rung0.json")
    cases = junit_cases(out / "cuda_tests.xml")
    labels = [label for label in args.mfu.split(",") if label]
    mfu = [mfu_record(out, label, env.get("device"), parts.get(f"mfu-{label}")) for label in labels]

    rows = [*prelude_rows(parts.get("prelude")), *kernel_rows(cases, attention, parts),
            *steps_rows(steps, parts.get("steps")), *mfu_rows(mfu), *rung0_rows(rung0, parts.get("rung0"))]
    statuses = [status for _, _, status, _ in rows]
    overall = overall_status(statuses, parts)
    report = {
        "benchmark": "gpu_check", "mode": run.get("mode", "full"), "dry_run": run.get("dry_run", False),
        "finished": datetime.datetime.now().isoformat(timespec="seconds"), "final": args.final,
        "overall": overall, "complete": not any(part["status"] in INCOMPLETE for part in parts.values()),
        "budget_s": run.get("budget_s"), "elapsed_s": time.time() - run["started"] if run.get("started") else None,
        "environment": env, "packages_before_install": before.get("packages"), "install": install, "parts": parts,
        "a_cuda_tests": cases, "a_attention_flash": attention, "b_steps": steps, "c_mfu": mfu, "d_rung0": rung0,
        "table": [{"part": p, "check": c, "status": s, "detail": d} for p, c, s, d in rows],
    }
    summary = Path(args.summary or out / "gpu_check.json")
    write_json(summary, report)
    lines = table_lines(report, rows, summary, out)
    if args.table:
        Path(args.table).write_text("\n".join(lines) + "\n")
    if args.quiet:
        done = sum(part["status"] != "pending" for part in parts.values())
        print(f"gpu_check: {summary}: {done} of {len(parts)} parts done, {overall} so far")
    else:
        print("\n".join(lines))
    return 0 if overall == "pass" else 1


# -- main ---------------------------------------------------------------------------------------------------
def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    e = sub.add_parser("env", help="torch/CUDA facts and which kernel packages of the cuda extra import")
    e.add_argument("--out", required=True)
    e.add_argument("--print-missing", action="store_true", help="print only the missing requirements")
    t = sub.add_parser("cuda-tests", help="node ids of the tests that skip without CUDA")
    t.add_argument("--root", default=str(_ROOT / "tests"))
    a = sub.add_parser("attention", help="A attention through flash-attn vs SDPA (bf16, CUDA)")
    a.add_argument("--out", required=True)
    a.add_argument("--tolerance", type=float, default=2e-2, help="max abs error / max abs reference value")
    a.add_argument("--seq-len", type=int, default=1024)
    a.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    a.add_argument("--kernel-backend", default="flash", choices=("flash", "sdpa"),
                   help="the backend checked against sdpa (sdpa: the code path on CPU, errors 0)")
    s = sub.add_parser("steps", help="one training step per primitive, eager vs torch.compile")
    s.add_argument("--out", required=True)
    s.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    s.add_argument("--precision", default="bf16", choices=("bf16", "fp32"))
    s.add_argument("--preset", default="llama-3.2-1b", help="widths (default: llama-3.2-1b)")
    s.add_argument("--primitives", default="AWMESD", help="which single-primitive patterns (default: AWMESD)")
    s.add_argument("--no-all-six", dest="all_six", action="store_false", help="skip the AWMESD model")
    s.add_argument("--seq-len", type=int, default=1024)
    s.add_argument("--batch-size", type=int, default=4)
    s.add_argument("--window", type=int, default=256, help="W's window (below --seq-len, so W is not A)")
    s.add_argument("--warmup", type=int, default=2, help="eager steps before the timed ones")
    s.add_argument("--compile-warmup", type=int, default=3, help="compiled steps before the timed ones")
    s.add_argument("--steps", type=int, default=3, help="timed steps per mode")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--threads", type=int, default=None, help="torch threads on CPU")
    s.add_argument("--first-tolerance", type=float, default=1e-2,
                   help="max relative difference of the first loss, compiled vs eager (default 1e-2)")
    s.add_argument("--tolerance", type=float, default=5e-2,
                   help="max relative difference of any compared loss (default 5e-2)")
    q = sub.add_parser("rung0", help="the gpu ladder's rung 0 timed at a fraction of its tokens: candidates/hour")
    q.add_argument("--out", required=True)
    q.add_argument("--budget", default="rung-gpu-0", help="the lm budget (search.lm), default rung-gpu-0")
    q.add_argument("--fraction", type=float, default=0.1, help="of the budget's tokens, trained per pattern (0.1)")
    q.add_argument("--patterns", default=",".join(RUNG0_PATTERNS), help="comma-separated")
    q.add_argument("--widths", default="search-1m", help="the search's widths (default search-1m)")
    q.add_argument("--precision", default="auto", choices=("auto", "fp32", "bf16"), help="as composer search's")
    q.add_argument("--compile", action="store_true", help="compile every run (composer search --compile)")
    q.add_argument("--val-tokens", type=int, default=None, help="final validation tokens (default: the budget's)")
    r = sub.add_parser("report", help="gpu_check.json and the final table from the files in --dir")
    r.add_argument("--dir", required=True)
    r.add_argument("--mfu", default="AMx4,AMx16", help="labels of the mfu-<label> run directories")
    r.add_argument("--summary", default=None, help="the JSON written (default: DIR/gpu_check.json)")
    r.add_argument("--table", default=None, help="also write the table to this file")
    r.add_argument("--quiet", action="store_true", help="one line instead of the table (a summary mid-run)")
    r.add_argument("--final", action="store_true", help="the check has ended: a part still pending was not reached")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    commands = {"env": cmd_env, "cuda-tests": cmd_cuda_tests, "attention": cmd_attention, "steps": cmd_steps,
                "rung0": cmd_rung0, "report": cmd_report}
    return commands[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
