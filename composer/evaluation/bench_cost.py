"""What a model costs on the machine it is measured on: training and prefill throughput, decode latency, memory.

Why: a search ranks by loss per parameter, which favours deep, thin stacks whose per-layer overhead makes them
slow to train and to serve (issue 58: the constrained ``AMSD`` answer decoded at 0.24x Nemotron-H's tokens/s on
the CPU). This module measures, on one architecture with random weights (speed does not depend on them):

* ``train_tokens_per_s``: forward and backward of the causal-LM loss on random tokens, ``batch x seq_len`` (no
  optimizer step: its cost is per parameter, not per layer), in the grid's precision (bf16 autocast with fp32
  weights where the search trains in bf16, and on CUDA); one warmup step, then the median of the repeats.
  On the CPU the batch is cut to at most ``CostGrid.max_train_tokens`` tokens a step (throughput per token is
  nearly flat in the batch there: 2,642 and 2,334 tokens/s for ``AAMMMM`` at demo-4m at batch 4 and 16, one
  thread; and a full demo-4m batch takes 1-2 s a step), and the record says which batch ran (``batch``,
  ``target_batch``); on CUDA the target's batch, halved only where it does not fit;
* ``prefill_tokens_per_s``: one prompt of ``seq_len`` tokens (the context the target trains at) through the
  inference cache, batch 1;
* ``decode_ms_per_token[batch][context]``: one decode step (the token at position ``context``, its LM head and
  greedy pick) at batch 1 and at a large batch, after a prompt of ``seq_len`` tokens and of ``long_factor``
  times it (capped by the model's ``max_seq_len``). **Milliseconds per decode step**: each sequence of the batch
  gets one token per step, so this is the latency every sequence sees per token; the batch's throughput is
  ``batch * 1000 / ms``. The cache is placed at ``context`` without running the prompt (its contents stay zero):
  a step's work depends on how many positions it reads, not on what they hold, and a prompt of 64 x 1,024 tokens
  would take longer than the whole measurement. The step is replayed at that position, so every repeat times
  the same work;
* ``peak_memory_bytes``: on CUDA ``torch.cuda.max_memory_allocated`` over the steps; on the CPU, where torch keeps
  no allocator statistics, the bytes of the model's tensors (and the decode cache) plus the highest running sum
  of the allocations and frees the torch profiler records during one step (``profile_memory``), named in
  ``method``.

The decode step runs the way it is served: on CUDA the static step (``ComposerModel.decode_step``) captured once
as a CUDA graph and replayed (per-kernel launch overhead dominates a small model's decode step, state-spaces/mamba
issue 90), falling back to eager where capture fails (the record's ``decode_path`` says which and why). On the CPU
eagerly through :class:`~composer.inference.InferenceCache` in the grid's precision (fp32 by default, bf16 weights
and cache where the search trains in bf16); with ``CostGrid.compile_decode``
the step compiled by Inductor (``composer.inference.compile_decode_step``), the fastest path the project has there
(2.7x eager for the 34-layer answer at batch 1, demo-4m) but 20-50 s of compiling per batch size and context.

Every figure is timed by the project's one timing harness, :mod:`composer.costmodel.timing`, the one the cost
model's fit and validation use too: after one untimed warm-up call (``WARMUP``, stated in the record), repeats
with the collector off, on the clock the record names (``clock``: this process's CPU time on a CPU at one thread,
so that a cost a search worker measures while the other trains is still this model's; else the wall clock). Each
figure is one statistic, the ``median`` over its repeats, and carries the repeats (``values``), ``min``, ``max``
and ``spread`` (``(max - min) / median``); the record's ``noisy`` lists the figures whose spread is over
``NOISY_SPREAD``. The search (its cost limits and the finalists' cost table) and ``benchmarks/finalist_costs.py``
measure through this module.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch

from composer.accounting import DTYPE_BYTES, analyze
from composer.config import ArchConfig
from composer.costmodel.processor import detected_processor
from composer.costmodel.timing import (
    CLOCK_NAMES,
    NOISY_SPREAD,
    WARMUP,
    clock_for,
    figure,
    seconds_per_call,
    time_calls,
)
from composer.inference import COMPILED_CPU
from composer.precision import torch_dtype

MEMORY_EVENT = "[memory]"  # the torch profiler's name for an allocation (positive bytes) or a free (negative)
CPU_MEMORY_METHOD = ("cpu: bytes of the model's parameters and buffers (and the decode cache) plus the highest "
                     "running sum of the allocations and frees the torch profiler recorded in one step "
                     "(profile_memory); no optimizer state")
CUDA_MEMORY_METHOD = "cuda: torch.cuda.max_memory_allocated over the steps; no optimizer state"


@dataclass(frozen=True)
class CostGrid:
    """What is measured, and how often. ``train_batch`` x ``seq_len``: the target's training shape; ``seq_len`` is
    also the prompt of the prefill and the first decode context. The repeat counts are small on purpose: a search
    measures every finalist and known layout after its last rung, a few seconds each on a CPU at demo-4m."""

    train_batch: int
    seq_len: int
    long_factor: int = 8  # the second decode context: seq_len times this, capped by the model's max_seq_len
    large_batch: int = 64  # the large decode batch, cut to what fits in memory
    train_repeats: int = 3
    prefill_repeats: int = 3
    decode_repeats: int = 5
    min_repeat_seconds: float = 0.05  # a timed repeat makes as many calls as fill this (repeat_seconds): at 0.01
    # batch-1 decode repeats of a demo-4m model (~5 ms a step) spread 15-42% on idle cores
    max_train_tokens: int | None = 1_024  # on the CPU, tokens per training step at most (the batch is cut)
    # CPU threads (None: the process's). One: the cost model's microbenchmarks run on one, and on a machine whose
    # other cores are busy 2 threads wait on each other (a smoke search's 2 threads on 2 cores, one busy: repeats
    # spread 30-1,257% around their median)
    threads: int | None = 1
    seed: int = 0
    # on the CPU, decode through the compiled static step (composer.inference.compile_decode_step), the fastest
    # path there (2.7x eager for the 34-layer answer at batch 1): off by default, as each batch size and cache
    # length compiles for 20-50 s at demo-4m, more than a search's whole measurement
    compile_decode: bool = False
    # the precision the model trains and serves in: "bf16" (training under bf16 autocast with fp32 weights, decode
    # with bf16 weights and cache), "fp32", or None for the device's default (bf16 on CUDA, fp32 on the CPU). A
    # search passes its own (SearchConfig.resolved_precision): it trains in bf16 on a CPU that computes it natively
    precision: str | None = None
    # decode after seq_len tokens too, not only at the decode point (the longest context): the cost limits, which
    # read the decode point alone, leave it out
    short_decode: bool = True

    def contexts(self, max_seq_len: int) -> tuple[int, ...]:
        """The decode contexts: ``seq_len`` and ``long_factor`` times it, each leaving room for the decoded token
        within ``max_seq_len``; only the longer (the decode point) without ``short_decode``."""
        short = min(self.seq_len, max_seq_len - 1)
        long = min(self.seq_len * self.long_factor, max_seq_len - 1)
        if long <= short:
            return (short,)
        return (short, long) if self.short_decode else (long,)

    def decode_point(self, max_seq_len: int) -> int:
        """The one decode context every cost figure of a search is read at (its cost limits, the finalists' table
        and standing, a modeled figure): the longest this grid measures, ``seq_len * long_factor`` within
        ``max_seq_len``. One point, so that a limit, a ratio and a verdict on decode speak of the same step."""
        return self.contexts(max_seq_len)[-1]

    def dtype(self, device: torch.device) -> str:
        """``bf16`` or ``fp32``: :attr:`precision`, else the device's default."""
        return self.precision or ("bf16" if device.type == "cuda" else "fp32")

    def cpu_train_batch(self) -> int:
        if self.max_train_tokens is None:
            return self.train_batch
        return max(1, min(self.train_batch, self.max_train_tokens // self.seq_len))


# -- figures ------------------------------------------------------------------------------------------------------


def noisy_figures(record: dict[str, Any]) -> list[str]:
    """``"what: spread 23% over 3 repeats"`` for each figure of ``record`` whose spread is over ``NOISY_SPREAD``."""
    named = [("training tokens/s", record["train_tokens_per_s"]),
             ("prefill tokens/s", record["prefill_tokens_per_s"])]
    named += [(f"decode ms at batch {batch} after {context} tokens", value)
              for batch, by_context in record["decode_ms_per_token"].items() for context, value in by_context.items()]
    return [f"{what}: spread {value['spread']:.0%} over {value['repeats']} repeats"
            for what, value in named if value["noisy"]]


# -- the device ---------------------------------------------------------------------------------------------------


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def device_name(device: torch.device) -> str:
    """The GPU's name, or the CPU's model name, family and model from /proc/cpuinfo (else the platform's
    processor): the processor actually measured on, never ``COMPOSER_CPU_MODEL``'s stand-in."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return detected_processor()


def measuring_threads(grid: CostGrid) -> int:
    """The CPU threads a measurement runs on: ``grid.threads``, else the process's."""
    return grid.threads or torch.get_num_threads()


@contextlib.contextmanager
def torch_threads(threads: int) -> Iterator[None]:
    """torch's intra-op threads set to ``threads`` for a while, then back to what they were."""
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def machine(device: torch.device, grid: CostGrid) -> dict[str, Any]:
    """The machine a measurement with ``grid`` is valid for: a record measured elsewhere, or on other threads, is
    measured again (search resume)."""
    return {"device": device.type, "device_name": device_name(device), "threads": measuring_threads(grid),
            "torch": torch.__version__, "clock": CLOCK_NAMES[measuring_clock(grid, device)]}


def free_memory_bytes(device: torch.device) -> int | None:
    """Memory free for a decode cache: the GPU's free bytes, or the CPU's available physical memory."""
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[0]
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, AttributeError):
        return None


def largest_batch(arch: ArchConfig, wanted: int, max_len: int, dtype: str, free: int | None) -> int:
    """The largest batch up to ``wanted`` whose decode cache of ``max_len`` tokens takes at most a quarter of
    ``free`` bytes (the rest for weights, activations and everything else running), halving from ``wanted``."""
    per_sequence = analyze(arch, seq_len=max_len, cache_dtype_bytes=DTYPE_BYTES[dtype]).cache_bytes_per_sequence
    batch = wanted
    while free is not None and batch > 1 and batch * per_sequence > free // 4:
        batch //= 2
    return batch


# -- memory -------------------------------------------------------------------------------------------------------


@contextlib.contextmanager
def quiet_stderr() -> Iterator[None]:
    """Silence file descriptor 2 for a moment: the profiler's C++ side prints a line when it starts and stops,
    whatever its log level, which would land in the middle of a search's output."""
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def cpu_allocation_peak(step: Callable[[], Any]) -> int | None:
    """The highest running sum of the bytes allocated minus freed on the CPU while ``step`` runs, from the torch
    profiler's memory events in time order; None where this torch does not expose them."""
    from torch.profiler import ProfilerActivity, profile

    profiler = profile(activities=[ProfilerActivity.CPU], profile_memory=True)
    with quiet_stderr():
        profiler.__enter__()
    try:
        step()
    finally:
        with quiet_stderr():
            profiler.__exit__(None, None, None)
    results = getattr(profiler.profiler, "kineto_results", None)
    if results is None:
        return None
    events = sorted((event for event in results.events() if event.name() == MEMORY_EVENT
                     and event.device_type() == torch.autograd.DeviceType.CPU), key=lambda event: event.start_ns())
    running = peak = 0
    for event in events:
        running += event.nbytes()
        peak = max(peak, running)
    return peak


def tensor_bytes(model: torch.nn.Module) -> int:
    """Bytes of the model's parameters and buffers."""
    return sum(t.numel() * t.element_size() for t in (*model.parameters(), *model.buffers()))


# -- timing -------------------------------------------------------------------------------------------------------


def measuring_clock(grid: CostGrid, device: torch.device) -> str:
    """The clock this measurement reads (``composer.costmodel.timing.clock_for``): this process's CPU time on a
    CPU at one thread, else the wall clock."""
    return clock_for(device.type, measuring_threads(grid))


def repeat_seconds(run: Callable[[], Any], device: torch.device, grid: CostGrid, repeats: int,
                   first: float | None = None) -> tuple[list[float], int]:
    """Seconds per call of ``run`` in each of ``repeats`` timed repeats, by the one timing harness
    (``composer.costmodel.timing.time_calls``: after a warm call, ``first`` its time where the caller made it; a
    repeat makes as many calls as fill ``grid.min_repeat_seconds``). Returns the seconds and the calls per
    repeat."""
    timed = time_calls(run, repeats, min_seconds=grid.min_repeat_seconds, clock=measuring_clock(grid, device),
                       sync=lambda: sync(device), first=first)
    return timed.seconds, timed.calls


# -- training and prefill -----------------------------------------------------------------------------------------


def measure_training(model, batch: int, grid: CostGrid, device: torch.device) -> tuple[dict[str, Any], int | None]:
    """Training tokens/s of forward and backward at ``batch x grid.seq_len``, and the peak memory of a step.
    In bf16 (``grid.dtype``: on CUDA by default, on the CPU where the search trains in it) under bf16 autocast with
    fp32 weights, as the project trains (Lightning's bf16-mixed)."""
    generator = torch.Generator().manual_seed(grid.seed)
    tokens = torch.randint(0, model.arch.vocab_size, (batch, grid.seq_len + 1), generator=generator).to(device)
    inputs, targets = tokens[:, :-1], tokens[:, 1:]
    autocast = (torch.autocast(device.type, dtype=torch.bfloat16) if grid.dtype(device) == "bf16"
                else contextlib.nullcontext())
    model.train()

    def step() -> None:
        model.zero_grad(set_to_none=True)
        with autocast:
            loss = model(inputs, targets).loss
        loss.backward()

    if device.type == "cuda":
        first = seconds_per_call(step, sync=lambda: sync(device))  # a warm call, timed to size the repeats
        torch.cuda.reset_peak_memory_stats(device)
        peak = None
    else:
        model.zero_grad(set_to_none=True)  # the profiled warmup step sees every gradient allocated
        started = time.perf_counter()
        growth = cpu_allocation_peak(step)
        first = time.perf_counter() - started
        peak = None if growth is None else tensor_bytes(model) + growth
    times, calls = repeat_seconds(step, device, grid, grid.train_repeats, first)
    if device.type == "cuda":
        peak = torch.cuda.max_memory_allocated(device)
    model.zero_grad(set_to_none=True)
    model.eval()
    return figure([batch * grid.seq_len / t for t in times], calls=calls, batch=batch, seq_len=grid.seq_len), peak


@torch.no_grad()
def measure_prefill(model, grid: CostGrid, device: torch.device) -> dict[str, Any]:
    """Prefill tokens/s of one ``grid.seq_len``-token prompt through the inference cache, batch 1, with the pick
    of the first token (``composer bench-inference``'s prefill)."""
    context = min(grid.seq_len, model.arch.max_seq_len)
    generator = torch.Generator().manual_seed(grid.seed + 1)
    prompt = torch.randint(0, model.arch.vocab_size, (1, context), generator=generator).to(device)
    cache = model.init_cache(1, context, device=device)

    def run() -> None:
        cache.reset()
        model.next_token_logits(prompt, cache).argmax(-1)

    times, calls = repeat_seconds(run, device, grid, grid.prefill_repeats)
    return figure([context / t for t in times], calls=calls, context=context)


# -- decode -------------------------------------------------------------------------------------------------------


def eager_step(model, cache, ids: torch.Tensor, position: int) -> Callable[[], torch.Tensor]:
    """One decode step at ``position``, replayable: the cache is put back at ``position`` before each."""

    def step() -> torch.Tensor:
        cache.pos = position
        return model.next_token_logits(ids, cache).argmax(-1)

    return step


def cuda_graph_step(model, cache, ids: torch.Tensor, position: int) -> Callable[[], torch.Tensor]:
    """The static decoding step (:meth:`ComposerModel.decode_step <composer.model.ComposerModel.decode_step>`:
    fixed shapes, the position a tensor) captured as a CUDA graph after warmup on a side stream, as
    ``torch.cuda.graphs`` asks; each call replays it. The graph a server would replay at every position, captured
    without a compiler: a cold ``torch.compile`` of a deep model's step (``composer.inference.compile_decode_step``)
    would cost more than a GPU lease's whole measurement. ``ids`` and the position are its static inputs."""
    pos = torch.full((), position, dtype=torch.long, device=ids.device)

    def step() -> torch.Tensor:
        return model.decode_step(ids, cache, pos).argmax(-1)

    side = torch.cuda.Stream(device=ids.device)
    side.wait_stream(torch.cuda.current_stream(ids.device))
    with torch.cuda.stream(side):
        for _ in range(3):
            step()
    torch.cuda.current_stream(ids.device).wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = step()

    def replay() -> torch.Tensor:
        graph.replay()
        return out

    return replay


def compiled_cpu_step(model, cache, ids: torch.Tensor, position: int, decoder) -> Callable[[], torch.Tensor]:
    """The decode step at ``position`` through ``decoder`` (``composer.inference.compile_decode_step``: Inductor,
    one graph for every position), compiled by a first call before the clock starts."""

    def step() -> torch.Tensor:
        cache.pos = position
        return decoder(ids, cache).argmax(-1)

    step()
    return step


class DecodeKind(enum.Enum):
    """What runs a decode step; its value is how the record names it (``decode_path``, with the precision)."""

    CUDA_GRAPH = "CUDA graph of the static decode step"
    COMPILED_CPU = COMPILED_CPU.value  # the step compiled by Inductor (composer.inference.compile_decode_step)
    EAGER = "eager InferenceCache"


@dataclass
class DecodePath:
    """How decode steps run on this device: ``kind`` in ``dtype``; where the CUDA graph or the compiled step
    could not be made, the eager step, with ``failure`` saying what failed and why. ``name`` (the record's
    ``decode_path``) is derived from these fields, so it always says what ran: e.g. ``"eager InferenceCache, bf16
    (CUDA graph capture failed: RuntimeError: ...)"``. Falling back is for good: a failed capture or compile is not
    tried again at the next batch or context."""

    kind: DecodeKind
    dtype: str
    failure: str | None = None
    decoder: Any = None  # the compiled step (composer.inference.DecodeStep) on the CPU with compile

    @property
    def name(self) -> str:
        label = f"{self.kind.value}, {self.dtype}"
        return label if self.failure is None else f"{label} ({self.failure})"

    @classmethod
    def for_device(cls, device: torch.device, dtype: str, compile: bool = False, model=None) -> DecodePath:
        if device.type == "cuda":
            return cls(DecodeKind.CUDA_GRAPH, dtype)
        if compile and model is not None:
            from composer.inference import compile_decode_step

            return cls(DecodeKind.COMPILED_CPU, dtype, decoder=compile_decode_step(model))
        return cls(DecodeKind.EAGER, dtype)

    def build(self, model, cache, ids: torch.Tensor, position: int) -> Callable[[], torch.Tensor]:
        """A replayable decode step at ``position`` by this path, falling back to eager (and saying so) where its
        CUDA graph cannot be captured or its compiled step fell back on its first call."""
        if self.kind is DecodeKind.COMPILED_CPU:
            step = compiled_cpu_step(model, cache, ids, position, self.decoder)
            if self.decoder.compiled:
                return step
            self._fall_back(f"compile failed: {self.decoder.failure}")
        elif self.kind is DecodeKind.CUDA_GRAPH:
            try:
                return cuda_graph_step(model, cache, ids, position)
            except Exception as err:  # noqa: BLE001 (a step that cannot be captured is served eagerly, and said so)
                reason = f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"[:200]
                self._fall_back(f"CUDA graph capture failed: {reason}")
        return eager_step(model, cache, ids, position)

    def _fall_back(self, failure: str) -> None:
        """Eager from now on, ``failure`` saying why (the compiled step's own eager fallback is not used: the eager
        path every device measures is the one the label names)."""
        self.kind, self.failure, self.decoder = DecodeKind.EAGER, failure, None


@torch.no_grad()
def measure_decode_step(model, batch: int, context: int, grid: CostGrid, device: torch.device, path: DecodePath,
                        dtype: str, profile: bool) -> tuple[dict[str, Any], int | None]:
    """Milliseconds per decode step (module doc) of ``batch`` sequences at position ``context``, and, with
    ``profile``, the peak memory of a step with its cache."""
    cuda = device.type == "cuda"
    if cuda:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
    cache = model.init_cache(batch, context + 1, device=device, dtype=torch_dtype(dtype))
    ids = torch.randint(0, model.arch.vocab_size, (batch, 1),
                        generator=torch.Generator().manual_seed(grid.seed + batch)).to(device)
    step = path.build(model, cache, ids, context)
    peak = first = None
    if profile and not cuda:
        started = time.perf_counter()
        growth = cpu_allocation_peak(step)  # the warmup step
        first = time.perf_counter() - started
        peak = None if growth is None else tensor_bytes(model) + cache.nbytes() + growth
    times, calls = repeat_seconds(step, device, grid, grid.decode_repeats, first)
    if profile and cuda:
        peak = torch.cuda.max_memory_allocated(device)
    del step, cache
    return figure([t * 1e3 for t in times], calls=calls), peak


def measure_decode_grid(model, grid: CostGrid, contexts: tuple[int, ...], large: int, device: torch.device,
                        path: DecodePath, dtype: str) -> tuple[dict[str, dict[str, Any]], int | None, int]:
    """Decode ms per step at batch 1 and ``large`` at every context, the peak memory of the largest (the large
    batch at the longest context), and the large batch measured: halved until it fits where the GPU's allocator
    runs out after all."""

    def at(batch: int) -> tuple[dict[str, Any], int | None]:
        measured = [measure_decode_step(model, batch, context, grid, device, path, dtype,
                                        profile=context == contexts[-1]) for context in contexts]
        return {str(context): value for context, (value, _) in zip(contexts, measured, strict=True)}, measured[-1][1]

    decode = {}
    decode["1"], peak = at(1)
    while large > 1:
        try:
            decode[str(large)], peak = at(large)
            break
        except torch.cuda.OutOfMemoryError:
            large //= 2
            torch.cuda.empty_cache()
    return decode, peak, large


# -- the whole measurement ----------------------------------------------------------------------------------------


def measure_cost(arch: ArchConfig, grid: CostGrid, device: str | torch.device | None = None) -> dict[str, Any]:
    """The cost of ``arch`` on this machine (module doc) as one JSON-ready record: ``device``, ``device_name``,
    ``threads``, ``dtype``, ``decode_path``, ``train_tokens_per_s``, ``prefill_tokens_per_s``,
    ``decode_ms_per_token`` (``{batch: {context: figure}}``, both keys strings, ms per decode step),
    ``peak_memory_bytes`` (``train``, ``decode``, ``method``), ``noisy`` and ``seconds`` (the measurement's own
    time)."""
    device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    with torch_threads(measuring_threads(grid)):
        return _measure_cost(arch, grid, device)


@contextlib.contextmanager
def seeded(seed: int, device: torch.device) -> Iterator[None]:
    """The random generators a model is initialised from (the CPU's, and ``device``'s on CUDA) seeded with
    ``seed`` inside, and restored after: a measurement's weights are reproducible without reseeding the process
    (issue 69: a search worker's own random state was reset by each cost it measured)."""
    cuda = device.type == "cuda"
    index = (device.index if device.index is not None else torch.cuda.current_device()) if cuda else None
    with torch.random.fork_rng(devices=[index] if cuda else []):
        torch.default_generator.manual_seed(seed)
        if cuda:
            torch.cuda.default_generators[index].manual_seed(seed)
        yield


def _measure_cost(arch: ArchConfig, grid: CostGrid, device: torch.device) -> dict[str, Any]:
    from composer.model import build_model

    started = time.perf_counter()
    cuda = device.type == "cuda"
    dtype = grid.dtype(device)
    contexts = grid.contexts(arch.max_seq_len)
    with seeded(grid.seed, device):
        model = build_model(arch, device=device)
    batch = grid.train_batch if cuda else grid.cpu_train_batch()
    while True:  # halved where the GPU's allocator runs out
        try:
            train, train_peak = measure_training(model, batch, grid, device)
            break
        except torch.cuda.OutOfMemoryError:
            if batch == 1:
                raise
            batch //= 2
            model.zero_grad(set_to_none=True)
            torch.cuda.empty_cache()
    if train["batch"] < grid.train_batch:  # the CPU's cut, or the GPU's memory
        train["target_batch"] = grid.train_batch
    model = model.to(torch_dtype(dtype)).eval()
    prefill = measure_prefill(model, grid, device)
    path = DecodePath.for_device(device, dtype, compile=grid.compile_decode, model=model)
    large = largest_batch(arch, grid.large_batch, contexts[-1] + 1, dtype, free_memory_bytes(device))
    decode, decode_peak, large = measure_decode_grid(model, grid, contexts, large, device, path, dtype)
    record = {**machine(device, grid), "dtype": dtype,
              "train_dtype": "bf16 autocast, fp32 weights" if dtype == "bf16" else dtype, "warmup": WARMUP,
              "decode_path": path.name, "train_tokens_per_s": train, "prefill_tokens_per_s": prefill,
              "decode_ms_per_token": decode,
              "decode_ms_per": "decode step: each sequence of the batch gets one token per step",
              "peak_memory_bytes": {"train": train_peak, "decode": decode_peak,
                                    "decode_at": {"batch": large, "context": contexts[-1]},
                                    "method": CUDA_MEMORY_METHOD if cuda else CPU_MEMORY_METHOD},
              "grid": dataclasses.asdict(grid)}
    if large < grid.large_batch:
        record["large_batch_note"] = (f"batch {grid.large_batch} at {contexts[-1]:,} tokens does not fit here (its "
                                      f"cache over a quarter of the free memory, or the allocator out of memory): "
                                      f"measured at {large}")
    record["noisy"], record["noisy_spread"] = noisy_figures(record), NOISY_SPREAD
    del model
    if cuda:
        torch.cuda.empty_cache()
    record["seconds"] = time.perf_counter() - started
    return record


__all__ = [
    "CPU_MEMORY_METHOD",
    "CUDA_MEMORY_METHOD",
    "NOISY_SPREAD",
    "WARMUP",
    "CostGrid",
    "DecodeKind",
    "DecodePath",
    "cpu_allocation_peak",
    "cuda_graph_step",
    "figure",
    "largest_batch",
    "machine",
    "measure_cost",
    "measure_decode_step",
    "measure_prefill",
    "measure_training",
    "noisy_figures",
]
