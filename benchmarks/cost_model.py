"""Fit and validate the cost model (``composer/costmodel``): its constants from single layers, its predictions
against whole models it never saw, and the stored GPU runs with each pattern left out.

    python benchmarks/cost_model.py fit --device cpu        # one thread, ~3 min: rewrites the table's cpu entry
    python benchmarks/cost_model.py validate --device cpu   # one thread, ~3 min: 12 held-out models, measured
    python benchmarks/cost_model.py loo                     # seconds: the stored H100/H200 runs, by pattern
    python benchmarks/cost_model.py loo --write-table       # ... and the grouped fit as the GPUs' constants
    python benchmarks/cost_model.py fit --device cpu --quick --table /tmp/t.json --out /tmp/r   # plumbing only

``fit``: first the CPU's own roofs, measured (``peak_flops``: the best of 20 1024^3 fp32 GEMMs; ``bandwidth``:
the best of 20 64 MiB copies, bytes read + written), then per primitive (A, M, S, D, W, E: one residual layer,
``x + primitive(rmsnorm(x))``, at each of ``--widths``; and the head: embedding, final norm, tied LM head and loss;
each call on the next of enough copies that their weights are cold, as in a model: :class:`Unit`) the median time
of a training step (forward + backward, the input requiring grad as inside a model; under bf16 autocast where
this CPU has native bf16, as ``composer search`` trains there: ``--precision``), of the optimizer over its
parameters (``clip_grad_norm_`` + AdamW), of a prefill and of a decoding step (the layer's inference cache, as
``ComposerModel.next_token_logits`` runs it); and, with ``torch.profiler``, the ops (every aten op dispatched) and
kernels (leaf ops that do work) each of those runs at 1, 2 and 4 chunks of a scan, at batch 1, and what each
further slice of the batch adds to them for each CPU kernel that runs the batch in slices (S's and D's short
convolution, S's scan: :func:`measure_counts`). Each timing is one row of the linear system of
:mod:`composer.costmodel.fit`; the solution (each primitive's efficiency and activation passes per phase, the op
cost per phase) is written into the table with a source naming this command, its date, the results JSON
(``benchmarks/results/cost_model_fit-<date>.json``), the widths and patterns it ran, the precision and the clock.
``--provisional`` marks them so. The results JSON records the digest of the constants written.

``validate``: whole models the fit never ran, by construction: no single layer and no width (``d_model``) of the
fit (``VALIDATION``; a table whose fit ran one is refused), six of each layout class
(:mod:`composer.costmodel.classes`: A/M-heavy, S/D-heavy), A/M/S/D/W mixes of 6 to 73 layers at d_model 160 to
768: the measured training step (forward, loss, backward, clipping, AdamW: what ``composer train`` steps, in the
fit's precision), prefill and batch-1 decode beside the table's prediction; median and worst relative error
(``predicted / measured - 1``) per measure, per class and pooled, and the digest of the constants predicted with
(equal to the fit's: no refit in between), raw JSON to ``benchmarks/results/cost_model_validation-<date>.json``.
``--cases development`` runs the 2026-11-29 validation's models at the fit's own widths instead: what a change
of the model is tried on, so that the validation is run once, on a frozen fit.

``loo``: the training runs stored in ``benchmarks/results/gpu_check-2026-11-26.json`` (H100 and H200, bf16,
compiled, ``llama-3.2-1b`` widths; ``GPU_RUNS`` below lists each with the path of its figure in that file). Repeats
of one configuration are one case (their median); each pattern (at its shape: its runs on both GPUs and with
either S kernel) is held out together and its cases predicted with efficiencies fitted to the *other* patterns.
Errors per case, per held-out pattern, per layout class and pooled. There are 20 runs of 16 configurations and 10
patterns, and A and M always train side by side in the full models, so the data cannot fit one constant per
primitive (E is in one run only): the default, ``grouped``, fits four (``dense``: A, W, M and E; the head; S; D);
``three`` (the head in ``dense``), ``by-kind`` (attention and MLP apart), ``one`` and ``per-primitive`` are reported
beside it. ``--write-table`` stores the grouped fit to all cases as the GPUs' training (and, assumed alike,
prefill) efficiencies; without it the table is not touched.

Every measurement here runs on one thread (``--threads``, default 1): the ``cpu`` constants are one thread's, and
on this 2-core machine a second job then keeps a core of its own. Timings read this process's CPU time by
default (``--clock``), which the machine's other jobs do not inflate the way they do the wall clock.
"""


from __future__ import annotations

import argparse
import contextlib
import datetime
import gc
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

# Plain script, not a package: make the repository root importable when run as ``python benchmarks/...``.
_ROOT = Path(__file__).resolve().parent.parent
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

from composer.accounting import DTYPE_BYTES  # noqa: E402
from composer.config import ArchConfig  # noqa: E402
from composer.costmodel import (  # noqa: E402
    TABLE_PATH,
    Counts,
    design_row,
    error_summary,
    fit_nonnegative,
    load_table,
    parse_table,
    predict_decode,
    predict_prefill,
    predict_train,
    predicted_s,
    relative_error,
    step_work,
    write_table,
)
from composer.costmodel.classes import LAYOUT_CLASSES, layout_class  # noqa: E402
from composer.costmodel.fit import efficiency_name  # noqa: E402
from composer.costmodel.table import COUNT_CHUNKS, COUNT_PHASES, constants_digest  # noqa: E402
from composer.errors import ComposerUsageError, ConfigError  # noqa: E402
from composer.files import atomic_write_json, make_output_dir, read_json_file  # noqa: E402
from composer.precision import device_has_native_bf16  # noqa: E402
from composer.presets import get_preset  # noqa: E402

RESULTS = _ROOT / "benchmarks" / "results"
PRIMITIVES = "AMSDWE"
COLD_BYTES = 64 * 2**20  # above this CPU's last-level cache (32 MiB): what a layer's weights must exceed to be cold
MAX_COPIES = 64
KEYS = (*PRIMITIVES, "head")
PHASES = ("train", "prefill", "decode")
FP32 = 4

# -- what fit measures: per width, the shapes of each phase (batch, tokens); decode tokens are the context.
# Training at search-1m is timed at 2,048 tokens a step, the regime models train in (their activations spill the
# core's cache): a 2 x 64 step's activations stayed in cache, so its layers ran faster per token than any model's,
# and the one efficiency it shared with 8 x 256 was too high for both (-33% to -49% in-sample at 8 x 256 on
# 2026-11-29). The head trains at fewer tokens (at a 128K vocabulary its step is 6 x 131M FLOPs a token) and at
# two counts, so that its matmuls (per token) and its embedding gradient (per step) can be told apart.
FIT_SHAPES = {
    "search-1m": {"train": [(8, 256), (16, 128)], "prefill": [(1, 256), (4, 64)], "decode": [(1, 128), (8, 128)],
                  "head_train": [(8, 64), (2, 16)]},
    "llama-350m": {"train": [(1, 256)], "prefill": [(1, 256)], "decode": [(1, 128)],
                   "head_train": [(1, 64), (1, 16)]},
}
QUICK_FIT_SHAPES = {"tiny": {"train": [(2, 64), (1, 32)], "prefill": [(1, 64)], "decode": [(1, 32)],
                             "head_train": [(2, 16)]}}

