"""The one timing harness: every figure the project times goes through :func:`time_calls` and is summarised by
:func:`figure`.

Why one: the search's cost limits and finalists' table (:mod:`composer.evaluation.bench_cost`, and the benchmarks
built on it) and the cost model's fit and validation (:mod:`composer.costmodel.calibration`) timed in two ways,
one on the wall clock with several calls a repeat and the collector on, the other on this process's CPU time, a
call at a time, with the collector off; a fit made one way was then checked against figures taken the other
(issue 68). Now both time alike:

* ``warmup`` untimed calls first (a compiled step's compiling calls come before, made by the caller);
* ``repeats`` timed repeats with the garbage collector off, each of as many calls as fill ``min_seconds``
  (sized from the last warm call: a step of a small model, 0.1-1 ms, timed alone is mostly the timer's noise),
  giving seconds per call, one value a repeat;
* on the clock :func:`clock_for` names: on a CPU at one thread this process's CPU time, which the other jobs of a
  shared machine do not inflate by making it wait for a core (on 2026-12-07, with 6-11 tasks runnable on these 2
  cores, two layers at demo-4m trained in a median 318 ms of wall time and 178 ms of CPU time, 170 at best), so
  a figure taken during another worker's training is still this model's; contention for memory bandwidth and
  caches still shows. Elsewhere (several threads, whose CPU times add up; a GPU, whose kernels the host does not
  run) the wall clock, the device synchronised before and after each repeat.

The statistic is the median of the repeats, with the spread beside it (:func:`figure`).
"""

from __future__ import annotations

import gc
import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

CLOCKS = {"cpu": time.process_time, "wall": time.perf_counter}
CLOCK_NAMES = {"cpu": "this process's CPU time (one thread)", "wall": "wall clock, device synchronised"}
NOISY_SPREAD = 0.10  # a figure whose repeats spread more than this around their median is flagged noisy
# the warm-up before every figure's timed repeats, as each record states it
WARMUP = ("one untimed call before the timed repeats (a compiled or CUDA-graph decode step: after the calls that "
          "compile or capture it)")


def clock_for(device_type: str, threads: int | None) -> str:
    """The clock a measurement on ``device_type`` with ``threads`` CPU threads reads (module docstring): ``cpu``
    on a CPU at one thread, else ``wall``."""
    return "cpu" if device_type == "cpu" and threads == 1 else "wall"


@dataclass(frozen=True)
class Repeats:
    """Seconds per call in each timed repeat, the calls a repeat made and the clock they were read on."""

    seconds: list[float]
    calls: int
    clock: str


def time_calls(run: Callable[[], Any], repeats: int, *, warmup: int = 1, min_seconds: float = 0.0,
               clock: str = "wall", sync: Callable[[], None] | None = None,
               first: float | None = None) -> Repeats:
    """``repeats`` timed repeats of ``run`` (module docstring). ``first``: the seconds of a warm call the caller
    already made (then no further warm-up is made here); ``sync``: waits for the device (CUDA) before and after
    each repeat."""
    if clock not in CLOCKS:
        raise ValueError(f"clock must be one of {', '.join(CLOCKS)}, got {clock!r}")
    sync = sync or (lambda: None)
    if first is None:
        for _ in range(warmup - 1):
            run()
        first = seconds_per_call(run, clock=clock, sync=sync) if warmup > 0 else 0.0
    calls = max(1, math.ceil(min_seconds / max(first, 1e-6))) if min_seconds > 0 else 1
    gc.collect()
    gc.disable()
    try:
        seconds = [seconds_per_call(run, calls, clock=clock, sync=sync) for _ in range(repeats)]
    finally:
        gc.enable()
    return Repeats(seconds, calls, clock)


def seconds_per_call(run: Callable[[], Any], calls: int = 1, *, clock: str = "wall",
                     sync: Callable[[], None] | None = None) -> float:
    """Seconds per call of ``calls`` calls of ``run`` on ``clock``, the device synchronised (``sync``) before and
    after: one timed repeat, and the one warm call a caller times to size the repeats after it."""
    sync = sync or (lambda: None)
    now = CLOCKS[clock]
    sync()
    started = now()
    for _ in range(calls):
        run()
    sync()
    return (now() - started) / calls


def figure(values: list[float], **extra: Any) -> dict[str, Any]:
    """The one statistic of a figure: the median of ``values`` (one per repeat, kept as ``values``), with its min,
    max, repeats, relative spread and whether that is over ``NOISY_SPREAD`` (``extra``: what else the figure is
    of, e.g. ``calls`` per repeat, ``batch``). The median, not the fastest repeat: the search, its cost limits and
    the benchmarks read one statistic, and the spread beside it says how far to trust it."""
    median = statistics.median(values)
    low, high = min(values), max(values)
    spread = (high - low) / median if median else 0.0
    return {"median": median, "min": low, "max": high, "repeats": len(values), "spread": spread,
            "noisy": spread > NOISY_SPREAD, "values": list(values), **extra}
