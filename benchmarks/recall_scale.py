"""Issue 50's prepared GPU run: recall where it forms (part a), then the answer at scale (part b), in one device call.

``bash benchmarks/gpu_check.sh --recall-scale`` runs this on a lent H100/H200 (docs/gpu.md, "Recall and scale
run"); ``GPU_CHECK_DRY_RUN=1`` runs it on the CPU at tiny sizes (the tests). Every model is one
``benchmarks/trained_recall.py`` process (``composer train``, then ``composer.evaluation.context_recall``'s
measures on the trained model) under a time limit, one seed, one named rate:

* **a. Recall where it forms**: ``demo-4m`` widths, context 512, bf16 on CUDA, eager, the same 30M tokens for
  each of ``SDDMAS:keep`` (the AMSD search's answer grown with its one attention layer kept), Nemotron-H's own
  layout, Llama's (stacked to the same size) and the attention-free ``SDDMDM:repeat``.
* **b. Scale**: ``llama-350m`` widths, 2,048-token sequences, bf16, eager, the same 10M tokens for each of the
  answer grown with its attention kept, Nemotron-H's, Llama's and Samba's own layouts (each at the size of the
  stacked answer, ``search.growth.grow``); tokens/s and MFU from ``composer train``'s summary, the
  cache of one 32K-token sequence from ``composer.accounting``.

Before it starts it prints the plan: every model's tokens and its estimated seconds (:func:`estimate`), and which
models the budget is expected to cut (b's later models first). A model starts only when its estimate, scaled by
how the finished models ran against theirs, fits the time left; part a's later models keep their share of it.
Part b stops at its first model that does not fit: its families are read against the answer, which comes first.
``recall_scale.json`` (raw), ``recall_scale.md`` (the table) and ``recall_scale-files.tar.gz`` (each model's
log and ``runs.json``) are rewritten in ``--out`` after every model, so a call cut short keeps what finished.

    python benchmarks/recall_scale.py --out runs/recall-scale --budget 520
    python benchmarks/recall_scale.py --dry-run --out /tmp/rs --parts a --layouts-a llama
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tarfile
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent

# -- the estimates ------------------------------------------------------------------------------------------------
# Eager training of these small models on a GPU is bound by kernel launches, not FLOPs, so a step costs about
# (aten ops per step) x (seconds per op) + FLOPs / (share of the peak the matmuls reach). The op counts and the
# seconds per op are `composer search --plan`'s (search.plan: one H200 figure, counts per layer taken on the CPU,
# D's growing with the context); this script adds the two terms where the plan takes the larger, so that a
# one-shot device call plans on the long side.
PEAK_BF16 = 989.4e12  # H100 SXM / H200 dense bf16 (composer.training.throughput)
# share of the peak the matmuls reach once launches are paid apart: at llama-350m widths 40% (the compiled
# (AM)x16 reached 47-48% MFU at 1B widths, docs/gpu.md); at demo-4m's width of 192 far less, 10% (assumed: no
# figure was measured at these widths)
COMPUTE_SHARE = {"a": 0.10, "b": 0.40}
# per model, beyond its steps: the process's imports, the corpus and the model build, the final validation, the
# export and the recall measures (assumed; a model on the CPU at tiny widths took ~30 s on 2 shared cores)
OVERHEAD_S = {"a": 25.0, "b": 40.0}
DRY_RUN_SECONDS = 30.0  # a dry-run model on 2 shared CPU cores (measured, ~30 s)
CALIBRATION_CLAMP = (0.25, 4.0)

# -- the two parts ---------------------------------------------------------------------------------------------
LAYOUTS = {"a": ("SDDMAS:keep", "nemotron-h", "llama", "SDDMDM:repeat"),
           "b": ("SDDMAS:keep", "nemotron-h", "llama", "samba")}
PARTS: dict[str, dict[str, Any]] = {
    "a": {"preset": "demo-4m", "seq_len": 512, "batch_size": 128, "tokens": 458 * 128 * 512, "warmup": 20,
          "lr": 1e-3, "val_tokens": 65_536, "sequences": 64, "precision": "bf16-mixed", "device": "cuda",
          "compile": False,
          "lr_source": "1e-3: the rate the cpu ladder chose for SDDMAS-kept and Nemotron-H's layout at demo-4m at every "
                       "rung and seed (benchmarks/results/attention_kept-2026-11-28.json), and the lower of rung-gpu-0's "
                       "two; no sweep fits one device call",
          "compile_reason": "eager, as the search's GPU rungs: a cold compile of D's chunk loop outlasted 55-75 s at 1B "
                            "widths (docs/gpu.md), more than it could save on a 30-70 s run"},
    "b": {"preset": "llama-350m", "seq_len": 2048, "batch_size": 16, "tokens": 306 * 16 * 2048, "warmup": 30,
          "lr": 1e-3, "val_tokens": 262_144, "sequences": 64, "precision": "bf16-mixed", "device": "cuda",
          "compile": False,
          "lr_source": "1e-3: the middle of rung-gpu-1/2's rates at llama-350m widths (3e-4, 1e-3, 2e-3); docs/gpu.md's "
                       "1B runs trained stably at 1e-3 where 3e-3 diverged",
          "compile_reason": "eager: the same cold compile of D; batch 16 x 2,048 keeps an eager 40-layer model's "
                            "activations well inside the GPU's memory"},
}
DRY_PART = {"preset": "tiny", "seq_len": 64, "batch_size": 8, "tokens": 4096, "warmup": 2, "lr": 1e-3,
            "val_tokens": 1024, "sequences": 2, "precision": "32-true", "device": "cpu", "compile": False,
            "lr_source": "dry run", "compile_reason": "dry run"}


def part_settings(part: str, dry_run: bool, tokens: int | None = None) -> dict[str, Any]:
    settings = dict(DRY_PART if dry_run else PARTS[part])
    if tokens is not None:
        settings["tokens"] = tokens
    # whole optimizer steps: composer train rounds down, and "at least N tokens" must survive it
    step = settings["batch_size"] * settings["seq_len"]
    settings["tokens"] = -(-settings["tokens"] // step) * step
    return settings


def estimate(part: str, pattern: str, settings: dict[str, Any]) -> dict[str, float]:
    """Estimated seconds of one model's steps and of the whole model (``OVERHEAD_S`` added), and its tokens/s."""
    from composer.accounting import analyze
    from composer.presets import get_preset
    from search.plan import SECONDS_PER_OP, ops_per_step

    step_ops = ops_per_step(pattern, settings["seq_len"])
    stats = analyze(get_preset(settings["preset"]).arch.with_pattern(pattern).replace(max_seq_len=max(
        2048, settings["seq_len"])), seq_len=settings["seq_len"])
    tokens_per_step = settings["batch_size"] * settings["seq_len"]
    step_s = step_ops * SECONDS_PER_OP + stats.flops_per_token * tokens_per_step / (COMPUTE_SHARE[part] * PEAK_BF16)
    train_s = settings["tokens"] / tokens_per_step * step_s
    return {"ops_per_step": step_ops, "step_s": step_s, "tokens_per_s": tokens_per_step / step_s,
            "train_s": train_s, "seconds": train_s + OVERHEAD_S[part]}


