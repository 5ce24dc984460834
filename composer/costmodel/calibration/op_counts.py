"""The ops (every aten op dispatched) and kernels (leaf ops that do work) a unit runs, counted with
``torch.profiler`` at 1, 2 and 4 chunks of a scan and per further slice of a batch-slicing CPU kernel: the op
term of the cost model, which dominates a small model's decode.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable
from typing import Any

from composer.costmodel.calibration.record import log
from composer.costmodel.calibration.units import Unit, arch_for
from composer.costmodel.table import COUNT_CHUNKS, COUNT_PHASES


@contextlib.contextmanager
def quiet_fds():
    """Silence file descriptors 1 and 2 (the profiler's native library prints a line per start and stop)."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 1)
        os.dup2(null, 2)
        yield
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, null):
            os.close(fd)


# ops that do no work of their own (views, metadata, allocation): dispatched, so counted as ops, but no kernel
NO_KERNEL = {
    "aten::view", "aten::reshape", "aten::_reshape_alias", "aten::_unsafe_view", "aten::transpose", "aten::t",
    "aten::permute", "aten::expand", "aten::expand_as", "aten::slice", "aten::select", "aten::unsqueeze",
    "aten::squeeze", "aten::as_strided", "aten::detach", "aten::alias", "aten::unflatten", "aten::flatten",
    "aten::split", "aten::split_with_sizes", "aten::chunk", "aten::narrow", "aten::unbind", "aten::movedim",
    "aten::view_as", "aten::resolve_conj", "aten::resolve_neg", "aten::lift_fresh", "aten::empty",
    "aten::empty_like", "aten::empty_strided", "aten::result_type", "aten::size", "aten::stride",
    "aten::contiguous", "aten::is_nonzero", "aten::item", "aten::_local_scalar_dense", "aten::diagonal",
}


def count_ops(fn: Callable[[], Any]) -> dict[str, int]:
    """``ops``: aten ops ``fn`` dispatches (nested ones included: each is a dispatch eager PyTorch pays for);
    ``kernels``: the leaf ops among them that do work (views, metadata and allocations left out)."""
    from torch.profiler import ProfilerActivity, profile

    fn()  # warm: lazy initialisation is not the step's
    with quiet_fds(), profile(activities=[ProfilerActivity.CPU]) as prof:
        fn()
    aten = [e for e in prof.events() if e.name.startswith("aten::")]
    leaves = [e for e in aten if not any(c.name.startswith("aten::") for c in e.cpu_children)]
    return {"ops": len(aten), "kernels": sum(e.name not in NO_KERNEL for e in leaves)}


# Where each CPU kernel that runs the batch a slice at a time (``Primitive.cpu_batch_slices``'s names) keeps the
# bytes one slice may hold: counting sets it so that the kernel runs one sequence a slice (1 byte) or the whole
# batch in one (no limit), and so measures the ops one further slice adds.
SLICE_LIMITS = {"short_conv": ("primitives.short_conv", "_CPU_BLOCK_BYTES"),
                "ssd_scan": ("primitives.mamba2", "_CPU_SCAN_BLOCK_BYTES")}


@contextlib.contextmanager
def sliced(one_sequence_a_slice: tuple[str, ...] = ()):
    """Every batch-slicing kernel in one slice of the whole batch, except those named, which run one sequence a
    slice."""
    import importlib
    from unittest import mock

    with contextlib.ExitStack() as stack:
        for kernel, (module, attribute) in SLICE_LIMITS.items():
            limit = 1 if kernel in one_sequence_a_slice else 1 << 62
            stack.enter_context(mock.patch.object(importlib.import_module(module), attribute, limit))
        yield


def measure_counts(preset: str, keys: str | tuple[str, ...], train_precision: str = "fp32") -> dict[str, Any]:
    """Ops and kernels per key and phase at 1, 2 and 4 chunks of its scan (chunks of the config's ``chunk_size``
    tokens; decode after 64 tokens); training in ``train_precision``, as the fit times it (autocast adds casts).
    A key without a scan is counted once, at 64 tokens.

    The kernels of S and D on a CPU run the batch a slice at a time (the short convolution, the SSD scan), each
    slice running the kernel's ops again, so the counts follow the kernels: each phase is counted at batch 1
    (one slice of everything), and for each slicing kernel again at batch 2 with that kernel one sequence a slice
    (:func:`sliced`): the difference is what one further slice adds (``per_slice``). A count taken at batch 2
    alone (before 2026-12-07) held whatever slices batch 2 happened to run, for every batch."""
    arch = arch_for(preset, "AM").replace(max_seq_len=4096)
    counts: dict[str, Any] = {}
    for key in keys:
        unit = Unit(arch, key, copies=1, train_precision=train_precision)
        config = None if key == "head" else arch.with_pattern(key).primitive_configs()[key]
        chunk = getattr(config, "chunk_size", None)
        kernels = [] if config is None else list(type(unit.modules[0].primitive).cpu_batch_slices(config, 2, 64))
        log(f"  counting ops: {key}" + (f" at 1, 2 and 4 chunks of {chunk} tokens" if chunk else "")
            + (f", per slice of {', '.join(kernels)}" if kernels else ""))
        per_phase: dict[str, dict[str, Any]] = {}
        for phase in COUNT_PHASES:
            scans = chunk is not None and phase in ("train", "prefill")
            lengths = [chunk * n if scans else 64 for n in (COUNT_CHUNKS if scans else COUNT_CHUNKS[:1])]

            def at_chunks(batch: int, one_sequence_a_slice: tuple[str, ...] = ()) -> dict[str, list[int]]:
                with sliced(one_sequence_a_slice):
                    rows = [count_ops(unit.call(phase, batch, length)) for length in lengths]
                rows += [rows[-1]] * (len(COUNT_CHUNKS) - len(rows))
                return {name: [row[name] for row in rows] for name in ("ops", "kernels")}

            per_phase[phase] = at_chunks(1)
            if phase in ("train", "prefill") and kernels:
                per_slice = {}
                for kernel in kernels:
                    two = at_chunks(2, (kernel,))
                    per_slice[kernel] = {name: [b - a for a, b in zip(per_phase[phase][name], two[name], strict=True)]
                                         for name in ("ops", "kernels")}
                per_phase[phase]["per_slice"] = per_slice
        counts[key] = per_phase
    return counts
