"""Training-engine throughput: tokens/s, a step-time breakdown, MFU on CUDA, and the engine's own overhead.

Four measurements of one model, in one process:

1. **Bare loop** (the reference): our training step exactly as ``composer/training/module.py`` runs it, without
   Lightning: ``zero_grad``, forward with the loss (``model(batch[:, :-1], batch[:, 1:]).loss``, bf16 autocast on
   CUDA), ``backward``, ``clip_grad_norm_(model.parameters(), grad_clip)``, AdamW ``step`` and LR-scheduler
   ``step``. The optimizer and scheduler come from ``ComposerLM.configure_optimizers`` itself (AdamW over
   ``model.parameter_groups(weight_decay)``, the engine's defaults). Batches are random token ids already on the
   device: no data pipeline. Reported: median step time, tokens/s, MFU on CUDA, peak memory.
2. **Step-time breakdown**: a few extra steps of the same loop with timestamps taken at section boundaries:
   module forward pre/post hooks on every residual layer and on the final norm, full-backward pre/post hooks on
   every residual layer, and explicit marks around ``backward``, ``clip_grad_norm_`` and the optimizer. Time
   between two marks belongs to the section the first one opened, so the sections add up to the step. On CPU
   the marks are ``time.perf_counter()`` (CPU ops run synchronously); on CUDA they are CUDA events on the
   compute stream, read after the step. These steps are separate from the timed ones; per section the median
   over them is reported (robust to bursts of load), and the instrumented step is printed next to the
   uninstrumented median so the (small) cost of the hooks is visible.
3. **Engine vs bare loop**: ``composer.training.run.train(TrainConfig(...))`` end to end (Lightning, the
   offline default corpus capped at ``--engine-documents`` documents, the byte tokenizer, ``wandb="off"``, a
   temporary ``out``) at the same widths, pattern, batch and sequence length; its vocabulary is the byte
   tokenizer's rounded to 64 (320), so the reference is a bare loop on exactly that architecture (a fresh model,
   stepped right before and again right after the engine runs). Printed side by side, with the ratio engine /
   bare loop: the summary's ``tokens_per_s`` (mean over steps 2..N, timed by the engine's ``ThroughputMonitor``,
   data loading excluded) against the bare loop's mean over its steps 2..N; the median step after warmup; the
   fastest step; and a wall-clock tokens/s over steps 2..N that includes data loading and Lightning's
   between-step work. The per-step engine times come from the engine's own monitor, subclassed only to keep
   them. The engine and its bare-loop reference run eager (``TrainConfig.compile`` False).
4. **Compiled vs eager** (``--compile both``, the default; ``on`` or ``off`` for one mode): the bare loop of 1.
   on a second fresh model (same seed: same initial weights and batches) to which
   ``composer.training.parallelize.apply_compile`` is applied, exactly as ``composer train --compile`` does
   (``torch.compile`` of each ``ResidualLayer`` and of the final norm + LM head + loss; embedding, clipping
   and AdamW stay eager). Dynamo's caches are reset first, so each row compiles from scratch. Its first ``--compile-warmup``
   steps are untimed (the first traces and compiles forward and backward and is reported as "first step", with
   the graph breaks dynamo counted), then the same timed steps; every compiled row gets the ratio compiled /
   eager tokens/s (median step; also fastest and mean step in the detail block) and the difference of the two
   first losses. No breakdown for compiled models (hooks would run inside the compiled code). On CPU the two
   models live side by side and their timed steps alternate in 5 rounds, so load from other jobs hits both
   alike; on CUDA they run one after the other, so each run's peak memory is its own.

CPU (default where no GPU is visible; about a minute on 2 cores, plus the compiled run: its compilation, ~20 s
with a cold Inductor cache, and its steps)::

    python benchmarks/training_throughput.py
    python benchmarks/training_throughput.py --json
    python benchmarks/training_throughput.py --compile off        # eager only (the script before --compile)

CUDA (default where a GPU is visible): Llama-3.2-1B widths at reduced depth, bf16 autocast, SDPA vs flash-attn
(when ``flash_attn`` imports), MFU against Lightning's peak-FLOPs table, and engine runs with strategy
``single`` and 1-GPU FSDP2 (``strategy="fsdp", devices=1``)::

    python benchmarks/training_throughput.py --device cuda
    python benchmarks/training_throughput.py --device cuda --seq-len 2048 8192 --pattern '(AM)x8'
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import io
import json
import logging
import os
import platform
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

# Plain script, not a package: make the repository root importable when run as ``python benchmarks/...``.
_ROOT = Path(__file__).resolve().parent.parent
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

import torch

from composer.accounting import analyze
from composer.config import ArchConfig
from composer.model import build_model
from composer.presets import PRESETS, get_preset

PEER = "bare PyTorch loop, same model"
COMPILED_STEP = ("composer.training.parallelize.apply_compile(model), as `composer train --compile`: torch.compile "
                 "of each ResidualLayer; embedding, final norm, LM head + loss, clipping and AdamW eager")
DEFAULTS = {
    # A search-width model: the size the architecture search trains by the thousand, and exactly the model
    # `composer train '(AM)x4' --preset search-1m` builds offline (vocab 320: the byte tokenizer rounded to 64).
    "cpu": {
        "preset": "search-1m", "pattern": "(AM)x4", "seq_len": [256], "batch_size": 8, "batch_tokens": None,
        "steps": 30, "warmup": 3, "compile_warmup": 3, "breakdown_steps": 10, "backends": ["sdpa"],
        "engine": ["single"], "engine_documents": 200,
    },
    # Llama-3.2-1B widths (d 2048, 32/8 heads x 64, FFN 8192, vocab 128256) at 4 blocks instead of 16.
    "cuda": {
        "preset": "llama-3.2-1b", "pattern": "(AM)x4", "seq_len": [2048], "batch_size": None,
        "batch_tokens": 16384, "steps": 20, "warmup": 5, "compile_warmup": 5, "breakdown_steps": 5,
        "backends": ["sdpa", "flash"], "engine": ["single", "fsdp"], "engine_documents": 1000,
    },
}


# -- arguments ----------------------------------------------------------------------------------------------
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description="Throughput of Composer's training step: bare-loop tokens/s with a step-time breakdown "
        "(and MFU on CUDA), and the training engine (Lightning + data pipeline) against the bare loop.",
        epilog="Defaults marked 'per device' differ between CPU and CUDA; see the module docstring.",
    )
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto",
                   help="auto: cuda when a GPU is visible, else cpu (default: auto)")
    p.add_argument("--preset", choices=tuple(PRESETS),
                   help="widths (per device: search-1m on CPU, llama-3.2-1b on CUDA)")
    p.add_argument("--pattern", help="layer pattern at those widths (default: (AM)x4)")
    p.add_argument("--vocab", type=int,
                   help="vocabulary of the bare-loop model (per device: on CPU the engine's, 320 for the byte "
                   "tokenizer, so both measure the same model; on CUDA the preset's)")
    p.add_argument("--seq-len", type=int, nargs="+", help="one or more sequence lengths (per device: 256 / 2048)")
    p.add_argument("--batch-size", type=int,
                   help="sequences per step (per device: 8 on CPU; on CUDA max(1, 16384 // seq_len))")
    p.add_argument("--backend", dest="backends", nargs="+", choices=("sdpa", "flash", "auto"),
                   help="attention backends to compare (per device: sdpa on CPU; sdpa flash on CUDA, flash "
                   "only when flash_attn imports)")
    p.add_argument("--steps", type=int, help="timed steps per run (per device: 30 / 20)")
    p.add_argument("--warmup", type=int, help="untimed steps before timing (per device: 3 / 5)")
    p.add_argument("--breakdown-steps", type=int, help="instrumented steps for the breakdown (per device: 10 / 5)")
    p.add_argument("--compile", choices=("off", "on", "both"), default="both",
                   help="bare loop eager (off), with torch.compile applied as `composer train --compile` does "
                   "(on: composer.training.parallelize.apply_compile, each residual layer), or both, with the "
                   "compiled/eager tokens/s ratio per row (default: both)")
    p.add_argument("--compile-warmup", type=int,
                   help="untimed steps of a compiled model before timing; the first compiles forward and "
                   "backward (per device: 3 / 5)")
    p.add_argument("--engine", dest="engine", nargs="*", choices=("single", "fsdp", "ddp"),
                   help="engine strategies to run (per device: single on CPU; single fsdp on CUDA); "
                   "give the flag with no value to skip the engine")
    p.add_argument("--engine-documents", type=int,
                   help="max_documents of the offline default corpus for the engine (per device: 200 / 1000)")
    p.add_argument("--threads", type=int, default=torch.get_num_threads(), help="torch intra-op threads on CPU")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", action="store_true", help="print one JSON object with the figures, no table")
    args = p.parse_args(argv)

    if args.device == "auto":
        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    if args.device == "cuda" and not torch.cuda.is_available():
        p.error("--device cuda but torch sees no CUDA device")
    defaults = DEFAULTS[args.device]
    for name in ("preset", "pattern", "seq_len", "batch_size", "steps", "warmup", "compile_warmup",
                 "breakdown_steps", "backends", "engine", "engine_documents"):
        if getattr(args, name) is None:
            setattr(args, name, defaults[name])
    args.batch_tokens = defaults["batch_tokens"]
    for name in ("steps", "threads", "engine_documents"):
        if getattr(args, name) <= 0:
            p.error(f"--{name.replace('_', '-')} must be positive")
    for name in ("warmup", "breakdown_steps"):
        if getattr(args, name) < 0:
            p.error(f"--{name.replace('_', '-')} must be >= 0")
    if args.compile != "off" and args.compile_warmup < 1:
        p.error("--compile-warmup must be >= 1: the first compiled step compiles and must not be timed")
    args.compile_modes = {"off": [False], "on": [True], "both": [False, True]}[args.compile]
    if any(n <= 0 for n in args.seq_len) or (args.batch_size is not None and args.batch_size <= 0):
        p.error("--seq-len and --batch-size must be positive")
    if args.vocab is not None and args.vocab <= 0:
        p.error("--vocab must be positive")
    return args


# -- small helpers ------------------------------------------------------------------------------------------
def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def free_memory(device: torch.device) -> None:
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


def flash_status() -> tuple[bool, str]:
    """Whether the attention primitive can use flash-attn, and why not."""
    from primitives import attention

    if attention.flash_attn_func is not None:
        import flash_attn

        return True, f"flash-attn {getattr(flash_attn, '__version__', '?')}"
    return False, "flash_attn does not import (pip install 'composer-hnas[cuda]')"


def effective_backend(arch: ArchConfig, device: torch.device) -> str:
    """The attention kernel a bf16 CUDA / fp32 CPU step actually runs (``auto`` resolved)."""
    backend = arch.options_for("A").get("backend", "auto")
    if backend == "auto":
        return "flash" if device.type == "cuda" and flash_status()[0] else "sdpa"
    return backend


def with_backend(arch: ArchConfig, backend: str) -> ArchConfig:
    if backend == "auto" or "A" not in arch.pattern:
        return arch
    return arch.replace(options={**arch.options, "A": {**arch.options_for("A"), "backend": backend}})


def engine_vocab() -> int:
    """The model vocabulary the engine builds for the offline byte tokenizer (tokenizer size rounded to 64)."""
    from composer.data import load_tokenizer
    from composer.training.run import model_vocab_size

    return model_vocab_size(load_tokenizer(None).vocab_size)


def peak_flops(device: torch.device) -> float | None:
    if device.type != "cuda":
        return None
    from lightning.fabric.utilities.throughput import get_available_flops

    return get_available_flops(device, torch.bfloat16)


# -- the bare loop ------------------------------------------------------------------------------------------
class Timeline:
    """Ordered marks; the time from one mark to the next is charged to the section the first mark opened."""

    def __init__(self, cuda: bool) -> None:
        self.cuda = cuda
        self.marks: list[tuple[str, object]] = []

    def mark(self, section: str) -> None:
        if self.cuda:
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            self.marks.append((section, event))
        else:
            self.marks.append((section, time.perf_counter()))

    def sections(self) -> dict[str, float]:
        """Seconds per section (call after the device is synchronised)."""
        out: dict[str, float] = defaultdict(float)
        for (section, start), (_, stop) in zip(self.marks, self.marks[1:]):
            out[section] += start.elapsed_time(stop) / 1000 if self.cuda else stop - start
        return dict(out)


class BareLoop:
    """One model + optimizer, stepped exactly as ``ComposerLM`` trains it, without Lightning or a data loader."""

    def __init__(self, arch: ArchConfig, batch_size: int, seq_len: int, device: torch.device, bf16: bool,
                 total_steps: int, seed: int, compile: bool = False) -> None:
        from composer.training.module import ComposerLM, OptimConfig
        from composer.training.schedule import ScheduleConfig

        self.arch, self.device, self.bf16, self.compiled = arch, device, bf16, compile
        torch.manual_seed(seed)
        self.model = build_model(arch, device)
        self.model.train()
        if compile:
            # What `composer train --compile` does (ComposerLM.configure_model): torch.compile each residual
            # layer in place; embedding, final norm, LM head + loss, clipping and AdamW stay eager. Compilation
            # happens lazily, in the first step.
            from composer.training.parallelize import apply_compile

            apply_compile(self.model)
        # The engine's optimizer and LR schedule, built by the engine's own code (TrainConfig defaults:
        # AdamW lr 3e-3, betas (0.9, 0.95), eps 1e-8, weight decay 0.1 on all but norms; cosine, 5% warmup).
        module = ComposerLM(arch, OptimConfig(schedule=ScheduleConfig(
            warmup_steps=round(0.05 * total_steps), total_steps=total_steps)))
        module.model = self.model
        configured = module.configure_optimizers()
        self.optimizer = configured["optimizer"]
        self.scheduler = configured["lr_scheduler"]["scheduler"]
        self.optim = module.optim
        self.max_norm = self.optim.grad_clip if self.optim.grad_clip > 0 else float("inf")
        # Engine batches are [batch, seq_len + 1] token ids; the step uses batch[:, :-1] -> batch[:, 1:].
        gen = torch.Generator().manual_seed(seed)
        self.batches = [
            torch.randint(0, arch.vocab_size, (batch_size, seq_len + 1), generator=gen).to(device)
            for _ in range(4)
        ]
        self.tokens_per_step = batch_size * seq_len
        self.params = sum(p.numel() for p in self.model.parameters())
        self.index = 0
        self.losses: list[torch.Tensor] = []
        self.timeline: Timeline | None = None

    def _mark(self, section: str) -> None:
        if self.timeline is not None:
            self.timeline.mark(section)

    def step(self) -> None:
        batch = self.batches[self.index % len(self.batches)]
        self.index += 1
        self._mark("other")  # zero_grad and the loop's own Python
        self.optimizer.zero_grad(set_to_none=True)
        autocast = (torch.autocast("cuda", dtype=torch.bfloat16) if self.bf16 else contextlib.nullcontext())
        with autocast:  # Lightning's bf16-mixed wraps training_step (forward + loss) in autocast, not backward
            loss = self.model(batch[:, :-1], batch[:, 1:]).loss
        self._mark("backward/head")
        loss.backward()
        self._mark("clip")
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.max_norm)
        self._mark("optimizer")
        self.optimizer.step()
        self.scheduler.step()
        self._mark("end")
        self.losses.append(loss.detach())

    def timed(self, n: int) -> list[float]:
        """Run ``n`` steps; seconds per step, the device synchronised at both ends of each."""
        times = []
        gc.collect()
        gc.disable()  # no collector pauses inside a timed step
        try:
            for _ in range(n):
                synchronize(self.device)
                start = time.perf_counter()
                self.step()
                synchronize(self.device)
                times.append(time.perf_counter() - start)
        finally:
            gc.enable()
        return times

    def breakdown(self, n: int) -> tuple[list[dict[str, float]], list[float]]:
        """Seconds per section of each of ``n`` instrumented steps, and those steps' totals."""
        model, mark = self.model, self._mark
        handles = [model.register_forward_pre_hook(lambda m, a: mark("forward/embedding"))]
        for index, layer in enumerate(model.layers):
            kind = layer.primitive.name
            after = "backward/embedding" if index == 0 else "backward/other"
            handles += [
                layer.register_forward_pre_hook(lambda m, a, k=kind: mark(f"forward/{k}")),
                layer.register_forward_hook(lambda m, a, o: mark("forward/other")),
                layer.register_full_backward_pre_hook(lambda m, g, k=kind: mark(f"backward/{k}")),
                layer.register_full_backward_hook(lambda m, gi, go, s=after: mark(s)),
            ]
        handles.append(model.norm.register_forward_pre_hook(lambda m, a: mark("forward/head")))
        steps, totals = [], []
        gc.collect()
        gc.disable()
        try:
            for _ in range(n):
                self.timeline = Timeline(self.device.type == "cuda")
                synchronize(self.device)
                self.step()
                synchronize(self.device)
                sections = self.timeline.sections()
                steps.append(sections)
                totals.append(sum(sections.values()))
        finally:
            gc.enable()
            self.timeline = None
            for handle in handles:
                handle.remove()
        return steps, totals

    def final_losses(self) -> tuple[float | None, float | None]:
        if not self.losses:
            return None, None
        return float(self.losses[0]), float(self.losses[-1])


