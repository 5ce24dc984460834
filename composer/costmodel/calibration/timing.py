"""How the calibration times a call: the clock it reads (``--clock``), the wait for a quiet machine on the wall
clock, and :func:`timed`, the project's one timing harness (:func:`composer.costmodel.timing.time_calls`) at a
call a repeat.

Every measurement here runs on one thread (``--threads``, default 1): the ``cpu`` constants are one thread's, and
on this 2-core machine a second job then keeps a core of its own. Timings read this process's CPU time by
default (``--clock``), as :mod:`composer.evaluation.bench_cost` does on a CPU at one thread, so the fit, its
validation and the search's measured costs are timed alike: the same warm-up, the collector off, the same clock.
A single layer's step (the fit's unit) is timed a call a repeat, each call on the next of its cold copies.
"""

from __future__ import annotations

import datetime
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from composer.costmodel.timing import time_calls

# This machine's 2 cores are shared with other jobs: a one-thread timing on the wall clock, taken while more jobs
# than cores are runnable, measures the scheduler (on 2026-12-07, with 6-11 runnable, two S and M layers at
# demo-4m trained in a median 318 ms of wall time, 200 ms at best, and 178 ms of this process's CPU time, 170 at
# best). So every timing reads the clock ``--clock`` names: ``cpu`` (the default), the CPU time of this process
# (one thread: the time its step ran, not the time it waited for a core; contention for memory bandwidth and
# caches still shows), or ``wall``. On the wall clock, each timing first waits, up to QUIET_TIMEOUT_S, until no
# more than QUIET_RUNNABLE tasks are runnable (this one and one other: a core each) on QUIET_POLLS polls in a row;
# what it waited and saw is kept (``QUIET_LOG``).
CLOCK = {"name": "cpu"}


QUIET_RUNNABLE = 2
QUIET_POLLS = 5
QUIET_TIMEOUT_S = 90.0
QUIET_LOG: list[dict[str, float]] = []
QUIET = {"enabled": CLOCK["name"] == "wall"}  # the wall clock only (the CLI sets it); off under --quick and --no-wait


def runnable_tasks() -> int:
    """Tasks runnable now, this one included (``/proc/loadavg``'s fourth field; 1 where there is none)."""
    try:
        return int(Path("/proc/loadavg").read_text().split()[3].split("/")[0])
    except (OSError, IndexError, ValueError):
        return 1


def wait_for_quiet() -> None:
    """Wait until the machine is quiet enough for a one-thread timing (above), at most ``QUIET_TIMEOUT_S``."""
    if not QUIET["enabled"]:
        return
    start = time.perf_counter()
    quiet = 0
    while quiet < QUIET_POLLS and time.perf_counter() - start < QUIET_TIMEOUT_S:
        quiet = quiet + 1 if runnable_tasks() <= QUIET_RUNNABLE else 0
        time.sleep(0.05)
    QUIET_LOG.append({"waited_s": time.perf_counter() - start, "quiet": quiet >= QUIET_POLLS})


def last_wait_quiet() -> bool | None:
    """Whether the last timing found the machine quiet (None: it did not wait)."""
    return QUIET_LOG[-1]["quiet"] if QUIET["enabled"] and QUIET_LOG else None


def quiet_summary() -> dict[str, Any]:
    """How the waits went: timings taken, how many found the machine quiet, seconds waited."""
    if CLOCK["name"] != "wall":
        return {"rule": f"none: timed on the {CLOCK['name']} clock, which other jobs do not inflate by waiting"}
    return {"rule": f"each timing waited (at most {QUIET_TIMEOUT_S:.0f} s) for <= {QUIET_RUNNABLE} runnable tasks on "
                    f"{QUIET_POLLS} polls in a row", "timings": len(QUIET_LOG),
            "quiet": sum(w["quiet"] for w in QUIET_LOG), "waited_s": sum(w["waited_s"] for w in QUIET_LOG)}


def timed(fn: Callable[[], Any], steps: int, warmup: int) -> list[float]:
    """Seconds of each of ``steps`` calls of ``fn`` after ``warmup`` untimed ones (the collector off), once the
    machine is quiet (:func:`wait_for_quiet`): the one harness, a call a repeat, on ``--clock``."""
    wait_for_quiet()
    return time_calls(fn, steps, warmup=warmup, clock=CLOCK["name"]).seconds


def machine_state() -> dict[str, Any]:
    """How busy the machine was (this 2-core machine is shared: the timings are only as steady as it is idle)."""
    return {"time_utc": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "load_average_1_5_15": list(os.getloadavg()), "cpus": os.cpu_count()}