def cache_at(pattern: str, preset: str, seq_len: int = 32_768) -> dict[str, int]:
    """The inference cache of one ``seq_len``-token sequence in bf16 (``composer.accounting``), at the vocabulary
    the byte tokenizer gives the model (the cache does not depend on it)."""
    from composer.accounting import analyze
    from composer.presets import get_preset

    stats = analyze(get_preset(preset).arch.with_pattern(pattern).replace(max_seq_len=max(2048, seq_len)),
                    seq_len=seq_len)
    return {"seq_len": seq_len, "bytes": stats.cache_bytes_per_sequence,
            "kv_bytes_per_token": stats.kv_cache_bytes_per_token}


def follows_a_cut(part: str, earlier: list[dict[str, Any]], was_cut: Any) -> bool:
    """Whether a model of ``part`` is skipped because an earlier one was cut (``was_cut(model)``), for the plan and
    the run alike: part b stops at its first cut (its families are read against the answer, which comes first);
    part a goes on, since a later, shorter model of it may still fit."""
    return part == "b" and any(m["part"] == "b" and was_cut(m) for m in earlier)


def plan(parts: list[str], layouts: dict[str, list[str]], dry_run: bool, budget: float,
         tokens: dict[str, int | None]) -> list[dict[str, Any]]:
    """Every model in run order with its pattern, tokens, rate and estimate; ``expected`` says whether the budget
    is expected to reach it (cumulative estimates)."""
    sys.path.insert(0, str(HERE))
    from trained_recall import model_at

    models, spent = [], 0.0
    for part in parts:
        settings = part_settings(part, dry_run, tokens.get(part))
        for layout in layouts[part]:
            pattern, grown = model_at(layout, settings["preset"])
            guess = {"seconds": DRY_RUN_SECONDS, "train_s": DRY_RUN_SECONDS - 20.0, "tokens_per_s": None,
                     "step_s": None, "ops_per_step": None} if dry_run else estimate(part, pattern, settings)
            fits = spent + guess["seconds"] <= budget and not follows_a_cut(
                part, models, lambda m: m["expected"] != "runs")
            spent += guess["seconds"] if fits else 0.0
            models.append({"part": part, "layout": layout, "label": f"{part}-{layout.replace(':', '-')}",
                           "pattern": pattern, "grown": grown, "settings": settings, "estimate": guess,
                           "expected": "runs" if fits else "cut by the budget",
                           "cache_32k": cache_at(pattern, settings["preset"]), "status": "pending"})
    return models