def step_stats(times: list[float], tokens_per_step: int) -> dict:
    median = statistics.median(times)
    mean = statistics.fmean(times)
    return {
        "median_step_s": median, "mean_step_s": mean, "min_step_s": min(times), "max_step_s": max(times),
        "tokens_per_s": tokens_per_step / median, "tokens_per_s_mean": tokens_per_step / mean,
        "noisy": median > 1.25 * min(times), "step_times_s": times,
    }


def graph_breaks() -> int:
    """Graph breaks dynamo has counted in this process so far."""
    from torch._dynamo.utils import counters

    return sum(counters["graph_break"].values())


def compiled_graphs() -> int:
    """Graphs dynamo has compiled in this process so far (a recompilation adds one)."""
    from torch._dynamo.utils import counters

    return counters["stats"]["unique_graphs"]


def new_loop(arch: ArchConfig, seq_len: int, batch_size: int, args, device: torch.device, compiled: bool,
             ) -> tuple[BareLoop, list[float], dict]:
    """A fresh model + optimizer, warmed up: (loop, warmup step times, compile facts)."""
    if compiled:
        # Each configuration compiles from scratch: no code cached by an earlier row (another sequence length
        # would otherwise recompile with dynamic shapes), and no row can run into dynamo's recompile limit.
        torch._dynamo.reset()
    # one LR schedule length for both modes, so that their steps (and losses) correspond
    total = max(args.warmup, args.compile_warmup if True in args.compile_modes else 0) + args.steps \
        + args.breakdown_steps
    loop = BareLoop(arch, batch_size, seq_len, device, device.type == "cuda", total_steps=total, seed=args.seed,
                    compile=compiled)
    breaks, graphs = graph_breaks(), compiled_graphs()
    warm = loop.timed(args.compile_warmup if compiled else args.warmup)
    facts = ({"graph_breaks": graph_breaks() - breaks, "graphs": compiled_graphs() - graphs,
              "graphs_after_warmup": compiled_graphs()} if compiled else {})
    return loop, warm, facts


