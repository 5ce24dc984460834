"""Measured inference speed and cache memory of an architecture, beside its analytic cache and a matched Llama.

For each (batch size, context length) of a grid, on random token ids and a model built fresh (or loaded):

* **prefill**: the ``context``-token prompt in one pass through the inference cache, plus picking the first
  token: ``time_to_first_token_s`` and ``prefill_tokens_per_s = batch * context / time``;
* **decode**: ``new_tokens`` more tokens one at a time through the cache (greedy, LM head on the last position
  only, as :meth:`ComposerModel.generate <composer.model.ComposerModel.generate>` does):
  ``decode_tokens_per_s`` per sequence and ``decode_tokens_per_s_total`` over the batch;
* **cache**: ``cache_bytes``, what :class:`~composer.inference.InferenceCache` allocated for
  ``context + new_tokens`` tokens (:meth:`~composer.inference.InferenceCache.nbytes`; on CUDA also the
  allocator's growth, ``cache_bytes_device``) beside ``cache_bytes_analytic``, ``batch *
  analyze(arch, seq_len=context + new_tokens, cache_dtype_bytes=...).cache_bytes_per_sequence`` of
  :mod:`composer.accounting`, the figure ``composer info`` reports.

The decode runs eagerly through ``model.next_token_logits``, or with ``BenchGrid.compile`` through the compiled
step of :func:`~composer.inference.compile_decode_step` (Inductor on the CPU, CUDA graphs on CUDA; compiled in the
warmup run, one graph per batch size and cache length); each row's ``decode_path`` names which ran.

One untimed warmup run, then the median of ``repeats`` timed runs; ``decode_ms_per_token`` keeps every repeat's
milliseconds per decoded token as a figure (median, ``min``, ``max``, ``repeats``, ``spread``:
:func:`composer.evaluation.bench_cost.figure`), which ``composer bench-inference`` prints beside the median. The same grid is measured for the Llama
pattern (``(AM)xN``) whose non-embedding parameters are closest to the architecture's own
(:func:`scaling.matching.matched_baselines` with the architecture as reference), and the ratios
architecture / Llama of decode throughput and cache bytes are reported: the paper's inference figures.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from composer.accounting import DTYPE_BYTES, analyze, format_bytes
from composer.config import ArchConfig
from composer.errors import ConfigError
from composer.evaluation.bench_cost import figure
from composer.inference import EAGER, DecodeStep, compile_decode_step
from composer.precision import available_memory_bytes, torch_dtype


@dataclass(frozen=True)
class BenchGrid:
    batch_sizes: tuple[int, ...] = (1, 4)
    context_lengths: tuple[int, ...] = (128, 512, 2048)
    new_tokens: int = 32
    dtype: str = "fp32"  # fp32, bf16 or fp16 (composer.precision.parse_dtype's short names)
    repeats: int = 3
    seed: int = 0
    compile: bool = False  # decode through compile_decode_step's compiled step


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def build_bench_model(arch: ArchConfig, device: torch.device, dtype: str) -> torch.nn.Module:
    from composer.model import build_model

    return build_model(arch, device=device).to(torch_dtype(dtype)).eval()


@torch.no_grad()
def measure(model, batch: int, context: int, grid: BenchGrid, device: torch.device,
            decode: DecodeStep | None = None) -> dict[str, Any]:
    """One grid point (see module doc); ``decode``: the decoding step (default ``model.next_token_logits``)."""
    arch: ArchConfig = model.arch
    max_len = context + grid.new_tokens
    cuda = device.type == "cuda"
    if cuda:
        torch.cuda.empty_cache()
        before = torch.cuda.memory_allocated(device)
    cache = model.init_cache(batch, max_len, device=device, dtype=torch_dtype(grid.dtype))
    device_bytes = torch.cuda.memory_allocated(device) - before if cuda else None
    generator = torch.Generator().manual_seed(grid.seed + 7919 * batch + context)
    prompt = torch.randint(0, arch.vocab_size, (batch, context), generator=generator).to(device)
    step = model.next_token_logits if decode is None else decode

    def run_once() -> tuple[float, float]:
        cache.reset()
        _sync(device)
        started = time.perf_counter()
        token = model.next_token_logits(prompt, cache).argmax(-1)
        _sync(device)
        first = time.perf_counter()
        for _ in range(grid.new_tokens):
            token = step(token[:, None], cache).argmax(-1)
        _sync(device)
        return first - started, time.perf_counter() - first

    run_once()  # warmup: kernels, allocator, caches, and a compiled step's compilation
    times = [run_once() for _ in range(grid.repeats)]
    prefill_s = statistics.median(t for t, _ in times)
    decode_s = statistics.median(t for _, t in times)
    # each repeat's ms per decoded token, with its median, range and spread (bench_cost.figure): a single decode
    # timing of the same model read 128 and 12 tokens/s on two runs (issue 61), so the spread is printed beside it
    decode_ms = figure([t * 1000 / grid.new_tokens for _, t in times])
    stats = analyze(arch, seq_len=max_len, cache_dtype_bytes=DTYPE_BYTES[grid.dtype])
    analytic = batch * stats.cache_bytes_per_sequence
    allocated = cache.nbytes()
    per_sequence = grid.new_tokens / decode_s
    row = {
        "batch": batch,
        "context": context,
        "new_tokens": grid.new_tokens,
        "cache_len": max_len,
        "prefill_tokens_per_s": batch * context / prefill_s,
        "time_to_first_token_s": prefill_s,
        "decode_tokens_per_s": per_sequence,
        "decode_tokens_per_s_total": per_sequence * batch,
        "decode_s_per_token": decode_s / grid.new_tokens,
        "decode_ms_per_token": decode_ms,
        "cache_bytes": allocated,
        "cache_bytes_analytic": analytic,
        "cache_bytes_ratio": allocated / analytic if analytic else None,
        "beyond_max_seq_len": max_len > arch.max_seq_len,
        "decode_path": EAGER if decode is None else decode.path,
    }
    if device_bytes is not None:
        row["cache_bytes_device"] = device_bytes
    del cache
    return row


def bench_arch(model, grid: BenchGrid, device: torch.device, progress=None) -> list[dict[str, Any]]:
    rows = []
    decode = compile_decode_step(model) if grid.compile else None
    for batch in grid.batch_sizes:
        for context in grid.context_lengths:
            if progress is not None:
                progress(f"{model.arch.compact}: batch {batch}, context {context}")
            rows.append(measure(model, batch, context, grid, device, decode))
    return rows


def describe_arch(arch: ArchConfig, widths: str | None) -> dict[str, Any]:
    stats = analyze(arch)
    return {"pattern": arch.pattern, "compact": arch.compact, "widths": widths, "params": stats.params,
            "non_embedding_params": stats.non_embedding_params, "counts": stats.counts}


def llama_baseline(arch: ArchConfig) -> ArchConfig:
    """The Llama pattern at ``arch``'s widths whose non-embedding parameters are closest to ``arch``'s own."""
    from scaling.matching import matched_baselines

    return matched_baselines(arch, ("llama",), reference=arch)["llama"]


def check_bench_memory(arch: ArchConfig, grid: BenchGrid, device: torch.device, baseline: bool = True) -> None:
    """Refuse a grid whose largest point (the largest batch at the longest context) cannot fit in ``device``'s free
    memory, in one line naming the size, before a model or a cache is allocated (issue 69: ``--context-lengths
    10000000`` started and died in a 48-line out-of-memory traceback). The count is a floor, from the analytic
    accounting ``composer info`` prints: the weights, the inference cache of ``context + new_tokens`` tokens
    (:func:`composer.accounting.analyze`) and the prompt's hidden states going into and out of a layer, at the
    grid's dtype; the matched Llama pattern's too where it is measured (after ``arch``'s model is freed)."""
    free = available_memory_bytes(device)
    if free is None:
        return
    batch, context = max(grid.batch_sizes), max(grid.context_lengths)
    dtype_bytes = DTYPE_BYTES[grid.dtype]
    for model in [arch, *([llama_baseline(arch)] if baseline else [])]:
        stats = analyze(model, seq_len=context + grid.new_tokens, cache_dtype_bytes=dtype_bytes)
        weights = stats.params * dtype_bytes
        cache = batch * stats.cache_bytes_per_sequence
        hidden = 2 * batch * context * model.d_model * dtype_bytes
        if weights + cache + hidden > free:
            on = "the CPU" if device.type == "cpu" else str(device)
            raise ConfigError(
                f"batch {batch} at context {context:,} of {model.compact} needs at least "
                f"{format_bytes(weights + cache + hidden)} (inference cache {format_bytes(cache)}, weights "
                f"{format_bytes(weights)}, the prompt's hidden states {format_bytes(hidden)}) but {on} has "
                f"{format_bytes(free)} free: shorten --context-lengths or lower --batch-sizes")


def run_bench(
    arch: ArchConfig,
    grid: BenchGrid,
    device: torch.device,
    *,
    widths: str | None = None,
    model=None,
    baseline: bool = True,
    progress=None,
) -> dict[str, Any]:
    """The whole benchmark (module doc) as one JSON-ready dict; ``model``: a loaded model of ``arch``."""
    torch.manual_seed(grid.seed)
    if model is None:
        model = build_bench_model(arch, device, grid.dtype)
    else:
        model = model.to(device=device, dtype=torch_dtype(grid.dtype)).eval()
    result: dict[str, Any] = {
        "device": str(device),
        "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "dtype": grid.dtype,
        "new_tokens": grid.new_tokens,
        "repeats": grid.repeats,
        "compile": grid.compile,
        "batch_sizes": list(grid.batch_sizes),
        "context_lengths": list(grid.context_lengths),
        **describe_arch(arch, widths),
        "max_seq_len": arch.max_seq_len,
        "results": bench_arch(model, grid, device, progress),
    }
    del model
    if baseline:
        llama = llama_baseline(arch)
        llama_info = describe_arch(llama, widths)
        if llama.pattern == arch.pattern and llama.options == arch.options:
            llama_rows = result["results"]  # the architecture is its own Llama baseline
            llama_info["same_as_pattern"] = True
        else:
            torch.manual_seed(grid.seed)
            llama_rows = bench_arch(build_bench_model(llama, device, grid.dtype), grid, device, progress)
        result["llama"] = {**llama_info, "results": llama_rows}
        result["vs_llama"] = [
            {
                "batch": ours["batch"],
                "context": ours["context"],
                "decode_tokens_per_s_ratio": ours["decode_tokens_per_s"] / theirs["decode_tokens_per_s"],
                "prefill_tokens_per_s_ratio": ours["prefill_tokens_per_s"] / theirs["prefill_tokens_per_s"],
                "cache_bytes_ratio": ours["cache_bytes"] / theirs["cache_bytes"] if theirs["cache_bytes"] else None,
            }
            for ours, theirs in zip(result["results"], llama_rows, strict=True)
        ]
    return result


def plot_decode_throughput(result: dict[str, Any], path: Path) -> Path:
    """Decode tokens/s per sequence against context length: one line per pattern and batch size."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    series = [(result["compact"], result["results"], "-", "o")]
    if "llama" in result and not result["llama"].get("same_as_pattern"):
        series.append((f"Llama {result['llama']['compact']}", result["llama"]["results"], "--", "s"))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for index, (label, rows, style, marker) in enumerate(series):
        for shade, batch in enumerate(result["batch_sizes"]):
            points = sorted((r["context"], r["decode_tokens_per_s"]) for r in rows if r["batch"] == batch)
            ax.plot([c for c, _ in points], [v for _, v in points], linestyle=style, marker=marker,
                    color=colors[(index * len(result["batch_sizes"]) + shade) % len(colors)],
                    label=f"{label}, batch {batch}")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("context length (tokens)")
    ax.set_ylabel("decode tokens/s per sequence")
    widths = f" at {result['widths']} widths" if result.get("widths") else ""
    ax.set_title(f"decode throughput{widths} ({result['device_name']}, {result['dtype']})", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


__all__ = ["BenchGrid", "bench_arch", "llama_baseline", "measure", "plot_decode_throughput",
           "run_bench"]
