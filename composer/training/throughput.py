"""Tokens/s, MFU and peak memory of a training run, measured per optimizer step.

A step is timed from the start of its first micro-batch to the end of its last (forward, backward, gradient
clipping, optimizer); data fetching, validation and checkpointing fall outside, so tokens/s is the training
engine's own speed. MFU
uses the architecture's analytic FLOPs per token (``composer.accounting``) against the device's dense peak from
Lightning's table of known devices (e.g. H100 SXM bf16: 989.4 TFLOP/s), or from :data:`FALLBACK_PEAK_BF16` for the
chips that table misses; it is omitted where the peak is unknown (CPUs).
"""

from __future__ import annotations

import resource
import sys
import time

import lightning as L
import torch
from lightning.fabric.utilities.throughput import get_available_flops

_PRECISION_DTYPES = {"bf16": torch.bfloat16, "16": torch.float16}
# Dense bf16/fp16 peaks (FLOP/s) of chips Lightning's table misses: it keys the H200 as "h200 sxm1", which the
# name "NVIDIA H200" never matches, so a run on an H200 had no MFU (seen with Lightning 2.6.6). NVIDIA's
# datasheet: H200 SXM 989.4 TFLOP/s dense bf16, as the H100 SXM.
FALLBACK_PEAK_BF16 = {"h200": 989.4e12}


def peak_flops(device: torch.device, dtype: torch.dtype) -> float | None:
    """The device's dense peak for ``dtype``: Lightning's table, else :data:`FALLBACK_PEAK_BF16`; None on CPUs."""
    if device.type == "cpu":
        return None
    peak = get_available_flops(device, dtype)
    if peak is None and device.type == "cuda" and dtype in (torch.bfloat16, torch.float16):
        peak = fallback_peak(torch.cuda.get_device_name(device))
    return peak


def fallback_peak(device_name: str, table: dict[str, float] = FALLBACK_PEAK_BF16) -> float | None:
    """The dense bf16 peak of the first chip in ``table`` that ``device_name`` (e.g. "NVIDIA H200") names."""
    name = device_name.lower()
    return next((flops for chip, flops in table.items() if chip in name), None)


def compute_dtype(precision: str) -> torch.dtype:
    """The matmul dtype a Lightning precision string trains in."""
    for prefix, dtype in _PRECISION_DTYPES.items():
        if str(precision).startswith(prefix):
            return dtype
    return torch.float32


def peak_memory_bytes(device: torch.device) -> int:
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device)
    usage = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux, bytes on macOS
    return usage if sys.platform == "darwin" else usage * 1024


class ThroughputMonitor(L.Callback):
    """Logs ``perf/tokens_per_s`` (global), ``perf/tokens_per_s_per_device``, ``perf/mfu`` and peak memory."""

    def __init__(self, tokens_per_step: int, flops_per_token: int, precision: str, smoothing: float = 0.9):
        self.tokens_per_step = tokens_per_step
        self.flops_per_token = flops_per_token
        self.precision = precision
        self.smoothing = smoothing
        self.peak_flops: float | None = None
        self.train_time = 0.0  # seconds in training steps, excluding the first (warm-up / compilation)
        self.timed_steps = 0
        self.steps = 0
        self.tokens_per_s_ema: float | None = None
        self._step_started: float | None = None
        self._step = -1

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        device = trainer.strategy.root_device
        self.peak_flops = peak_flops(device, compute_dtype(self.precision))
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
        self._step_started = None

    def _sync(self, trainer: L.Trainer) -> None:
        if trainer.strategy.root_device.type == "cuda":
            torch.cuda.synchronize()

    def on_train_batch_start(self, trainer: L.Trainer, *_) -> None:
        if self._step_started is None:  # first micro-batch of an optimizer step
            self._sync(trainer)
            self._step_started = time.perf_counter()
            self._step = trainer.global_step

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, *_) -> None:
        if self._step_started is None or trainer.global_step == self._step:  # still accumulating
            return
        self._sync(trainer)
        elapsed = time.perf_counter() - self._step_started
        self._step_started = None
        self.steps += 1
        if self.steps > 1 or trainer.max_steps == 1:  # the first step pays for warm-up and compilation
            self.train_time += elapsed
            self.timed_steps += 1
        rate = self.tokens_per_step / max(elapsed, 1e-9)
        ema = self.tokens_per_s_ema
        self.tokens_per_s_ema = rate if ema is None else self.smoothing * ema + (1 - self.smoothing) * rate
        metrics = self.metrics(trainer.world_size, rate)
        pl_module.log("tok/s", self.tokens_per_s_ema, prog_bar=True, logger=False, rank_zero_only=True)
        pl_module.log_dict({f"perf/{k}": float(v) for k, v in metrics.items()}, rank_zero_only=True)

    def metrics(self, world_size: int, tokens_per_s: float | None = None) -> dict[str, float]:
        """Throughput figures; without ``tokens_per_s``, the run's average over timed steps."""
        if tokens_per_s is None:
            if not self.timed_steps:
                return {}
            tokens_per_s = self.timed_steps * self.tokens_per_step / self.train_time
        per_device = tokens_per_s / world_size
        out = {"tokens_per_s": tokens_per_s, "tokens_per_s_per_device": per_device}
        if self.peak_flops:
            out["mfu"] = per_device * self.flops_per_token / self.peak_flops
        return out