def loop_record(loop: BareLoop, backend: str, seq_len: int, batch_size: int, args, device: torch.device,
                peak: float | None, warm: list[float], times: list[float], facts: dict) -> dict:
    """The figures of one bare-loop run; the eager one also gets the step-time breakdown."""
    arch = loop.arch
    # Hooks on a compiled layer would run inside its compiled code (graph breaks, recompilation): the
    # breakdown is measured for eager models only.
    n_breakdown = 0 if loop.compiled else args.breakdown_steps
    per_step, instrumented = loop.breakdown(n_breakdown) if n_breakdown else ([], [])
    keys = list(dict.fromkeys(key for sections in per_step for key in sections))
    # Median per section: robust to bursts of load on a shared machine (the mean is kept in the JSON too).
    median_sections = {k: statistics.median(sections.get(k, 0.0) for sections in per_step) for k in keys}
    mean_sections = {k: statistics.fmean(sections.get(k, 0.0) for sections in per_step) for k in keys}
    stats = analyze(arch, seq_len=seq_len)
    record = {
        "backend": backend,
        "compiled": loop.compiled,
        "mode": "compiled" if loop.compiled else "eager",
        "effective_backend": effective_backend(arch, device),
        "seq_len": seq_len,
        "batch_size": batch_size,
        "tokens_per_step": loop.tokens_per_step,
        "params": loop.params,
        "flops_per_token": stats.flops_per_token,
        **step_stats(times, loop.tokens_per_step),
        "warmup_step_times_s": warm,
        "breakdown_s": median_sections,
        "breakdown_mean_s": mean_sections,
        "breakdown_steps": n_breakdown,
        "instrumented_step_s": statistics.median(instrumented) if instrumented else None,
    }
    if loop.compiled:
        # the first step traces and compiles every distinct layer, forward and backward
        record["first_step_s"] = warm[0]
        record["graph_breaks"], record["graphs"] = facts["graph_breaks"], facts["graphs"]
        # graphs compiled during the timed steps: compilation time inside them (raise --compile-warmup)
        record["graphs_compiled_while_timed"] = compiled_graphs() - facts["graphs_after_warmup"]
    record["achieved_flops_per_s"] = record["tokens_per_s"] * stats.flops_per_token
    record["mfu"] = record["achieved_flops_per_s"] / peak if peak else None
    record["peak_memory_bytes"] = torch.cuda.max_memory_allocated(device) if device.type == "cuda" else None
    record["first_loss"], record["last_loss"] = loop.final_losses()
    return record


