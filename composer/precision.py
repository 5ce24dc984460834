"""Which precision ``auto`` means on this machine: bf16 where the hardware computes it natively, fp32 elsewhere.

bf16 autocast only pays off where the hardware has bf16 arithmetic: CUDA GPUs that report it, and CPUs with
AVX-512 BF16 or AMX (x86) or the BF16 extension (Arm). Elsewhere PyTorch emulates bf16 and runs slower than fp32,
so ``auto`` must detect the instruction set rather than guess from the vendor. ``torch.ops.mkldnn`` says "bf16
supported" on any AVX-512 CPU (emulated), so the CPU flags are read from the operating system instead.

Measured on 2 cores of a Xeon with AVX-512 BF16 (docs/mad.md, benchmarks/README.md): a MAD ``cpu`` candidate
scores 1.2x faster under bf16 autocast, with the same ranking of patterns.
"""

from __future__ import annotations

import functools
import platform
import subprocess
from pathlib import Path

import torch

# /proc/cpuinfo flags of native bf16 arithmetic: AVX-512 BF16 and AMX-BF16 (x86), the Armv8.6 BF16 extension.
_BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16", "bf16"})


def cpu_flags(cpuinfo: str | None = None) -> frozenset[str]:
    """Instruction-set flags of the CPU as Linux reports them (``flags`` on x86, ``Features`` on Arm)."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(errors="replace")
        except OSError:
            return frozenset()
    flags: set[str] = set()
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip().lower() in ("flags", "features"):
            flags.update(value.split())
    return frozenset(flags)


@functools.cache
def cpu_has_native_bf16() -> bool:
    """True when this CPU computes bf16 in hardware (AVX-512 BF16, AMX-BF16 or Arm BF16)."""
    if platform.system() == "Darwin":  # Apple silicon from M2 on reports FEAT_BF16
        try:
            out = subprocess.run(["sysctl", "-n", "hw.optional.arm.FEAT_BF16"], capture_output=True, text=True,
                                 timeout=5)
            return out.stdout.strip() == "1"
        except (OSError, subprocess.SubprocessError):
            return False
    return bool(cpu_flags() & _BF16_FLAGS)


def device_has_native_bf16(device: torch.device | str) -> bool:
    """Native bf16 on ``device`` (a CUDA GPU that reports it, or a CPU with the instructions)."""
    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.is_available() and torch.cuda.is_bf16_supported()
    if device.type == "cpu":
        return cpu_has_native_bf16()
    return False


def describe_bf16_support() -> str:
    """One line for logs: why ``auto`` chose what it chose on this machine."""
    if torch.cuda.is_available():
        return f"CUDA {'with' if torch.cuda.is_bf16_supported() else 'without'} bf16"
    native = sorted(cpu_flags() & _BF16_FLAGS)
    if native:
        return f"CPU with native bf16 ({', '.join(native)})"
    if cpu_has_native_bf16():
        return "CPU with native bf16 (FEAT_BF16)"
    return "CPU without native bf16 (fp32 is faster there)"