def plan_text(models: list[dict[str, Any]], budget: float, dry_run: bool) -> str:
    lines = [f"recall_scale plan: {len(models)} models, budget {budget:.0f} s"
             + (" (DRY RUN: tiny sizes on the CPU; estimates are a fixed 30 s)" if dry_run else ""),
             "| part | layout | pattern | preset | context | tokens | lr | est. tok/s | est. s | cumulative s | expected |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    spent = 0.0
    for model in models:
        s, guess = model["settings"], model["estimate"]
        spent += guess["seconds"] if model["expected"] == "runs" else 0.0
        rate = f"{guess['tokens_per_s']:,.0f}" if guess["tokens_per_s"] else "n/a"
        lines.append(f"| {model['part']} | {model['layout']} | `{model['pattern']}` | {s['preset']} | {s['seq_len']} | "
                     f"{s['tokens']:,} | {s['lr']:g} | {rate} | {guess['seconds']:.0f} | {spent:.0f} | "
                     f"{model['expected']} |")
    cut = [m for m in models if m["expected"] != "runs"]
    lines.append("expected cut by the budget: " + (", ".join(f"{m['part']}:{m['layout']}" for m in cut) if cut
                                                   else "none"))
    for part in dict.fromkeys(m["part"] for m in cut):
        names = ",".join(m["layout"] for m in cut if m["part"] == part)
        lines.append(f"  a second call runs part {part}'s: bash benchmarks/gpu_check.sh --recall-scale --parts {part} "
                     f"--layouts-{part} {names}")
    if not dry_run:
        lines.append("estimates: eager steps cost (aten ops x 13.8 us, from rung-gpu-0's AMAMAM on an H200, docs/gpu.md) "
                     "+ FLOPs / (share of 989.4 TFLOP/s: 10% at demo-4m (assumed), 40% at llama-350m); + 25 s (a) / "
                     "40 s (b) per model for start, validation, export and recall (assumed). No demo-4m or llama-350m "
                     "rate has been measured on a GPU: the script rescales later estimates by how the finished models ran.")
    for part in dict.fromkeys(m["part"] for m in models):
        s = models[[m["part"] for m in models].index(part)]["settings"]
        lines.append(f"part {part} rate {s['lr']:g}: {s['lr_source']}; {s['compile_reason']}")
    return "\n".join(lines)


# -- one model ---------------------------------------------------------------------------------------------------
def command_of(model: dict[str, Any], python: str, out: Path) -> list[str]:
    s = model["settings"]
    command = [python, str(HERE / "trained_recall.py"), "--layouts", model["layout"], "--preset", s["preset"],
               "--seq-len", str(s["seq_len"]), "--tokens", str(s["tokens"]), "--batch-size", str(s["batch_size"]),
               "--warmup", str(s["warmup"]), "--lrs", f"{s['lr']:g}", "--seeds", "0", "--val-tokens",
               str(s["val_tokens"]), "--sequences", str(s["sequences"]), "--precision", s["precision"],
               "--device", s["device"], "--out", str(out)]
    return command + (["--compile"] if s["compile"] else [])


def run_model(model: dict[str, Any], python: str, work: Path, limit: float) -> None:
    """Train and score ``model`` under ``limit`` seconds; its results (or why none) into ``model``."""
    out = work / model["label"]
    log = work / f"{model['label']}.log"
    command = command_of(model, python, out)
    model["command"] = " ".join(command)
    model["limit_s"] = round(limit)
    print(f"\n== {model['label']}: {model['pattern']} (limit {limit:.0f} s, estimate "
          f"{model['estimate']['seconds']:.0f} s) ==", flush=True)
    started = time.monotonic()
    with log.open("w") as handle:
        child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                 start_new_session=True)
        copier = threading.Thread(target=_copy, args=(child.stdout, handle), daemon=True)
        copier.start()

        def stop() -> None:  # the model's whole process group: a killed run leaves no training on the GPU
            try:
                os.killpg(child.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

        def stopped(signum: int, _frame: Any) -> None:
            stop()
            raise SystemExit(128 + signum)

        previous = signal.signal(signal.SIGTERM, stopped)
        try:
            child.wait(timeout=max(limit, 1.0))
        except subprocess.TimeoutExpired:
            stop()
            child.wait()
            model["status"] = "timed out"
        finally:
            signal.signal(signal.SIGTERM, previous)
        copier.join(timeout=10)
    model["seconds"] = round(time.monotonic() - started, 1)
    model["rc"] = child.returncode
    runs = out / "runs.json"
    entry = json.loads(runs.read_text())["layouts"].get(model["layout"], {}) if runs.is_file() else {}
    result = entry.get("seeds", {}).get("0")
    if result and "recall" in result:
        model["status"] = "done"
        model["result"] = result
    elif result:
        model["status"] = "diverged"
    elif model["status"] != "timed out":
        model["status"] = "failed"


def _copy(stream, handle) -> None:
    """The model's output, line by line, to its log and to the console."""
    for line in stream:
        handle.write(line)
        handle.flush()
        sys.stdout.write(line)
        sys.stdout.flush()


# -- the record --------------------------------------------------------------------------------------------------
def _longest(recall: dict[str, Any], kind: str) -> dict[str, Any] | None:
    rows = [row for row in recall["copy"] if row["kind"] == kind]
    return max(rows, key=lambda row: row["distance"]) if rows else None


def _gain(row: dict[str, Any] | None, key: str = "gain") -> str:
    from composer.statistics import format_interval

    if row is None:
        return ""
    return f"{row[key]:+.4f} {format_interval(row[key + '_ci'])}"


def table_of(models: list[dict[str, Any]]) -> str:
    lines = ["| part | layout | pattern | params | tokens | lr | val loss | copy gain, text (longest distance) | "
             "copy gain, random | AR repeat gain | tok/s | MFU | cache at 32K | seconds (est.) | status |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for model in models:
        s, result = model["settings"], model.get("result")
        cache = f"{model['cache_32k']['bytes'] / 2**20:,.1f} MiB"
        est = f"{model.get('seconds', '')} ({model['estimate']['seconds']:.0f})"
        if result is None:
            lines.append(f"| {model['part']} | {model['layout']} | `{model['pattern']}` | | {s['tokens']:,} | "
                         f"{s['lr']:g} | | | | | | | {cache} | {est} | {model['status']} |")
            continue
        recall = result["recall"]
        text, random = _longest(recall, "text"), _longest(recall, "random")
        mfu = f"{result['mfu']:.1%}" if result.get("mfu") is not None else "n/a"
        params = f"{result['params'] / 1e6:.1f}M" if result.get("params") else ""
        rate = f"{result['tokens_per_s']:,.0f}" if result.get("tokens_per_s") else ""
        distance = f" at {text['distance']}" if text else ""
        lines.append(f"| {model['part']} | {model['layout']} | `{model['pattern']}` | {params} | "
                     f"{result.get('tokens', s['tokens']):,} | {result['lr']:g} | {result['val_loss']:.4f} | "
                     f"{_gain(text)}{distance} | {_gain(random)} | {_gain(recall['ar_slice'], 'repeat_gain')} | "
                     f"{rate} | {mfu} | {cache} | {est} | {model['status']} |")
    return "\n".join(lines)


def save(out: Path, work: Path, report: dict[str, Any]) -> None:
    """recall_scale.json, .md and the logs' archive, each replaced whole (a reader never sees half a file)."""
    from composer.files import atomic_write_json

    atomic_write_json(out / "recall_scale.json", report)
    table = out / "recall_scale.md.part"
    table.write_text(report["plan"] + "\n\n" + report["table"] + "\n")
    table.replace(out / "recall_scale.md")
    archive = out / "recall_scale-files.tar.gz.part"
    with tarfile.open(archive, "w:gz") as tar:
        for path in sorted(work.glob("*.log")) + sorted(work.glob("*/runs.json")):
            tar.add(path, arcname=str(path.relative_to(work)))
    archive.replace(out / "recall_scale-files.tar.gz")


def calibration(models: list[dict[str, Any]]) -> float:
    """How much longer than estimated the finished models took (median ratio, clamped): later estimates scale by it."""
    ratios = [m["seconds"] / m["estimate"]["seconds"] for m in models if m["status"] == "done"]
    if not ratios:
        return 1.0
    low, high = CALIBRATION_CLAMP
    return min(max(statistics.median(ratios), low), high)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="runs/recall-scale", help="where the record, table and archive go")
    parser.add_argument("--work", help="the runs' folder (default: --out/work)")
    parser.add_argument("--budget", type=float, default=520.0, help="seconds for all models (520)")
    parser.add_argument("--parts", default="a,b", help="a, b or a,b (default a,b: a first)")
    parser.add_argument("--layouts-a", default=",".join(LAYOUTS["a"]), help="part a's layouts, in order")
    parser.add_argument("--layouts-b", default=",".join(LAYOUTS["b"]), help="part b's layouts, in order")
    parser.add_argument("--tokens-a", type=int, help="part a's training tokens per model (default 30,015,488)")
    parser.add_argument("--tokens-b", type=int, help="part b's training tokens per model (default 10,027,008)")
    parser.add_argument("--dry-run", action="store_true", help="tiny sizes on the CPU: the plumbing")
    parser.add_argument("--plan-only", action="store_true", help="print the plan and write nothing")
    parser.add_argument("--python", default=sys.executable, help="the interpreter of the models' processes")
    args = parser.parse_args(argv)
    args.parts = [part for part in args.parts.split(",") if part]
    if not args.parts or set(args.parts) - {"a", "b"}:
        parser.error("--parts takes a, b or a,b")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.monotonic()
    deadline = started + args.budget
    layouts = {"a": [x for x in args.layouts_a.split(",") if x], "b": [x for x in args.layouts_b.split(",") if x]}
    models = plan(args.parts, layouts, args.dry_run, args.budget, {"a": args.tokens_a, "b": args.tokens_b})
    text = plan_text(models, args.budget, args.dry_run)
    print(text, flush=True)
    if args.plan_only:
        return 0
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    work = Path(args.work) if args.work else out / "work"
    work.mkdir(parents=True, exist_ok=True)
    report = {"what": "issue 50: recall where it forms (a, demo-4m) and the answer at scale (b, llama-350m), one "
                      "seed, one rate per part, one device call", "date": time.strftime("%Y-%m-%d"),
              "dry_run": args.dry_run, "budget_s": args.budget, "plan": text,
              "command": "python benchmarks/recall_scale.py " + " ".join(sys.argv[1:] if argv is None else argv),
              "device": _device(args.dry_run), "models": models, "complete": False}

    def record() -> None:
        report["elapsed_s"] = round(time.monotonic() - started, 1)
        report["calibration"] = calibration(models)
        report["table"] = table_of(models)
        save(out, work, report)

    record()
    for i, model in enumerate(models):
        scale = calibration(models)
        need = model["estimate"]["seconds"] * scale
        later_a = sum(m["estimate"]["seconds"] * scale for m in models[i + 1:] if m["part"] == "a")
        left = deadline - time.monotonic()
        if model["part"] == "a":
            left -= later_a
        behind_a_cut = follows_a_cut(model["part"], models[:i], lambda m: m["status"] == "no time")
        if need > left or behind_a_cut:
            model["status"] = "no time"
            model["detail"] = ("not started: an earlier model of part b had no time, and b's families are read "
                               "against the answer, which comes first" if behind_a_cut and need <= left else
                               f"not started: {max(left, 0):.0f} s left for it, its estimate is {need:.0f} s "
                               f"(x{scale:.2f} from the finished models)")
            print(f"\n== {model['label']}: no time: {model['detail']} ==", flush=True)
        else:
            # a model past its estimate may use the time left, less what part a's later models are kept
            run_model(model, args.python, work, left)
            print(f"{model['label']}: {model['status']} in {model['seconds']} s", flush=True)
        record()
    report["complete"] = True
    record()
    print("\n" + report["table"])
    print(f"\nrecall_scale.{{json,md}} and recall_scale-files.tar.gz in {out}", file=sys.stderr)
    return 0 if all(m["status"] == "done" for m in models) else 1


def _device(dry_run: bool) -> str:
    if dry_run:
        return "cpu (dry run)"
    try:
        import torch

        if torch.cuda.is_available():
            return f"{torch.cuda.get_device_name(0)}, torch {torch.__version__}, CUDA {torch.version.cuda}"
    except ImportError:
        pass
    return "no CUDA device"


if __name__ == "__main__":
    raise SystemExit(main())