def failed(backend: str, seq_len: int, compiled: bool, err: Exception) -> dict:
    return {"backend": backend, "seq_len": seq_len, "compiled": compiled, "mode": "compiled" if compiled else "eager",
            "skipped": f"failed: {type(err).__name__}: {err}"[:300]}


def measure(arch: ArchConfig, backend: str, seq_len: int, batch_size: int, args, device: torch.device,
            peak: float | None) -> list[dict]:
    """Bare-loop runs of one configuration, one per compile mode, each on a fresh model (same seed, so the same
    initial weights and batches): warmup, timed steps, then (eager only) the instrumented breakdown steps.

    On CPU with both modes the two models live side by side and their timed steps alternate in rounds (the order
    swapped every round), so a burst of load from other jobs hits both alike. On CUDA they run one after the
    other, so that each run's peak memory is its own.
    """
    modes = args.compile_modes
    if device.type == "cpu" and len(modes) > 1:
        return measure_interleaved(arch, backend, seq_len, batch_size, args, device, peak)
    records = []
    for compiled in modes:
        loop = None
        try:
            if device.type == "cuda":
                torch.cuda.reset_peak_memory_stats(device)
            loop, warm, facts = new_loop(arch, seq_len, batch_size, args, device, compiled)
            times = loop.timed(args.steps)
            records.append(loop_record(loop, backend, seq_len, batch_size, args, device, peak, warm, times, facts))
        except Exception as err:  # noqa: BLE001 - e.g. out of memory at a long sequence: report, go on
            records.append(failed(backend, seq_len, compiled, err))
        del loop
        free_memory(device)  # after the except block, so no traceback holds the model
    return records


def measure_interleaved(arch: ArchConfig, backend: str, seq_len: int, batch_size: int, args,
                        device: torch.device, peak: float | None) -> list[dict]:
    loops: dict[bool, tuple[BareLoop, list[float], dict]] = {}
    records: dict[bool, dict] = {}
    for compiled in args.compile_modes:
        try:
            loops[compiled] = new_loop(arch, seq_len, batch_size, args, device, compiled)
        except Exception as err:  # noqa: BLE001 - the other mode still runs
            records[compiled] = failed(backend, seq_len, compiled, err)
    times: dict[bool, list[float]] = {compiled: [] for compiled in loops}
    order = list(loops)
    rounds = min(args.steps, 5)
    done = 0
    for index in range(rounds):
        n = (args.steps - done) // (rounds - index)
        for compiled in order if index % 2 == 0 else order[::-1]:
            times[compiled] += loops[compiled][0].timed(n)
        done += n
    for compiled, (loop, warm, facts) in loops.items():
        record = loop_record(loop, backend, seq_len, batch_size, args, device, peak, warm, times[compiled], facts)
        record["interleaved"] = True
        records[compiled] = record
    loops.clear()
    free_memory(device)
    return [records[compiled] for compiled in args.compile_modes]


