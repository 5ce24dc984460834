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

``report --dir DIR``: the table from the files the parts left in DIR (``gpu_check_report.py``); ``gpu_check.sh --quick`` calls it after every
part (``--summary quick.json --quiet``), reading the plan it wrote (``run.json``) to list the parts still pending.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import re
import statistics
import sys
import time
import traceback
from pathlib import Path

_HERE = Path(__file__).resolve().parent
_ROOT = _HERE.parent
for path in (_ROOT, _HERE):  # the repository (composer, primitives) and training_throughput.py next to this file
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from gpu_check_report import (  # noqa: E402 (after the path is set, as the script runs)
    STEP_PATTERNS,
    cmd_report,
    fmt,
    fmt_losses,
    write_json,
)

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

# The gpu ladder's rung 0, timed by `rung0` on these patterns: two Transformer-Mamba layouts (one known, one
# blocked) and a published hybrid with S (Nemotron-H's fit); D trains on its PyTorch path on Hopper (fla #640)
# and SDMMSD did not finish within the part's 63 s on an H200 (the quick check's first run), so it is left to
# --patterns.
RUNG0_PATTERNS = ("AMAMAM", "AAMMMM", "SMSAMS")


# -- helpers ------------------------------------------------------------------------------------------------
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