# -- what validate measures: (preset, pattern, training batch, training sequence, decode/prefill context) ------
# Out of sample by construction (tests/benchmarks/test_cost_model.py asserts it from these lists, and validate
# refuses a table whose fit ran any of them): no pattern is a single layer (the fit runs single layers only), and
# no width (d_model) is one the fit ran (FIT_SHAPES: 128, 1024). Six of each layout class
# (composer.costmodel.classes), so that each class's median and worst rest on more than a few models. The answer
# of the constrained AMSD search stacked to demo-4m (34 layers) and a 73-layer D-heavy stack like its
# llama-3.2-1b growth are the deep ones.
VALIDATION = [
    # A/M-heavy
    ("search-1m:d160", "AMAMAM", 8, 256, 128),
    ("search-1m:d160", "AMWMAM", 8, 256, 128),
    ("demo-4m", "(AM)x8", 16, 128, 128),
    ("demo-4m:d256", "(AMWM)x2", 16, 128, 128),
    ("demo-4m:d256", "AMAMSM", 16, 128, 128),
    ("llama-350m:d768", "AMWMAM", 1, 128, 64),
    # S/D-heavy
    ("search-1m:d160", "SDMMSD", 8, 256, 128),
    ("search-1m:d160", "(S5D)x6 A(S5D)x6", 4, 256, 128),
    ("demo-4m", "(SM)x3 A(SM)x3", 16, 128, 128),
    ("demo-4m", "(S4D)x3 SDA3D (S4D)x2 SDD", 16, 128, 128),
    ("demo-4m:d256", "(SMWM)x2", 16, 128, 128),
    ("llama-350m:d768", "AMSMDM", 1, 128, 64),
]
QUICK_VALIDATION = [("tiny:d96", "AMSDWM", 2, 32, 16), ("tiny:d96", "AMAM", 2, 32, 16)]
# -- what a change of the model is tried on first (``validate --cases development``): the models of the 2026-11-29
# validation at the fit's own widths (search-1m, llama-350m), read from its results; its demo-4m models are left
# out, demo-4m's width being VALIDATION's. Whole models, so they show what a model adds to its single layers, but
# they are not out of sample; VALIDATION is run once, after the fit is final.
DEVELOPMENT_FROM = RESULTS / "cost_model_validation-2026-11-29.json"


def development_cases() -> list[tuple]:
    rows = read_json_file(DEVELOPMENT_FROM, "the 2026-11-29 validation")["rows"]
    fit_widths = {get_preset(preset).arch.d_model for preset in FIT_SHAPES}
    return [(r["preset"], r["pattern"], *r["train_shape"], r["context"]) for r in rows
            if get_preset(r["preset"]).arch.d_model in fit_widths]

# -- the stored GPU runs (benchmarks/results/gpu_check-2026-11-26.json): label, device, pattern, batch, seq,
# the path of the tokens/s figure in the file, and options. Steady-state figures (second-half medians) where the
# run stored one. Full models are llama-3.2-1b at 8 x 2048 (composer train --compile, FSDP on one GPU,
# bf16-mixed); the two-layer "steps" rows are gpu_check's compiled bare loop at 4 x 1024 (W's window 256).
GPU_RESULTS = RESULTS / "gpu_check-2026-11-26.json"
GPU_RUNS: list[dict[str, Any]] = [
    {"label": "run1 (AM)x4", "device": "h200", "pattern": "(AM)x4", "shape": [8, 2048], "vocab": 320,
     "path": ["gpu_check_run1", "c_mfu", 0, "median_tokens_per_s_second_half"]},
    {"label": "run1 (AM)x16", "device": "h200", "pattern": "(AM)x16", "shape": [8, 2048], "vocab": 320,
     "path": ["gpu_check_run1", "c_mfu", 1, "median_tokens_per_s_second_half"]},
    {"label": "run2 (SMWM)x4", "device": "h200", "pattern": "(SMWM)x4", "shape": [8, 2048], "vocab": 320,
     "path": ["run2", "smwm_x4_after_recompile_fix", "summary", "tokens_per_s"], "S": "torch"},
    {"label": "run2 (DMAM)x4 at step 30", "device": "h200", "pattern": "(DMAM)x4", "shape": [8, 2048], "vocab": 320,
     "path": ["run2", "dmam_x4_partial", "progress_tok_s_at_step_30"]},
    {"label": "run3 (AM)x16", "device": "h100", "pattern": "(AM)x16", "shape": [8, 2048], "vocab": 320,
     "path": ["run3_h100", "c_mfu", "AMx16", "median_tokens_per_s_second_half"]},
    {"label": "run3 (DMAM)x4 lr 1e-3", "device": "h100", "pattern": "(DMAM)x4", "shape": [8, 2048], "vocab": 320,
     "path": ["run3_h100", "c_mfu", "DMAMx4_lr1e-3", "median_tokens_per_s_second_half"]},
    {"label": "run3 (DMAM)x4 default lr (stopped at step 11)", "device": "h100", "pattern": "(DMAM)x4",
     "shape": [8, 2048], "vocab": 320, "path": ["run3_h100", "c_mfu", "DMAMx4_default_lr", "tokens_per_s"]},
    {"label": "run3 (SMWM)x4 lr 1e-3", "device": "h100", "pattern": "(SMWM)x4", "shape": [8, 2048], "vocab": 320,
     "path": ["run3_h100", "c_mfu", "SMWMx4_lr1e-3", "median_tokens_per_s_second_half"], "S": "torch"},
    {"label": "run4 (AM)x16", "device": "h200", "pattern": "(AM)x16", "shape": [8, 2048], "vocab": 320,
     "path": ["run4_h200_quick", "mfu", "(AM)x16", "tokens_per_s_steady"]},
    {"label": "run4 (SMWM)x4, S on mamba-ssm's Triton kernels", "device": "h200", "pattern": "(SMWM)x4",
     "shape": [8, 2048], "vocab": 320, "S": "triton",
     "path": ["run4_h200_quick", "mfu", "(SMWM)x4 S on mamba-ssm Triton kernels", "tokens_per_s_steady"]},
    {"label": "run5 (SMWM)x4, S on mamba-ssm's Triton kernels", "device": "h200", "pattern": "(SMWM)x4",
     "shape": [8, 2048], "vocab": 320, "S": "triton", "path": ["run5_h200_quick", "mfu", "SMWMx4", "tokens_per_s_steady"]},
    {"label": "run5 (AM)x16", "device": "h200", "pattern": "(AM)x16", "shape": [8, 2048], "vocab": 320,
     "path": ["run5_h200_quick", "mfu", "AMx16", "tokens_per_s_steady"]},
    {"label": "run1 steps AM", "device": "h200", "pattern": "AM", "shape": [4, 1024],
     "path": ["gpu_check_run1", "b_steps", "rows", 1, "compiled", "tokens_per_s"]},
    {"label": "run1 steps WM", "device": "h200", "pattern": "WM", "shape": [4, 1024], "window": 256,
     "path": ["gpu_check_run1", "b_steps", "rows", 2, "compiled", "tokens_per_s"]},
    {"label": "run1 steps MM", "device": "h200", "pattern": "MM", "shape": [4, 1024],
     "path": ["gpu_check_run1", "b_steps", "rows", 3, "compiled", "tokens_per_s"]},
    {"label": "run1 steps EM", "device": "h200", "pattern": "EM", "shape": [4, 1024],
     "path": ["gpu_check_run1", "b_steps", "rows", 4, "compiled", "tokens_per_s"]},
    {"label": "steps rerun SM", "device": "h200", "pattern": "SM", "shape": [4, 1024], "S": "torch",
     "path": ["steps_rerun", "S", "rows", 0, "compiled", "tokens_per_s"]},
    {"label": "steps rerun DM", "device": "h200", "pattern": "DM", "shape": [4, 1024],
     "path": ["steps_rerun", "D", "rows", 0, "compiled", "tokens_per_s"]},
    {"label": "run3 steps SM", "device": "h100", "pattern": "SM", "shape": [4, 1024], "S": "torch",
     "path": ["run3_h100", "b_steps", "rows", 0, "compiled_tokens_per_s"]},
    {"label": "run3 steps DM", "device": "h100", "pattern": "DM", "shape": [4, 1024],
     "path": ["run3_h100", "b_steps", "rows", 1, "compiled_tokens_per_s"]},
]
GPU_EXCLUDED = {
    "hybrid_train_runs": "(SMWM)x4 and (DMAM)x4 before the recompile-limit fix: dynamo hit its limit and ran later "
                         "variants eagerly, so neither is a compiled step (their notes in the file)",
    "rung0 rows (run4, run5)": "search-1m widths, eager, through the search's evaluator: launch bound, a regime the "
                               "GPU training constants do not model (their op cost is assumed 0)",
    "eager step rows": "the compiled rows of the same steps are used",
}
GPU_GROUPINGS: dict[str, Callable[[str], str]] = {
    "grouped": lambda key: key if key in ("S", "D", "optimizer", "head") else "dense",
    "three": lambda key: key if key in ("S", "D", "optimizer") else "dense",
    "by-kind": lambda key: {"A": "attention", "W": "attention", "M": "mlp", "E": "mlp"}.get(key, key),
    "one": lambda key: key if key == "optimizer" else "all",
    "per-primitive": lambda key: key,
}