def add_compile_ratios(runs: list[dict]) -> None:
    """On each compiled run: its tokens/s over the eager run's of the same backend and sequence length."""
    eager = {(r["backend"], r["seq_len"]): r for r in runs if not r["compiled"] and "skipped" not in r}
    for r in runs:
        base = eager.get((r["backend"], r["seq_len"]))
        if not r["compiled"] or "skipped" in r or base is None:
            continue
        r["ratio_vs_eager"] = r["tokens_per_s"] / base["tokens_per_s"]  # median steps
        r["ratio_vs_eager_best"] = base["min_step_s"] / r["min_step_s"]  # fastest steps
        r["ratio_vs_eager_mean"] = r["tokens_per_s_mean"] / base["tokens_per_s_mean"]
        if r["first_loss"] is not None and base["first_loss"] is not None:
            # same seed, same batches: the first loss differs only by the compiled kernels' rounding
            r["first_loss_diff"] = r["first_loss"] - base["first_loss"]


# -- the engine ---------------------------------------------------------------------------------------------
def engine_arch(args, seq_len: int) -> ArchConfig:
    """The architecture ``composer.training.run.build`` makes of (pattern, preset) for the byte tokenizer."""
    from composer.presets import resolve_architecture
    from composer.training.config import DEFAULT_PRESET

    arch, _ = resolve_architecture(args.pattern, args.preset, DEFAULT_PRESET)
    return arch.replace(max_seq_len=max(arch.max_seq_len, seq_len), vocab_size=engine_vocab())


def run_engine(strategy: str, args, seq_len: int, batch_size: int, steps: int, device: torch.device) -> dict:
    """``composer.training.run.train`` end to end; the summary plus the engine's own per-step times."""
    from unittest import mock

    from composer.training import TrainConfig
    from composer.training import run as engine
    from composer.training.throughput import ThroughputMonitor

    monitors: list = []

    class RecordingMonitor(ThroughputMonitor):
        """The engine's monitor, unchanged, also keeping each timed step and each step's start and end."""

        def __init__(self, *a, **k) -> None:
            super().__init__(*a, **k)
            self.step_times: list[float] = []
            self.starts: list[float] = []
            self.ends: list[float] = []
            monitors.append(self)

        def on_train_batch_start(self, trainer, *rest) -> None:
            super().on_train_batch_start(trainer, *rest)  # synchronises CUDA first
            self.starts.append(time.perf_counter())  # one micro-batch per step here (devices 1, no accumulation)

        def on_train_batch_end(self, trainer, pl_module, *rest) -> None:
            steps, timed, train_time = self.steps, self.timed_steps, self.train_time
            super().on_train_batch_end(trainer, pl_module, *rest)
            if self.steps > steps:
                self.ends.append(time.perf_counter())
            if self.timed_steps > timed:
                self.step_times.append(self.train_time - train_time)

    cuda = device.type == "cuda"
    precision = "bf16-mixed" if cuda else "32-true"
    record: dict = {"strategy": strategy, "precision": precision, "devices": 1, "seq_len": seq_len,
                    "batch_size": batch_size, "steps": steps}
    captured = io.StringIO()
    lightning_log = logging.getLogger("lightning.pytorch")
    level = lightning_log.level
    lightning_log.setLevel(logging.WARNING)
    threads = torch.get_num_threads()
    free_memory(device)
    try:
        with tempfile.TemporaryDirectory(prefix="composer-bench-") as tmp:
            config = TrainConfig(
                arch=args.pattern, preset=args.preset, seq_len=seq_len, batch_size=batch_size,
                tokens=batch_size * seq_len * steps, max_documents=args.engine_documents, wandb="off",
                out=str(Path(tmp) / "run"), data_cache=str(Path(tmp) / "data"),
                accelerator="gpu" if cuda else "cpu", devices=1, strategy=strategy, precision=precision,
                checkpoint_interval=steps, val_batches=2, log_interval=10, seed=args.seed,
            )
            # Only the engine's monitor class is swapped for the recording subclass; without it (a refactor
            # moved it), the run goes on and reports the summary alone.
            recording = (mock.patch.object(engine, "ThroughputMonitor", RecordingMonitor)
                         if getattr(engine, "ThroughputMonitor", None) is ThroughputMonitor
                         else contextlib.nullcontext())
            with recording, contextlib.redirect_stdout(captured), contextlib.redirect_stderr(captured):
                summary = engine.train(config)
    except Exception as err:  # noqa: BLE001 - report and go on with the other runs
        record["error"] = f"{type(err).__name__}: {err}"
        record["output_tail"] = captured.getvalue()[-2000:]
        return record
    finally:
        lightning_log.setLevel(level)
        torch.set_num_threads(threads)
        free_memory(device)
    monitor = monitors[-1] if monitors else None
    record["summary"] = {key: summary.get(key) for key in (
        "tokens_per_s", "mfu", "params", "flops_per_token", "peak_memory_bytes", "steps", "train_loss",
        "val_loss", "strategy", "precision", "wall_time_s")}
    record["tokens_per_step"] = batch_size * seq_len
    if monitor is not None and monitor.step_times:
        record["step_times_s"] = monitor.step_times  # steps 2..N, as the engine timed them
        if len(monitor.starts) >= 2 and len(monitor.ends) == len(monitor.starts):
            # steps 2..N from the start of step 2 to the end of step N: everything, data loading included
            wall = monitor.ends[-1] - monitor.starts[1]
            record["wall_tokens_per_s"] = (len(monitor.ends) - 1) * record["tokens_per_step"] / wall
            # from one step's end to the next one's start: data loading, callbacks, progress, Lightning's loop
            gaps = [start - end for end, start in zip(monitor.ends, monitor.starts[1:])]
            record["between_steps_s_median"] = statistics.median(gaps)
    return record


