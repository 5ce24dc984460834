"""This CPU's roofs, measured: the peak FLOP/s and memory bandwidth the fit's roofline divides by (a GPU's come
from its datasheet).
"""

from __future__ import annotations

from typing import Any

import torch

from composer.costmodel.calibration.timing import timed
from composer.costmodel.calibration.units import FP32


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
