"""A batch-1 decode step's time as the median over fresh processes, each pinned to one core in turn.

Why: on 2 idle AMD EPYC cores (2026-12-08) two ``validate`` runs minutes apart timed the same models' decode step
a median 13% apart and up to 2x (``search-1m:d160`` ``AMWMAM``: 2.35 and 1.18 ms), while the two fits they
checked predicted within 4% of each other. Repeats inside one process agree; processes do not (heap layout,
which core, what the other core does). A figure from one process cannot check a 15% goal; the median over
several can (across 6 processes on an idle Intel Xeon the spread was 4-10%, ``benchmarks/decode_noise.py``).

Each process builds the model as ``validate`` does (seed 0) and times ``new_tokens`` decode steps after the
case's context (:func:`measure_serving`, what ``validate`` times in its own process too) on the calibration's clock;
its figure is the median of its steps. Run as a module it is that process:
``python -m composer.costmodel.calibration.decode_processes PRESET PATTERN CONTEXT NEW_TOKENS CLOCK``.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from collections.abc import Callable, Sequence

import torch

from composer.costmodel.calibration.timing import CLOCK, wait_for_quiet
from composer.costmodel.timing import time_calls


@torch.no_grad()
def measure_serving(model, context: int, new_tokens: int) -> tuple[float, list[float]]:
    """A batch-1 prompt of ``context`` tokens (seconds) and ``new_tokens`` decoding steps after it (seconds each),
    as composer.evaluation.bench_inference times them: next_token_logits and a greedy pick."""
    cache = model.init_cache(1, context + new_tokens + 1)
    prompt = torch.randint(0, model.arch.vocab_size, (1, context), generator=torch.Generator().manual_seed(1))
    model.next_token_logits(prompt, cache)  # warm
    cache.reset()
    wait_for_quiet()
    token = []

    def prefill() -> None:
        token[:] = [model.next_token_logits(prompt, cache).argmax(-1)]

    def step() -> None:  # each call the next position: the steps of one rollout, timed a call a repeat
        token[0] = model.next_token_logits(token[0][:, None], cache).argmax(-1)

    clock = CLOCK["name"]
    return (time_calls(prefill, 1, warmup=0, clock=clock).seconds[0],
            time_calls(step, new_tokens, warmup=0, clock=clock).seconds)


def decode_in_this_process(preset: str, pattern: str, context: int, new_tokens: int) -> dict:
    """This process's figure: the median of ``new_tokens`` decode steps, each step's seconds and the core."""
    from composer.costmodel.calibration.units import arch_for
    from composer.model import build_model

    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = build_model(arch_for(preset, pattern)).eval()
    _, steps = measure_serving(model, context, new_tokens)
    return {"median_s": statistics.median(steps), "steps_s": steps, "core": sorted(os.sched_getaffinity(0))}


def decode_in_fresh_process(preset: str, pattern: str, context: int, new_tokens: int, core: int,
                            clock: str = "cpu") -> dict:
    """:func:`decode_in_this_process` in a new Python process pinned to ``core``."""
    command = [sys.executable, "-m", __name__, preset, pattern, str(context), str(new_tokens), clock]
    done = subprocess.run(command, capture_output=True, text=True, check=True,
                          preexec_fn=lambda: os.sched_setaffinity(0, {core}))
    return json.loads(done.stdout.strip().splitlines()[-1])


def cores() -> list[int]:
    """The cores this process may run on, the processes' cores in turn."""
    return sorted(os.sched_getaffinity(0))


def interleaved(count: int, processes: int, measure: Callable[[int, int, int], dict]) -> list[list[dict]]:
    """Each of ``count`` cases' figures from ``processes`` rounds, ``measure(case, core, round)`` one fresh
    process's: interleaved (every case once a round, so a drifting machine moves every case alike) and each
    round pinned to the next core in turn. ``validate`` and ``benchmarks/decode_noise.py`` measure by it."""
    available = cores()
    figures: list[list[dict]] = [[] for _ in range(count)]
    for round_ in range(processes):
        core = available[round_ % len(available)]
        for case in range(count):
            figures[case].append(measure(case, core, round_))
    return figures


def main(argv: Sequence[str] | None = None) -> int:
    preset, pattern, context, new_tokens, clock = argv if argv is not None else sys.argv[1:]
    CLOCK["name"] = clock
    print(json.dumps(decode_in_this_process(preset, pattern, int(context), int(new_tokens))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