# =============================================================================================== helpers
def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def today() -> str:
    return datetime.date.today().isoformat()


def shown(path: Path | str) -> str:
    """``path`` relative to the repository when inside it (what a results file or the table records)."""
    path = Path(path).resolve()
    return os.path.relpath(path, _ROOT) if path.is_relative_to(_ROOT) else str(path)


def command_line(argv: list[str] | None) -> str:
    return "python benchmarks/cost_model.py " + " ".join(sys.argv[1:] if argv is None else argv)


# This machine's 2 cores are shared with other jobs: a one-thread timing on the wall clock, taken while more jobs
# than cores are runnable, measures the scheduler (on 2026-12-07, with 6-11 runnable, two S and M layers at
# demo-4m trained in a median 318 ms of wall time, 200 ms at best, and 178 ms of this process's CPU time, 170 at
# best). So every timing reads the clock ``--clock`` names: ``cpu`` (the default), the CPU time of this process
# (one thread: the time its step ran, not the time it waited for a core; contention for memory bandwidth and
# caches still shows), or ``wall``. On the wall clock, each timing first waits, up to QUIET_TIMEOUT_S, until no
# more than QUIET_RUNNABLE tasks are runnable (this one and one other: a core each) on QUIET_POLLS polls in a row;
# what it waited and saw is kept (``QUIET_LOG``).
CLOCKS = {"cpu": time.process_time, "wall": time.perf_counter}
CLOCK = {"name": "cpu"}


def now() -> float:
    """Seconds on the clock this run times with (``--clock``)."""
    return CLOCKS[CLOCK["name"]]()