def engine_comparison(args, device: torch.device, peak: float | None) -> dict:
    """Engine runs bracketed by bare-loop steps of the same model (before and after), and their ratios.

    The reference is a fresh model and optimizer, like the engine's, stepped in this (already warm) process
    right before the engine runs, so that both start equally warm: a cold process's first steps are slow.
    """
    seq_len = args.seq_len[0]
    batch_size = batch_for(args, seq_len)
    arch = engine_arch(args, seq_len)
    steps = args.warmup + args.steps  # the engine times steps 2..N; the bare loop's 'before' run is N steps too
    out: dict = {"peer": PEER, "seq_len": seq_len, "batch_size": batch_size, "engine_steps": steps,
                 "pattern": arch.compact, "d_model": arch.d_model, "vocab_size": arch.vocab_size,
                 "attention": effective_backend(arch, device)}
    ref = BareLoop(arch, batch_size, seq_len, device, device.type == "cuda", total_steps=2 * steps + 1,
                   seed=args.seed)
    before = ref.timed(steps)
    out["bare_params"] = ref.params
    out["engines"] = [run_engine(s, args, seq_len, batch_size, steps, device) for s in args.engine]
    ref.timed(1)  # re-warm after the engine ran
    after = ref.timed(args.steps)
    tokens = ref.tokens_per_step
    steady = before[args.warmup:] + after
    out["bare"] = {
        # the engine's summary definition: mean over steps 2..N of a fresh run
        "tokens_per_s_summary_definition": tokens * (len(before) - 1) / sum(before[1:]) if len(before) > 1 else None,
        "tokens_per_s_median": tokens / statistics.median(steady),
        "tokens_per_s_best": tokens / min(steady),
        "median_step_s": statistics.median(steady),
        "noisy": statistics.median(steady) > 1.25 * min(steady),
        "steps_before": len(before), "steps_after": len(after),
        "step_times_before_s": before, "step_times_after_s": after,
    }
    out["bare"]["mfu_median"] = (out["bare"]["tokens_per_s_median"] * analyze(arch, seq_len).flops_per_token / peak
                                 if peak else None)
    for record in out["engines"]:
        if "error" in record:
            continue
        summary = record["summary"]
        if summary["params"] != ref.params:
            record["warning"] = f"engine params {summary['params']:,} != bare loop {ref.params:,}"
        times = record.get("step_times_s", [])
        steady_engine = times[max(0, args.warmup - 1):]  # drop the same warmup as the bare loop
        record["tokens_per_s_median"] = tokens / statistics.median(steady_engine) if steady_engine else None
        record["tokens_per_s_best"] = tokens / min(steady_engine) if steady_engine else None
        record["noisy"] = bool(steady_engine) and statistics.median(steady_engine) > 1.25 * min(steady_engine)
        bare = out["bare"]
        record["ratio_summary"] = (summary["tokens_per_s"] / bare["tokens_per_s_summary_definition"]
                                   if summary.get("tokens_per_s") and bare["tokens_per_s_summary_definition"]
                                   else None)
        record["ratio_median"] = (record["tokens_per_s_median"] / bare["tokens_per_s_median"]
                                  if record["tokens_per_s_median"] else None)
        record["ratio_best"] = (record["tokens_per_s_best"] / bare["tokens_per_s_best"]
                                if record["tokens_per_s_best"] else None)
        record["ratio_wall"] = (record["wall_tokens_per_s"] / bare["tokens_per_s_median"]
                                if record.get("wall_tokens_per_s") else None)
    return out


def batch_for(args, seq_len: int) -> int:
    return args.batch_size or max(1, args.batch_tokens // seq_len)


# -- report -------------------------------------------------------------------------------------------------
def fmt(value, spec: str, missing: str = "-") -> str:
    return missing if value is None else format(value, spec)


def print_report(result: dict) -> None:
    c = result["config"]
    cuda = result["device"] == "cuda"
    print(f"Training throughput: Composer training step, {result['device_name']}, "
          f"{'bf16 autocast' if cuda else 'float32'}")
    print(f"  torch {result['torch']}, lightning {result['lightning']}, python {result['python']}, "
          f"{result['threads']} threads" + (f", {result['flash']}" if cuda else ""))
    print(f"  model: {c['preset']} widths, pattern {c['compact']} ({c['n_layers']} layers), d_model {c['d_model']}, "
          f"heads {c['n_heads']}/{c['n_kv_heads']} kv x {c['head_dim']}, ffn {c['ffn_dim']}, vocab {c['vocab_size']}"
          f"{' (tied)' if c['tie_embeddings'] else ''}")
    print(f"  step: {c['step']}")
    print(f"  {c['warmup']} warmup + {c['steps']} timed steps per run, then {c['breakdown_steps']} instrumented "
          f"steps for the breakdown; load average {result['loadavg_start']} at start")
    if c["compile"] != "off":
        print(f"  compiled: {c['compiled_step']}; {c['compile_warmup']} untimed warmup steps (the first compiles), "
              f"then {c['steps']} timed, no breakdown")
        if c["interleaved"]:
            print("  eager and compiled models side by side, their timed steps alternating in 5 rounds")
    if result.get("peak_flops"):
        print(f"  MFU peak: {result['peak_flops'] / 1e12:.1f} TFLOP/s bf16 dense (Lightning's table)")
    print()
    runs = [r for r in result["runs"] if "skipped" not in r]
    header = (f"  {'run':<16} {'mode':<8} {'batch':>5} {'params':>13} {'median s':>9} {'min':>8} {'max':>8}"
              f" {'tokens/s':>11} {'mean tok/s':>11} {'TFLOP/s':>8} {'MFU':>6} {'peak mem':>9} {'x eager':>7}")
    print(header)
    print("  " + "-" * (len(header) - 2))
    for r in result["runs"]:
        label = f"{r['backend']} @ {r['seq_len']}"
        if "skipped" in r:
            print(f"  {label:<16} {r['mode']:<8} skipped: {r['skipped']}")
            continue
        mem = f"{r['peak_memory_bytes'] / 2**30:.1f} GiB" if r["peak_memory_bytes"] else "-"
        print(f"  {label:<16} {r['mode']:<8} {r['batch_size']:>5} {r['params']:>13,} {r['median_step_s']:>9.4f} "
              f"{r['min_step_s']:>8.4f} {r['max_step_s']:>8.4f} {r['tokens_per_s']:>11,.0f} "
              f"{r['tokens_per_s_mean']:>11,.0f} {r['achieved_flops_per_s'] / 1e12:>8.3f} {fmt(r['mfu'], '6.1%'):>6} "
              f"{mem:>9} {fmt(r.get('ratio_vs_eager'), '7.3f')}")
    if any(r["noisy"] for r in runs):
        print("  note: a median step > 1.25x the fastest one: the machine was busy; rerun or raise --steps")
    if any(r["compiled"] for r in runs):
        print_compiled(runs, c["compile_warmup"])
    eager = [r for r in runs if r["breakdown_s"]]
    if eager:
        print_breakdown(eager)
    engine = result.get("engine")
    if engine:
        print_engine(engine)


def print_compiled(runs: list[dict], warmup: int) -> None:
    print()
    print("  compiled vs eager (x eager = compiled tokens/s / eager tokens/s, same model, batch and seed; the")
    print(f"  compiled run's {warmup} warmup step(s) untimed, the first of them shown as 'first step')")
    print(f"  {'run':<16} {'median':>8} {'fastest':>8} {'mean':>8} {'first step':>11} {'graph breaks':>13}"
          f" {'first loss, compiled - eager':>29}")
    for r in runs:
        if not r["compiled"]:
            continue
        label = f"{r['backend']} @ {r['seq_len']}"
        print(f"  {label:<16} {fmt(r.get('ratio_vs_eager'), '8.3f'):>8} {fmt(r.get('ratio_vs_eager_best'), '8.3f'):>8} "
              f"{fmt(r.get('ratio_vs_eager_mean'), '8.3f'):>8} {r['first_step_s']:>9.1f} s {r['graph_breaks']:>13} "
              f"{fmt(r.get('first_loss_diff'), '29.2e'):>29}")
    if any(r.get("graph_breaks") for r in runs):
        print("  graph breaks: dynamo split a layer's code and runs the part it could not trace eagerly")
    for r in runs:
        if r.get("graphs_compiled_while_timed"):
            print(f"  warning: {r['backend']} @ {r['seq_len']} compiled {r['graphs_compiled_while_timed']} graph(s) "
                  "during its timed steps; raise --compile-warmup")


def print_breakdown(runs: list[dict]) -> None:
    kinds = []
    for r in runs:
        for key in r["breakdown_s"]:
            kind = key.split("/", 1)[1] if "/" in key else None
            if kind and kind not in ("embedding", "head", "other") and kind not in kinds:
                kinds.append(kind)
    counts = runs[0]["counts"]
    rows: list[tuple[str, list[str] | None]] = []

    def row(label: str, keys: list[str]) -> None:
        cells = []
        for r in runs:
            b = r["breakdown_s"]
            total = sum(b.values())
            value = sum(b.get(k, 0.0) for k in keys)
            cells.append(f"{value * 1e3:9.2f} {value / total:6.1%}")
        rows.append((label, cells))

    row("forward", [k for k in runs[0]["breakdown_s"] if k.startswith("forward/")])
    row("  embedding", ["forward/embedding"])
    for kind in kinds:
        row(f"  {kind} layers (x{counts.get(kind, '?')})", [f"forward/{kind}"])
    row("  final norm + LM head + loss", ["forward/head"])
    row("  between layers", ["forward/other"])
    row("backward", [k for k in runs[0]["breakdown_s"] if k.startswith("backward/")])
    row("  loss + LM head + final norm", ["backward/head"])
    for kind in reversed(kinds):
        row(f"  {kind} layers (x{counts.get(kind, '?')})", [f"backward/{kind}"])
    row("  embedding + tied-weight grad", ["backward/embedding"])
    row("  between layers", ["backward/other"])
    row("clip_grad_norm_", ["clip"])
    row("optimizer (AdamW + LR schedule)", ["optimizer"])
    row("zero_grad + loop", ["other"])
    labels = [f"{r['backend']} @ {r['seq_len']}" for r in runs]
    width = 35
    print()
    print("  step-time breakdown, ms per step and share (median of the instrumented steps; marks at layer")
    print("  boundaries from module forward/backward hooks and around backward, clipping and the optimizer)")
    print(f"  {'section':<{width}}" + "".join(f" {label:>16}" for label in labels))
    print("  " + "-" * (width + 17 * len(labels)))
    for label, cells in rows:
        print(f"  {label:<{width}}" + "".join(f" {cell:>16}" for cell in cells))
    print(f"  {'instrumented step (median)':<{width}}"
          + "".join(f" {r['instrumented_step_s'] * 1e3:9.2f}{'':7}" for r in runs))
    print(f"  {'uninstrumented median step':<{width}}"
          + "".join(f" {r['median_step_s'] * 1e3:9.2f}{'':7}" for r in runs))


def print_engine(engine: dict) -> None:
    print()
    print(f"  training engine (composer.training.run.train) vs {engine['peer']}: pattern {engine['pattern']}, "
          f"d_model {engine['d_model']}, vocab {engine['vocab_size']},")
    bare = engine["bare"]
    print(f"  batch {engine['batch_size']} x seq {engine['seq_len']}, {engine['engine_steps']} engine steps, "
          f"attention {engine['attention']}; the bare loop is a fresh model of the same architecture")
    print(f"  ({engine['bare_params']:,} params), {bare['steps_before']} steps right before the engine run(s) and "
          f"{bare['steps_after']} after")
    ok = [e for e in engine["engines"] if "error" not in e]
    for e in engine["engines"]:
        if "error" in e:
            print(f"  engine {e['strategy']} ({e['precision']}) failed: {e['error']}")
        elif "warning" in e:
            print(f"  warning: {e['warning']}")
    if not ok:
        return
    labels = [f"engine {e['strategy']} {e['precision']}" for e in ok]
    print(f"  {'':<44} {'bare loop':>12}" + "".join(f" {label:>24} {'ratio':>6}" for label in labels))
    lines = [
        ("tokens/s, summary (mean of steps 2..N)", "tokens_per_s_summary_definition",
         lambda e: e["summary"]["tokens_per_s"], "ratio_summary"),
        ("tokens/s, median step after warmup", "tokens_per_s_median",
         lambda e: e.get("tokens_per_s_median"), "ratio_median"),
        ("tokens/s, fastest step (cross-check)", "tokens_per_s_best",
         lambda e: e.get("tokens_per_s_best"), "ratio_best"),
        ("tokens/s, wall incl. data + loop (2..N)", "tokens_per_s_median",
         lambda e: e.get("wall_tokens_per_s"), "ratio_wall"),
    ]
    for label, bare_key, value, ratio in lines:
        cells = "".join(f" {fmt(value(e), '24,.0f')} {fmt(e.get(ratio), '6.3f')}" for e in ok)
        print(f"  {label:<44} {fmt(bare.get(bare_key), '12,.0f')}{cells}")
    if any(e.get("between_steps_s_median") is not None for e in ok):
        cells = "".join(f" {e['between_steps_s_median'] * 1e3:21.2f} ms {'':>6}" for e in ok
                        if e.get("between_steps_s_median") is not None)
        print(f"  {'gap between steps (median; data, callbacks)':<44} {'-':>12}{cells}")
    if any(e["summary"].get("mfu") for e in ok) or bare.get("mfu_median"):
        cells = "".join(f" {fmt(e['summary'].get('mfu'), '24.1%')} {'':>6}" for e in ok)
        print(f"  {'MFU (summary; bare: median step)':<44} {fmt(bare.get('mfu_median'), '12.1%')}{cells}")
    if any(e["summary"].get("peak_memory_bytes") for e in ok):
        cells = "".join(f" {e['summary']['peak_memory_bytes'] / 2**30:21.2f} GiB {'':>6}" for e in ok)
        print(f"  {'peak memory (engine summary)':<44} {'':>12}{cells}")
    print("  ratio = engine / bare loop (below 1: the engine is slower; both eager). The wall row is the only")
    print("  one that includes data loading and Lightning's work between steps; it is compared with the bare median.")
    if bare["noisy"] or any(e.get("noisy") for e in ok):
        print("  note: a median step > 1.25x the fastest one: the machine was busy during these runs; the")
        print("  fastest-step row is the closest to the unloaded speed; rerun on an idle machine")


# -- main ---------------------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    device = torch.device(args.device)
    if device.type == "cpu":
        torch.set_num_threads(args.threads)
    import lightning

    loadavg_start = os.getloadavg()
    base = get_preset(args.preset).arch.with_pattern(args.pattern)
    vocab = args.vocab or (engine_vocab() if device.type == "cpu" else base.vocab_size)
    peak = peak_flops(device)
    flash_ok, flash_note = flash_status() if device.type == "cuda" else (False, "cpu")

    runs: list[dict] = []
    for seq_len in args.seq_len:
        batch_size = batch_for(args, seq_len)
        arch_seq = base.replace(vocab_size=vocab, max_seq_len=max(base.max_seq_len, seq_len))
        for backend in args.backends:
            if backend == "flash" and not (flash_ok and device.type == "cuda"):
                for compiled in args.compile_modes:
                    runs.append({"backend": backend, "seq_len": seq_len, "compiled": compiled,
                                 "mode": "compiled" if compiled else "eager",
                                 "skipped": flash_note if device.type == "cuda" else "flash-attn needs CUDA"})
                continue
            arch = with_backend(arch_seq, backend)
            # measure() reports a failing mode (out of memory at a long sequence, a compile error) as skipped
            for record in measure(arch, backend, seq_len, batch_size, args, device, peak):
                if "skipped" not in record:
                    record["counts"] = {layer_kind(s): n for s, n in arch.counts.items()}
                runs.append(record)
    add_compile_ratios(runs)

    engine = engine_comparison(args, device, peak) if args.engine else None
    free_memory(device)

    from composer.training.module import OptimConfig

    o = OptimConfig()
    step = (f"optimizer and schedule from ComposerLM.configure_optimizers: AdamW over model.parameter_groups "
            f"(lr {o.lr:g}, betas {o.betas}, eps {o.eps:g}, weight decay {o.weight_decay:g} except norms), "
            f"cosine LambdaLR; clip_grad_norm_({o.grad_clip:g})")
    result = {
        "benchmark": "training_throughput",
        "device": device.type,
        "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else f"CPU ({platform.machine()})",
        "torch": torch.__version__,
        "lightning": lightning.__version__,
        "python": platform.python_version(),
        "threads": torch.get_num_threads(),
        "cpu_count": os.cpu_count(),
        "flash": flash_note,
        "peak_flops": peak,
        "loadavg_start": [round(x, 2) for x in loadavg_start],
        "loadavg_end": [round(x, 2) for x in os.getloadavg()],
        "config": {
            "preset": args.preset, "pattern": base.pattern, "compact": base.compact, "n_layers": base.n_layers,
            "d_model": base.d_model, "n_heads": base.n_heads, "n_kv_heads": base.n_kv_heads,
            "head_dim": base.head_dim, "ffn_dim": base.ffn_dim, "vocab_size": vocab,
            "tie_embeddings": base.tie_embeddings, "seq_lens": args.seq_len, "steps": args.steps,
            "warmup": args.warmup, "breakdown_steps": args.breakdown_steps, "seed": args.seed,
            "precision": "bf16 autocast" if device.type == "cuda" else "float32", "step": step,
            "compile": args.compile, "compile_warmup": args.compile_warmup,
            "compiled_step": COMPILED_STEP, "interleaved": device.type == "cpu" and len(args.compile_modes) > 1,
        },
        "runs": runs,
        "engine": engine,
    }
    if device.type == "cpu":
        import resource

        result["peak_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    if args.json:
        print(json.dumps(result))
    else:
        print_report(result)
    return 0


def layer_kind(symbol: str) -> str:
    from primitives.registry import REGISTRY

    return REGISTRY.get(symbol).name


if __name__ == "__main__":
    sys.exit(main())