QUIET_RUNNABLE = 2
QUIET_POLLS = 5
QUIET_TIMEOUT_S = 90.0
QUIET_LOG: list[dict[str, float]] = []
QUIET = {"enabled": True}  # on the wall clock only; off under --quick (plumbing, not figures) and --no-wait


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
    machine is quiet (:func:`wait_for_quiet`)."""
    wait_for_quiet()
    for _ in range(warmup):
        fn()
    times = []
    gc.collect()
    gc.disable()
    try:
        for _ in range(steps):
            start = now()
            fn()
            times.append(now() - start)
    finally:
        gc.enable()
    return times


def train_precision_of(requested: str) -> str:
    """The precision fit and validate train in: ``auto`` is bf16 autocast over fp32 weights where this CPU has
    native bf16 (what ``composer search`` trains its candidates in there: ``composer.precision``), else fp32."""
    if requested == "auto":
        return "bf16" if device_has_native_bf16("cpu") else "fp32"
    return requested


def training_autocast(precision: str) -> Callable[[], contextlib.AbstractContextManager]:
    """What a training step's forward (and loss) runs under: bf16 autocast on the CPU (Lightning's bf16-mixed:
    the backward outside it) or nothing."""
    if precision == "bf16":
        return lambda: torch.autocast("cpu", dtype=torch.bfloat16)
    return contextlib.nullcontext


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


# ============================================================================ one unit, as the fit runs it
def arch_for(preset: str, pattern: str) -> ArchConfig:
    return get_preset(preset).arch.with_pattern(pattern)


class Unit:
    """One key (a primitive's residual layer, or the head) at one width, and its four measured calls.

    Every call runs the next of ``copies`` identical modules, enough that their weights together exceed the
    last-level cache (``COLD_BYTES``): inside a model a layer's weights come from memory, evicted by the layers
    between two of its steps, and a single layer called again and again would read them from cache instead (at
    demo-4m widths a warm A and M layer decoded in 0.31 ms, cold copies in 0.52 ms, and a whole (AM)x8 model
    in 0.54 ms per pair: 2026-11-29, one thread)."""

    def __init__(self, arch: ArchConfig, key: str, copies: int | None = None, train_precision: str = "fp32") -> None:
        torch.manual_seed(0)
        self.arch, self.key = arch, key
        self.autocast = training_autocast(train_precision)
        first = self._build()
        weight_bytes = sum(p.numel() * p.element_size() for p in first.parameters())
        n = copies or max(1, min(MAX_COPIES, -(-COLD_BYTES // weight_bytes)))
        self.modules = [first, *(self._build() for _ in range(n - 1))]
        self.next = 0

    def _build(self) -> nn.Module:
        from composer.model import ResidualLayer
        from primitives.base import InitScheme
        from primitives.registry import REGISTRY

        arch = self.arch
        if self.key == "head":
            module = nn.ModuleDict({"embed": nn.Embedding(arch.vocab_size, arch.d_model),
                                    "norm": nn.RMSNorm(arch.d_model, eps=arch.norm_eps)})
            nn.init.normal_(module["embed"].weight, std=arch.init_std)
            return module
        config = arch.with_pattern(self.key).primitive_configs()[self.key]
        module = ResidualLayer(REGISTRY.get(self.key)(config), arch.d_model, arch.norm_eps)
        module.primitive.reset_parameters(InitScheme(std=arch.init_std, n_layers=1))
        return module

    def _rotate(self, steps: list[Callable[[], Any]]) -> Callable[[], None]:
        """One call of the next copy's step."""

        def call() -> None:
            self.next = (self.next + 1) % len(steps)
            steps[self.next]()

        return call

    # -- the calls ------------------------------------------------------------------------------------------
    def train_call(self, batch: int, seq: int) -> Callable[[], None]:
        gen = torch.Generator().manual_seed(1)
        if self.key == "head":
            ids = torch.randint(0, self.arch.vocab_size, (batch, seq + 1), generator=gen)

            def head_step(module: nn.Module) -> Callable[[], None]:
                def step() -> None:
                    module.zero_grad(set_to_none=True)
                    with self.autocast():
                        h = module["norm"](module["embed"](ids[:, :-1]))
                        logits = F.linear(h, module["embed"].weight)
                        loss = F.cross_entropy(logits.flatten(0, 1), ids[:, 1:].flatten())
                    loss.backward()

                return step

            return self._rotate([head_step(m) for m in self.modules])
        # Every copy forward, then every copy backward in reverse, each on its own input, as the layers of a model
        # train: a layer's backward reads the activations its forward saved long before, from memory. Forward and
        # backward of one layer back to back read them from cache, and a deep S/D stack then trained 30-50% slower
        # than the single layers predicted (validate, 2026-11-29). One call is every copy: seconds per layer are
        # the call's over ``layers_per_call``.
        inputs = [torch.randn(batch, seq, self.arch.d_model, generator=gen).requires_grad_(True)
                  for _ in self.modules]
        grad = torch.randn(batch, seq, self.arch.d_model, generator=gen)

        def stack_step() -> None:
            outputs = []
            with self.autocast():
                for module, x in zip(self.modules, inputs, strict=True):
                    module.zero_grad(set_to_none=True)
                    x.grad = None
                    outputs.append(module(x))
            for out in reversed(outputs):
                out.backward(grad)

        return stack_step

    def layers_per_call(self, phase: str) -> int:
        """How many layers one call of ``phase`` runs: every copy for a layer's training step, else one."""
        return len(self.modules) if phase == "train" and self.key != "head" else 1

    def optimizer_call(self) -> Callable[[], None]:
        def optimizer_step(module: nn.Module) -> Callable[[], None]:
            params = list(module.parameters())
            for p in params:
                p.grad = torch.randn_like(p) * 1e-3
            optimizer = torch.optim.AdamW(params, lr=1e-4, betas=(0.9, 0.95), weight_decay=0.1)

            def step() -> None:
                torch.nn.utils.clip_grad_norm_(params, 1.0)
                optimizer.step()

            return step

        return self._rotate([optimizer_step(m) for m in self.modules])

    def prefill_call(self, batch: int, seq: int) -> Callable[[], None]:
        gen = torch.Generator().manual_seed(2)
        if self.key == "head":
            ids = torch.randint(0, self.arch.vocab_size, (batch, seq), generator=gen)
            return self._rotate([lambda m=m: self._logits(m, ids) for m in self.modules])
        x = torch.randn(batch, seq, self.arch.d_model, generator=gen)

        def prefill_step(module: nn.Module) -> Callable[[], None]:
            cache = module.primitive.init_cache(batch, seq + 1)
            return torch.no_grad()(lambda: module.forward_cached(x, cache, 0))

        return self._rotate([prefill_step(m) for m in self.modules])

    def decode_call(self, batch: int, context: int) -> Callable[[], None]:
        """One decoding step at ``context`` (each copy's cache filled by a prefill first; every call writes the
        same position, so the cache never grows)."""
        gen = torch.Generator().manual_seed(3)
        if self.key == "head":
            ids = torch.randint(0, self.arch.vocab_size, (batch, 1), generator=gen)
            return self._rotate([lambda m=m: self._logits(m, ids) for m in self.modules])
        prompt = torch.randn(batch, context, self.arch.d_model, generator=gen)
        x = torch.randn(batch, 1, self.arch.d_model, generator=gen)

        def decode_step(module: nn.Module) -> Callable[[], None]:
            cache = module.primitive.init_cache(batch, context + 1)
            with torch.no_grad():
                module.forward_cached(prompt, cache, 0)
            return torch.no_grad()(lambda: module.forward_cached(x, cache, context))

        return self._rotate([decode_step(m) for m in self.modules])

    @staticmethod
    @torch.no_grad()
    def _logits(module: nn.Module, ids: torch.Tensor) -> torch.Tensor:
        """Embedding, final norm, LM head on the last position and the greedy pick (next_token_logits' head)."""
        h = module["norm"](module["embed"](ids)[:, -1:])
        return F.linear(h, module["embed"].weight)[:, -1].argmax(-1)

    def call(self, phase: str, batch: int, tokens: int) -> Callable[[], None]:
        if phase == "optimizer":
            return self.optimizer_call()
        return getattr(self, f"{phase}_call")(batch, tokens)


def unit_work(arch: ArchConfig, key: str, phase: str, batch: int, tokens: int, train_precision: str = "fp32"):
    """The cost model's units for what :class:`Unit` times: ``phase`` is a step phase or ``optimizer``."""
    symbol_arch = arch if key == "head" else arch.with_pattern(key)
    step_phase = "train" if phase == "optimizer" else phase
    activation_bytes = DTYPE_BYTES[train_precision] if step_phase == "train" else FP32
    units = step_work(symbol_arch, step_phase, batch, tokens, FP32, activation_bytes)
    if phase == "optimizer":
        return [u for u in units if u.key == "optimizer" and u.count_key == key]
    if key == "head" and phase == "train":  # the head's step includes the embedding's gradient
        return [u for u in units if u.key in ("head", "embedding")]
    return [u for u in units if u.key == key and u.count_phase == phase]


# ================================================================================================== fit
def measure_roofs(quick: bool) -> dict[str, Any]:
    """This CPU's peak FLOP/s (best of a few square fp32 GEMMs) and bandwidth (best of a few copies)."""
    n = 256 if quick else 1024
    a, b = torch.randn(n, n), torch.randn(n, n)
    gemm = min(timed(lambda: a @ b, 2 if quick else 20, 1))  # the best: load from elsewhere only slows a run
    size = (4 if quick else 64) * 2**20 // FP32
    src, dst = torch.randn(size), torch.empty(size)
    copy = min(timed(lambda: dst.copy_(src), 2 if quick else 20, 1))
    return {"peak_flops": 2 * n**3 / gemm, "gemm_n": n, "gemm_s": gemm,
            "bandwidth": 2 * size * FP32 / copy, "copy_bytes": size * FP32, "copy_s": copy}


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


def cmd_fit(args: argparse.Namespace, argv: list[str] | None) -> int:
    if args.device != "cpu":
        raise ConfigError(f"fit measures the machine it runs on: --device cpu (got {args.device!r}); the GPUs' "
                          "training constants come from `loo`")
    torch.set_num_threads(args.threads)
    shapes = QUICK_FIT_SHAPES if args.quick else {w: FIT_SHAPES.get(w, FIT_SHAPES["search-1m"]) for w in args.widths}
    keys = tuple(args.primitives) + ("head",)
    steps, warmup = (1, 1) if args.quick else (args.steps, 1)
    started = time.perf_counter()
    machine_before = machine_state()
    date = today()
    log(f"fit --device cpu: {torch.get_num_threads()} thread(s), widths {', '.join(shapes)}, keys {', '.join(keys)}")
    roofs = measure_roofs(args.quick)
    log(f"  roofs: {roofs['peak_flops'] / 1e9:.1f} GFLOP/s (fp32 GEMM {roofs['gemm_n']}^3), "
        f"{roofs['bandwidth'] / 1e9:.1f} GB/s (copy of {roofs['copy_bytes'] / 2**20:.0f} MiB)")
    train_precision = train_precision_of(args.precision)
    log(f"  training in {train_precision} (this CPU {'has' if device_has_native_bf16('cpu') else 'lacks'} native "
        f"bf16; --precision {args.precision})")
    counts = measure_counts(next(iter(shapes)), keys, train_precision)

    timings = []
    for preset, per_phase in shapes.items():
        arch = arch_for(preset, "AM").replace(max_seq_len=4096)
        for key in keys:
            unit = Unit(arch, key, train_precision=train_precision)
            for phase in ("train", "optimizer", "prefill", "decode"):
                shape_key = "head_train" if (key, phase) == ("head", "train") else phase
                for batch, tokens in per_phase["train" if phase == "optimizer" else shape_key]:
                    n = steps if phase != "decode" else max(steps, 4 if args.quick else 16)
                    call = unit.call(phase, batch, tokens)
                    seconds = statistics.median(timed(call, n, warmup)) / unit.layers_per_call(phase)
                    timings.append({"preset": preset, "key": key, "phase": phase, "batch": batch, "tokens": tokens,
                                    "seconds": seconds, "steps": n, "quiet": last_wait_quiet()})
                    log(f"  {preset:<11} {key:<5} {phase:<9} {batch:>2} x {tokens:<4} {1e3 * seconds:9.3f} ms")
                    if phase == "optimizer":
                        break  # one optimizer timing per unit: it does not depend on the shape

    table = load_table(args.table)
    raw = json.loads(json.dumps(table.raw))  # a copy to edit
    counts_table = parse_table({**raw, "counts": {"source": raw["counts"]["source"], "per_key": counts}})

    def counts_of(key: str, phase: str) -> Counts:
        return counts_table.counts_of(key, phase, "ops")

    rows = []
    for t in timings:
        units = unit_work(arch_for(t["preset"], "AM").replace(max_seq_len=4096), t["key"], t["phase"], t["batch"],
                          t["tokens"], train_precision)
        step_phase = "train" if t["phase"] == "optimizer" else t["phase"]
        rows.append(design_row(units, step_phase, roofs["peak_flops"], roofs["bandwidth"], counts_of, t["seconds"],
                               label=f"{t['preset']} {t['key']} {t['phase']} {t['batch']}x{t['tokens']}",
                               activation_passes=True))
    # unbounded: the CPU's peak is a measured GEMM, not a bound (a layer's larger or better-shaped GEMMs, or a
    # noisy roof measurement, can beat it), unlike a GPU's datasheet peak
    solution = fit_nonnegative(rows, max_efficiency=None)
    for t, row in zip(timings, rows, strict=True):
        t["predicted_s"] = predicted_s(row, solution)
        t["error"] = relative_error(t["predicted_s"], t["seconds"])
    constants = constants_from(solution)
    results = {
        "benchmark": "cost_model fit", "date": date, "command": command_line(argv), "device": "cpu",
        "threads": torch.get_num_threads(), "torch": torch.__version__, "quick": args.quick,
        "provisional": args.provisional, "seconds": time.perf_counter() - started, "roofs": roofs,
        "train_precision": train_precision, "native_bf16": device_has_native_bf16("cpu"),
        "fit_widths": {preset: arch_for(preset, "AM").d_model for preset in shapes}, "fit_patterns": list(keys),
        "clock": CLOCK["name"],
        "machine": {"before": machine_before, "after": machine_state(), "waits": quiet_summary()},
        "counts": counts, "timings": timings, "constants": constants,
        "fit_error": {phase: error_summary([t["error"] for t in timings if t["phase"] == phase])
                      for phase in ("train", "optimizer", "prefill", "decode")},
    }
    out = make_output_dir(args.out)
    results_path = out / f"cost_model_fit-{date}.json"
    if not args.no_write:
        store_cpu_fit(raw, roofs, counts, constants, results, results_path, args)
        # what validate names to show it predicted with exactly these constants (no refit in between)
        results["cpu_constants_digest"] = constants_digest(raw, "cpu")
    atomic_write_json(results_path, results)
    log("  fit in-sample error (median |pred/meas - 1|): " + ", ".join(
        f"{phase} {summary.get('median_abs', float('nan')):.1%}" for phase, summary in results["fit_error"].items()))
    if not args.no_write:
        write_table(raw, args.table)
        log(f"  wrote the cpu constants to {args.table or TABLE_PATH} (digest {results['cpu_constants_digest']})")
    log(f"fit done in {time.perf_counter() - started:.0f} s; results in {results_path}")
    print(json.dumps({"constants": constants, "fit_error": results["fit_error"]}, indent=2))
    return 0


def constants_from(solution: dict[str, float]) -> dict[str, Any]:
    """The fitted unknowns as the table holds them: efficiency = 1 / the reciprocal fitted (None where the fit
    gave 0: no time could be attributed to that key, so it has no efficiency), op costs as fitted."""
    efficiency: dict[str, dict[str, float | None]] = {}
    passes: dict[str, dict[str, float]] = {}
    op_cost: dict[str, float] = {}
    for name, value in solution.items():
        kind, rest = name.split(".", 1)
        if kind == "efficiency":
            phase, key = rest.split(".", 1)
            efficiency.setdefault(phase, {})[key] = 1.0 / value if value > 0 else None
        elif kind == "activation_passes":
            phase, key = rest.split(".", 1)
            passes.setdefault(phase, {})[key] = value
        else:
            op_cost[rest] = value
    return {"efficiency": efficiency, "activation_passes": passes, "op_cost_s": op_cost}


def store_cpu_fit(raw: dict, roofs: dict, counts: dict, constants: dict, results: dict, results_path: Path,
                  args: argparse.Namespace) -> None:
    """Write the fit into the table's ``cpu`` entry and counts, each figure naming this fit as its source."""
    date = results["date"]
    status = {"status": "provisional"} if args.provisional else {}
    where = shown(results_path)
    fit_id, roofs_id, counts_id = f"fit-cpu-{date}", f"roofs-cpu-{date}", f"counts-cpu-{date}"
    common = {"date": date, "command": results["command"], "results": where, "threads": results["threads"],
              "torch": results["torch"], **status}
    note = "non-negative least squares on relative error over the single-layer timings"
    raw["sources"][fit_id] = {"kind": "fitted", **common, "note": note + (f"; {args.note}" if args.note else ""),
                              "train_precision": results["train_precision"], "clock": results["clock"],
                              "widths": results["fit_widths"],
                              "patterns": results["fit_patterns"]}
    raw["sources"][roofs_id] = {"kind": "measured", **common,
                                "note": f"best of fp32 {roofs['gemm_n']}^3 GEMMs; best of "
                                        f"{roofs['copy_bytes'] / 2**20:.0f} MiB copies (read + write)"}
    raw["sources"][counts_id] = {"kind": "measured", **common, "note": "torch.profiler over one call of each"}
    kept = {key: value for key, value in raw["counts"]["per_key"].items() if key not in counts}
    if kept:
        log(f"  counts of {', '.join(kept)} kept from {raw['counts']['source']} (not measured by this fit)")
    raw["counts"] = {"source": counts_id, "unit_note": raw["counts"].get("unit_note", ""),
                     "per_key": {**kept, **counts}}
    cpu = raw["devices"]["cpu"]
    cpu["peak_flops"] = {"value": roofs["peak_flops"], "source": roofs_id}
    cpu["bandwidth"] = {"value": roofs["bandwidth"], "source": roofs_id}
    cpu["threads"] = results["threads"]
    cpu["train_precision"] = results["train_precision"]
    cpu["batch_slices"] = True  # the counts carry per-slice figures: predictions count the CPU kernels' slices
    for phase, value in constants["op_cost_s"].items():
        cpu["op_cost_s"][phase] = {"value": value, "source": fit_id}
    cpu["activation_passes"] = {phase: {key: {"value": value, "source": fit_id} for key, value in keys.items()}
                                for phase, keys in constants["activation_passes"].items()}
    for phase, keys in constants["efficiency"].items():
        for key, value in keys.items():
            if value is not None:
                cpu["efficiency"][phase][key] = {"value": value, "source": fit_id}
            else:
                log(f"  warning: no {phase} time could be attributed to {key}: its efficiency keeps "
                    f"{cpu['efficiency'][phase].get(key)}")
    used = {c["source"] for c in _constants(raw)}
    for source_id in [s for s in raw["sources"] if s not in used and s != raw["counts"]["source"]]:
        del raw["sources"][source_id]  # sources no constant names any more (an older fit's)


def _constants(raw: dict) -> list[dict]:
    out = []
    for device in raw["devices"].values():
        out += [device["peak_flops"], device["bandwidth"], *device["op_cost_s"].values()]
        out += [c for keys in device["efficiency"].values() for c in keys.values()]
        out += [c for keys in device.get("activation_passes", {}).values() for c in keys.values()]
    return out


# ============================================================================================= validate
def train_step_call(model, optimizer, batch: int, seq: int, vocab: int,
                    precision: str = "fp32") -> Callable[[], None]:
    """What composer train steps (benchmarks/training_throughput.py's bare loop without the LR schedule), the
    forward and loss under ``precision``'s autocast."""
    ids = torch.randint(0, vocab, (batch, seq + 1), generator=torch.Generator().manual_seed(0))
    autocast = training_autocast(precision)

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        with autocast():
            loss = model(ids[:, :-1], ids[:, 1:]).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()

    return step


@torch.no_grad()
def measure_serving(model, context: int, new_tokens: int) -> tuple[float, list[float]]:
    """A batch-1 prompt of ``context`` tokens (seconds) and ``new_tokens`` decoding steps after it (seconds each),
    as composer.evaluation.bench_inference times them: next_token_logits and a greedy pick."""
    cache = model.init_cache(1, context + new_tokens + 1)
    prompt = torch.randint(0, model.arch.vocab_size, (1, context), generator=torch.Generator().manual_seed(1))
    model.next_token_logits(prompt, cache)  # warm
    cache.reset()
    wait_for_quiet()
    start = now()
    token = model.next_token_logits(prompt, cache).argmax(-1)
    prefill = now() - start
    steps = []
    gc.disable()
    try:
        for _ in range(new_tokens):
            start = now()
            token = model.next_token_logits(token[:, None], cache).argmax(-1)
            steps.append(now() - start)
    finally:
        gc.enable()
    return prefill, steps


def cmd_validate(args: argparse.Namespace, argv: list[str] | None) -> int:
    from composer.model import build_model

    if args.device != "cpu":
        raise ConfigError(f"validate measures the machine it runs on: --device cpu (got {args.device!r}); the GPU "
                          "runs are checked by `loo`")
    torch.set_num_threads(args.threads)
    table = load_table(args.table)
    cases = (QUICK_VALIDATION if args.quick else development_cases() if args.cases == "development"
             else VALIDATION)
    fit = fit_source(table)
    if args.cases == "validation":
        check_out_of_sample(cases, fit)
    if fit.get("clock", CLOCK["name"]) != CLOCK["name"]:  # a fit from before 2026-12-07 did not record its clock
        raise ConfigError(f"fit {fit['id']} timed on the {fit['clock']} clock: validate with --clock {fit['clock']}, "
                          "one clock for both")
    train_precision = table.device("cpu").train_precision
    steps, new_tokens = (1, 4) if args.quick else (args.steps, 16)
    started = time.perf_counter()
    machine_before = machine_state()
    log(f"validate --device cpu: {len(cases)} held-out models, {torch.get_num_threads()} thread(s), training in "
        f"{train_precision} as the fit did, table {args.table or TABLE_PATH} (fit {fit['id']}, digest "
        f"{constants_digest(table.raw, 'cpu')})")
    rows = []
    for preset, pattern, batch, seq, context in cases:
        arch = arch_for(preset, pattern)
        torch.manual_seed(0)
        model = build_model(arch)
        optimizer = torch.optim.AdamW(model.parameter_groups(0.1), lr=1e-4, betas=(0.9, 0.95))
        is_large = arch.d_model >= 512
        train = timed(train_step_call(model, optimizer, batch, seq, arch.vocab_size, train_precision),
                      2 if is_large else steps, 1)
        quiet = {"train": last_wait_quiet()}
        model.eval()
        prefill_s, decode = measure_serving(model, context, 8 if is_large else new_tokens)
        quiet["serving"] = last_wait_quiet()
        del model, optimizer
        gc.collect()
        train_s, decode_s = statistics.median(train), statistics.median(decode)
        p_train = predict_train(arch, "cpu", batch=batch, seq_len=seq, table=table)
        p_prefill = predict_prefill(arch, "cpu", seq_len=context, batch=1, table=table)
        p_decode = predict_decode(arch, "cpu", context=context + len(decode) // 2, batch=1, table=table)
        row = {
            "preset": preset, "pattern": arch.pattern, "compact": arch.compact, "n_layers": arch.n_layers,
            "d_model": arch.d_model, "layout_class": layout_class(arch), "quiet": quiet,
            "train_shape": [batch, seq], "context": context,
            "train_tokens_per_s": batch * seq / train_s, "train_tokens_per_s_predicted": p_train.tokens_per_s,
            "train_step_s": train, "prefill_tokens_per_s": context / prefill_s,
            "prefill_tokens_per_s_predicted": p_prefill.tokens_per_s,
            "decode_ms_per_token": 1e3 * decode_s, "decode_ms_per_token_predicted": p_decode.ms_per_token,
            "decode_step_s": decode,
        }
        row["error"] = {
            "train_tokens_per_s": relative_error(row["train_tokens_per_s_predicted"], row["train_tokens_per_s"]),
            "prefill_tokens_per_s": relative_error(row["prefill_tokens_per_s_predicted"], row["prefill_tokens_per_s"]),
            "decode_ms_per_token": relative_error(row["decode_ms_per_token_predicted"], row["decode_ms_per_token"]),
        }
        rows.append(row)
        log(f"  {preset:<11} {arch.compact:<28} train {row['train_tokens_per_s']:>9,.0f} tok/s "
            f"(pred {row['train_tokens_per_s_predicted']:>9,.0f}, {row['error']['train_tokens_per_s']:+.0%})  "
            f"decode {row['decode_ms_per_token']:7.2f} ms (pred {row['decode_ms_per_token_predicted']:7.2f}, "
            f"{row['error']['decode_ms_per_token']:+.0%})")
    summary = errors_by_class(rows)
    results = {
        "benchmark": "cost_model validate", "date": today(), "command": command_line(argv), "device": "cpu",
        "cases": args.cases, "out_of_sample": args.cases == "validation",
        "threads": torch.get_num_threads(), "torch": torch.__version__, "quick": args.quick,
        "train_precision": train_precision, "native_bf16": device_has_native_bf16("cpu"),
        "clock": CLOCK["name"],
        "machine": {"before": machine_before, "after": machine_state(), "waits": quiet_summary()},
        "seconds": time.perf_counter() - started, "table": shown(args.table or TABLE_PATH),
        "fit_source": fit, "cpu_constants_digest": constants_digest(table.raw, "cpu"),
        "table_sources": table.sources, "rows": rows, "errors": summary["pooled"],
        "errors_by_class": {c: summary[c] for c in LAYOUT_CLASSES},
        "class_rule": "S/D-heavy: at least half of the token mixers keep a fixed recurrent state (S, D); "
                      "composer.costmodel.classes.layout_class",
        "error_definition": "predicted / measured - 1 (tokens/s for training and prefill, ms per token for decode)",
    }
    out = make_output_dir(args.out)
    path = out / f"cost_model_{args.cases}-{results['date']}.json"
    atomic_write_json(path, results)
    print(validation_table(rows, summary))
    log(f"validate done in {results['seconds']:.0f} s; results in {path}")
    return 0


MEASURES = ("train_tokens_per_s", "prefill_tokens_per_s", "decode_ms_per_token")


def errors_by_class(rows: list[dict]) -> dict[str, dict[str, Any]]:
    """Per measure, the error summary of each layout class's rows and of all rows (``pooled``)."""
    groups = {"pooled": rows, **{c: [r for r in rows if r["layout_class"] == c] for c in LAYOUT_CLASSES}}
    return {name: {m: error_summary([r["error"][m] for r in members]) for m in MEASURES}
            for name, members in groups.items()}


def fit_source(table) -> dict[str, Any]:
    """The source of the table's cpu training efficiencies (the fit validate checks), with its id."""
    efficiency = table.device("cpu").efficiency["train"]
    return table.source(next(iter(efficiency.values())).source)


def check_out_of_sample(cases: list[tuple], fit: dict[str, Any]) -> None:
    """Refuse (one line) a validation model whose width or pattern the table's fit ran: its error would be
    in-sample. A fit from before 2026-12-07 recorded neither, and is checked against ``FIT_SHAPES``'s widths."""
    widths = set(fit.get("widths", {p: get_preset(p).arch.d_model for p in FIT_SHAPES}).values())
    patterns = set(fit.get("patterns", KEYS))
    for preset, pattern, *_ in cases:
        arch = arch_for(preset, pattern)
        if arch.d_model in widths or arch.compact in patterns or arch.n_layers < 2:
            raise ConfigError(f"validation model {preset} {pattern!r} is in the sample of fit {fit['id']} (widths "
                              f"{sorted(widths)}, single layers of {''.join(sorted(patterns - {'head'}))}): "
                              "validate only what the fit never ran")


def validation_table(rows: list[dict], summary: dict) -> str:
    lines = ["| class | widths | pattern | layers | train tok/s | predicted | error | prefill tok/s | predicted | "
             "error | decode ms/token | predicted | error |", "|---|---|---|---:|" + "---:|" * 9]
    for r in rows:
        e = r["error"]
        lines.append(f"| {r['layout_class']} | {r['preset']} | `{r['compact']}` | {r['n_layers']} | "
                     f"{r['train_tokens_per_s']:,.0f} | {r['train_tokens_per_s_predicted']:,.0f} | "
                     f"{e['train_tokens_per_s']:+.0%} | {r['prefill_tokens_per_s']:,.0f} | "
                     f"{r['prefill_tokens_per_s_predicted']:,.0f} | {e['prefill_tokens_per_s']:+.0%} | "
                     f"{r['decode_ms_per_token']:.2f} | {r['decode_ms_per_token_predicted']:.2f} | "
                     f"{e['decode_ms_per_token']:+.0%} |")
    lines += ["", "| class | measure | n | median abs error | worst |", "|---|---|---:|---:|---:|"]
    for name, measures in summary.items():
        for measure, s in measures.items():
            if s.get("n"):
                lines.append(f"| {name} | {measure} | {s['n']} | {s['median_abs']:.1%} | {s['worst_abs']:.1%} |")
    return "\n".join(lines)


def machine_state() -> dict[str, Any]:
    """How busy the machine was (this 2-core machine is shared: the timings are only as steady as it is idle)."""
    return {"time_utc": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "load_average_1_5_15": list(os.getloadavg()), "cpus": os.cpu_count()}


# ================================================================================================== loo
def gpu_observations(path: Path) -> list[dict[str, Any]]:
    """The runs of ``GPU_RUNS``, each with its measured tokens/s read from ``path``; where the record next to the
    figure stores the model's parameters, they must be those of the architecture the run is costed as."""
    from composer.accounting import analyze

    stored = read_json_file(path, "the stored GPU runs")
    runs = []
    for run in GPU_RUNS:
        value: Any = stored
        for step in run["path"][:-1]:
            value = value[step]
        record, value = value, value[run["path"][-1]]
        params = analyze(gpu_arch(run)).params
        if isinstance(record, dict) and "params" in record and record["params"] != params:
            raise ConfigError(f"{run['label']}: the stored run has {record['params']:,} parameters, the "
                              f"architecture it is costed as {params:,}")
        runs.append({**run, "tokens_per_s": float(value),
                     "config": "|".join(str(run.get(k)) for k in ("device", "pattern", "shape", "S", "window"))})
    return runs


def gpu_arch(run: dict) -> ArchConfig:
    """``llama-3.2-1b`` widths with the run's pattern, vocabulary (``composer train`` used the byte tokenizer's,
    320; gpu_check's steps the preset's) and W window."""
    arch = arch_for("llama-3.2-1b", run["pattern"]).replace(vocab_size=run.get("vocab", 128_256))
    return arch.replace(options={"W": {"window": run["window"]}}) if "window" in run else arch


def gpu_cases(runs: list[dict]) -> list[dict[str, Any]]:
    """One case per configuration (device, pattern, shape, S's kernels, W's window): its repeats are one
    measurement, their median tokens/s, not several cases (three (AM)x16 runs on the H200 counted three times
    before). ``group`` is what leave-one-out holds out together: the pattern at its shape, on both GPUs and with
    either S kernel, so that no run of a held-out pattern (its twin on the other GPU) stays in the fit."""
    cases: dict[str, dict[str, Any]] = {}
    for run in runs:
        case = cases.setdefault(run["config"], {
            **{k: run[k] for k in ("device", "pattern", "shape", "config")},
            **{k: run[k] for k in ("S", "window", "vocab") if k in run},
            "group": f"{run['pattern']} at {run['shape'][0]} x {run['shape'][1]}", "runs": [], "repeats": []})
        case["runs"].append(run["label"])
        case["repeats"].append(run["tokens_per_s"])
    for case in cases.values():
        case["tokens_per_s"] = statistics.median(case["repeats"])
        case["layout_class"] = layout_class(gpu_arch(case))
    return list(cases.values())


def gpu_rows(cases: list[dict], table, group: Callable[[str], str]) -> list:
    """One row per case: its step at the device's datasheet roofs, the optimizer's and the embedding gradient's
    assumed efficiencies known, no op term (the table's GPU training op cost is 0: launches overlap)."""
    rows = []
    for case in cases:
        device = table.device(case["device"])
        batch, seq = case["shape"]
        units = step_work(gpu_arch(case), "train", batch, seq, 2)
        known = {efficiency_name("train", key): 1 / device.efficiency_of("train", key).value
                 for key in ("optimizer", "embedding")}
        rows.append(design_row(units, "train", device.peak_flops.value, device.bandwidth.value, None,
                               batch * seq / case["tokens_per_s"], known=known, group=group, label=case["config"],
                               tags={"group": case["group"]}))
    return rows


def cmd_loo(args: argparse.Namespace, argv: list[str] | None) -> int:
    table = load_table(args.table)
    runs = gpu_observations(Path(args.results))
    cases = gpu_cases(runs)
    groups = list(dict.fromkeys(case["group"] for case in cases))
    log(f"loo: {len(runs)} stored GPU training runs, {len(cases)} configurations (repeats joined), {len(groups)} "
        f"patterns held out in turn (both GPUs' runs together), from {shown(args.results)}")
    report: dict[str, Any] = {
        "benchmark": "cost_model loo", "date": today(), "command": command_line(argv), "results": shown(args.results),
        "runs": [{k: run[k] for k in ("label", "device", "pattern", "shape", "path", "tokens_per_s", "config")}
                 for run in runs],
        "cases": [{k: v for k, v in case.items()} for case in cases], "held_out_groups": groups,
        "excluded": GPU_EXCLUDED, "groupings": {}, "error_definition": "predicted / measured tokens/s - 1",
        "method": "each pattern (at its shape: every run of it on either GPU, with either S kernel) held out "
                  "together and predicted from efficiencies fitted to the other patterns; one case per "
                  "configuration, its repeats' median; datasheet peaks, the assumed optimizer efficiency, no op term",
    }
    for name, group in GPU_GROUPINGS.items():
        rows = gpu_rows(cases, table, group)
        predictions: list[dict[str, Any]] = []
        for case, row in zip(cases, rows, strict=True):
            solution = fit_nonnegative([r for r in rows if r.tags["group"] != case["group"]])
            unseen = sorted(n for n, v in row.coefficients.items() if v > 0 and n not in solution)
            zero = sorted(n for n, v in row.coefficients.items() if v > 0 and solution.get(n) == 0)
            entry = {"config": case["config"], "group": case["group"], "layout_class": case["layout_class"],
                     "measured_tokens_per_s": case["tokens_per_s"], "repeats": len(case["repeats"])}
            if unseen or zero:
                entry["not_predicted"] = "; ".join(
                    [f"no other pattern has {', '.join(unseen)}"] * bool(unseen)
                    + [f"the other patterns attribute no time to {', '.join(zero)}"] * bool(zero))
            else:
                tokens = case["shape"][0] * case["shape"][1]
                entry["predicted_tokens_per_s"] = tokens / predicted_s(row, solution)
                entry["error"] = relative_error(entry["predicted_tokens_per_s"], case["tokens_per_s"])
            predictions.append(entry)
        full = fit_nonnegative(rows)
        efficiencies = {n.removeprefix("efficiency.train."): 1 / v for n, v in full.items() if v > 0}
        predicted = [p for p in predictions if "error" in p]
        report["groupings"][name] = {
            "constants_fitted": len(full), "efficiency_all_cases": efficiencies, "predictions": predictions,
            "errors": error_summary([p["error"] for p in predicted]),
            "errors_by_class": {c: error_summary([p["error"] for p in predicted if p["layout_class"] == c])
                                for c in LAYOUT_CLASSES},
            "errors_by_held_out_group": {g: error_summary([p["error"] for p in predicted if p["group"] == g])
                                         for g in groups},
            "not_predicted": sum("error" not in p for p in predictions)}
        s = report["groupings"][name]["errors"]
        log(f"  {name:<14} {len(full)} constants: median |error| {s['median_abs']:.1%}, worst {s['worst_abs']:.1%} "
            f"over {s['n']} configurations ({report['groupings'][name]['not_predicted']} not predictable)")
    out = make_output_dir(args.out)
    path = out / f"cost_model_gpu_loo-{report['date']}.json"
    atomic_write_json(path, report)
    if args.write_table:
        store_gpu_fit(table.raw, report, path)
        write_table(table.raw, args.table)
        log(f"  wrote the grouped GPU training efficiencies to {args.table or TABLE_PATH}")
    print(loo_table(report))
    log(f"results in {path}")
    return 0


def store_gpu_fit(raw: dict, report: dict, path: Path) -> None:
    """The grouped fit to every run, as each key's training (and, assumed alike, prefill) efficiency on both GPUs."""
    grouped = report["groupings"]["grouped"]["efficiency_all_cases"]
    source_id = f"gpu-fit-{report['date']}"
    where = shown(path)
    s = report["groupings"]["grouped"]["errors"]
    raw["sources"][source_id] = {
        "kind": "fitted", "date": report["date"], "command": report["command"], "results": where,
        "note": f"one efficiency for A, W, M and E ('dense'), one for the head, one for S, one for D, shared by H100 and "
                f"H200, fitted to the {len(report['cases'])} configurations ({len(report['runs'])} stored compiled "
                f"training runs, repeats joined) of {report['results']}; leave one pattern out (both GPUs' runs "
                f"of it together): median |error| {s['median_abs']:.1%}, worst "
                f"{s['worst_abs']:.1%}. S mixes the PyTorch path and mamba-ssm's Triton kernels; D is the "
                f"PyTorch path (fla's backward refuses Hopper with Triton 3.6)"}
    for device in ("h100", "h200"):
        for key in KEYS:
            value = grouped[key if key in ("S", "D", "head") else "dense"]
            raw["devices"][device]["efficiency"]["train"][key] = {"value": value, "source": source_id}
            raw["devices"][device]["efficiency"]["prefill"][key] = {"value": value, "source": "assumed-gpu-prefill"}
    used = {c["source"] for c in _constants(raw)}
    for stale in [s for s in raw["sources"] if s.startswith(("gpu-fit-", "placeholder-gpu")) and s not in used]:
        del raw["sources"][stale]


def loo_table(report: dict) -> str:
    names = list(report["groupings"])
    lines = ["| held out with | configuration | class | repeats | measured tok/s | "
             + " | ".join(f"{n}: predicted (error)" for n in names) + " |",
             "|---|---|---|---:|---:|" + "---:|" * len(names)]
    for i, case in enumerate(report["cases"]):
        cells = []
        for n in names:
            p = report["groupings"][n]["predictions"][i]
            cells.append(f"{p['predicted_tokens_per_s']:,.0f} ({p['error']:+.0%})" if "error" in p else "-")
        lines.append(f"| {case['group']} | {case['device']} {case['pattern']}{' S ' + case['S'] if 'S' in case else ''}"
                     f" | {case['layout_class']} | {len(case['repeats'])} | {case['tokens_per_s']:,.0f} | "
                     + " | ".join(cells) + " |")
    for n in names:
        g = report["groupings"][n]
        s = g["errors"]
        by_class = "; ".join(f"{c} median {v['median_abs']:.1%}, worst {v['worst_abs']:.1%} over {v['n']}"
                             for c, v in g["errors_by_class"].items() if v.get("n"))
        lines.append(f"\n{n} ({g['constants_fitted']} constants): median |error| {s['median_abs']:.1%}, worst "
                     f"{s['worst_abs']:.1%} over {s['n']} configurations ({by_class}); efficiencies fitted to all: "
                     + ", ".join(f"{k} {v:.3f}" for k, v in g["efficiency_all_cases"].items()))
    return "\n".join(lines)


# ================================================================================================= main
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    for name, help_text in (("fit", "fit the cpu constants to single-layer microbenchmarks"),
                            ("validate", "held-out whole models: measured vs predicted"),
                            ("loo", "the stored GPU runs, leave one configuration out")):
        p = sub.add_parser(name, help=help_text)
        p.add_argument("--table", type=Path, default=None, help=f"the constants table (default {TABLE_PATH})")
        p.add_argument("--out", type=Path, default=RESULTS, help="where the results JSON goes (benchmarks/results)")
        if name in ("fit", "validate"):
            p.add_argument("--device", default="cpu", help="cpu: the machine this runs on")
            p.add_argument("--quick", action="store_true", help="tiny widths, one step: the plumbing, not figures")
            p.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
            p.add_argument("--steps", type=int, default=5, help="timed steps per measurement (default 5)")
            p.add_argument("--clock", choices=tuple(CLOCKS), default="cpu",
                           help="what a timing reads: cpu (default), this process's CPU time, steady on a shared "
                                "machine; wall, the wall clock (then each timing waits for a quiet machine)")
            p.add_argument("--no-wait", action="store_true",
                           help="on the wall clock, time at once without waiting for a quiet machine")
    fit = sub.choices["fit"]
    fit.add_argument("--widths", type=lambda s: s.split(","), default=list(FIT_SHAPES),
                     help=f"presets whose widths the layers are timed at (default {','.join(FIT_SHAPES)})")
    fit.add_argument("--primitives", default=PRIMITIVES, help=f"primitives to fit (default {PRIMITIVES})")
    fit.add_argument("--provisional", action="store_true", help="mark the fitted constants provisional")
    fit.add_argument("--no-write", action="store_true", help="write the results JSON only, not the table")
    fit.add_argument("--note", default="", help="a sentence the fit's source records (e.g. how idle the machine was)")
    fit.add_argument("--precision", choices=("auto", "fp32", "bf16"), default="auto",
                     help="what training is timed in: auto (default) is bf16 autocast where this CPU has native "
                          "bf16, as composer search trains there, else fp32; validate trains in the fit's")
    sub.choices["validate"].add_argument(
        "--cases", choices=("validation", "development"), default="validation",
        help="validation (default): models whose widths and patterns the fit never ran; development: the "
             "2026-11-29 set at the fit's widths, for trying a change before the one validation run")
    loo = sub.choices["loo"]
    loo.add_argument("--results", type=Path, default=GPU_RESULTS, help="the stored GPU runs")
    loo.add_argument("--write-table", action="store_true", help="store the grouped fit as the GPU constants")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    CLOCK["name"] = getattr(args, "clock", "cpu")
    QUIET["enabled"] = CLOCK["name"] == "wall" and not (getattr(args, "quick", False)
                                                        or getattr(args, "no_wait", False))
    QUIET_LOG.clear()
    try:
        if getattr(args, "threads", 1) < 1 or getattr(args, "steps", 1) < 1:
            raise ConfigError("--threads and --steps must be positive")
        unknown = [s for s in getattr(args, "primitives", "") if s not in PRIMITIVES]
        if unknown:
            raise ConfigError(f"unknown primitive(s) {unknown}; fit knows {PRIMITIVES}")
        bad = [w for w in getattr(args, "widths", []) if w not in FIT_SHAPES]
        if bad and not getattr(args, "quick", False):
            raise ConfigError(f"no fit shapes for width(s) {bad}; choose from {', '.join(FIT_SHAPES)}")
        if getattr(args, "device", "cpu") not in load_table(args.table).devices:
            load_table(args.table).device(args.device)  # the one-line error that names the choices
        return {"fit": cmd_fit, "validate": cmd_validate, "loo": cmd_loo}[args.command](args, argv)
    except ComposerUsageError as err:
        print(f"cost_model.py {args.command}: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
