"""Which precision ``auto`` means on this machine: bf16 where the hardware computes it natively, fp32 elsewhere.

bf16 autocast only pays off where the hardware has bf16 arithmetic: CUDA GPUs that report it, and CPUs with
AVX-512 BF16 or AMX (x86) or the BF16 extension (Arm). Elsewhere PyTorch emulates bf16 and runs slower than fp32,
so ``auto`` must detect the instruction set rather than guess from the vendor. ``torch.ops.mkldnn`` says "bf16
supported" on any AVX-512 CPU (emulated), so the CPU flags are read from the operating system instead.

Measured on 2 cores of a Xeon with AVX-512 BF16 (docs/mad.md, benchmarks/README.md): a MAD ``cpu`` candidate
scores 1.2x faster under bf16 autocast, with the same ranking of patterns.

It also reads the spellings of a precision and of a weights dtype that the commands take (issue 49, "one name,
one meaning": the search said ``fp32|bf16``, training Lightning's ``32-true|bf16-mixed``, import ``float32``):
:func:`parse_precision` and :func:`parse_dtype`, each the one place that knows every spelling. And what else a
command must know of this machine before it starts: which device ``--device`` names and whether it is here
(:func:`resolve_device`), and how much memory is free on it (:func:`available_memory_bytes`).
"""

from __future__ import annotations

import functools
import platform
import subprocess
from collections.abc import Iterable
from pathlib import Path

import torch

from composer.errors import ConfigError

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


# A training precision: the project's names (issue 49) and what each means, then Lightning's names, which composer
# train hands to Lightning and which stay accepted. bf16 is autocast over fp32 weights (Lightning's bf16-mixed),
# bf16-true keeps the weights themselves in bf16.
PRECISION_NAMES = {"auto": "auto", "fp32": "32-true", "bf16": "bf16-mixed", "bf16-true": "bf16-true"}
PRECISION_MEANINGS = {"auto": "bf16 where the device has it natively, else fp32",
                      "bf16": "bf16 autocast, fp32 weights", "bf16-true": "bf16 weights"}
LIGHTNING_PRECISIONS = ("32-true", "bf16-mixed", "bf16-true", "16-mixed")
TRAIN_PRECISIONS = ("auto", *LIGHTNING_PRECISIONS)  # what composer train accepts, by Lightning's names
# the precisions that keep fp32 weights and autocast at most: what composer search's evaluators train candidates in
AUTOCAST_PRECISIONS = ("auto", "32-true", "bf16-mixed")


def parse_precision(value: object, allowed: Iterable[str] = TRAIN_PRECISIONS, flag: str = "--precision") -> str:
    """Lightning's name for any spelling of a precision (``fp32`` -> ``32-true``, ``bf16`` -> ``bf16-mixed``, a
    Lightning name as it is), among ``allowed`` (Lightning's names). Anything else is one line that lists the
    spellings accepted here."""
    allowed = tuple(allowed)
    text = str(value).strip().lower()
    name = PRECISION_NAMES.get(text, text)
    if name in allowed:
        return name
    ours = [short + (f" ({PRECISION_MEANINGS[short]})" if short in PRECISION_MEANINGS else "")
            for short, long in PRECISION_NAMES.items() if long in allowed]
    theirs = [long for long in LIGHTNING_PRECISIONS if long in allowed and long != "bf16-true"]
    lightning = f"; Lightning's {', '.join(theirs)} also work" if theirs else ""
    raise ConfigError(f"{flag} must be {', '.join(ours)}{lightning}; got {value!r}")


def short_precision(value: object, allowed: Iterable[str] = TRAIN_PRECISIONS, flag: str = "--precision") -> str:
    """The project's name for any spelling of a precision (``32-true`` -> ``fp32``; ``16-mixed``, which has none,
    as it is): what composer search records and names its studies by."""
    name = parse_precision(value, allowed, flag)
    return next((short for short, long in PRECISION_NAMES.items() if long == name), name)


# A dtype of weights or an inference cache (composer bench-inference --precision, composer import --precision):
# the short
# names, with torch's names accepted.
DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}


def parse_dtype(value: object, allowed: Iterable[str] = tuple(DTYPES), flag: str = "--precision") -> str:
    """The short name (``fp32``, ``bf16``, ``fp16``) of a dtype spelled either way (``bfloat16`` -> ``bf16``), among
    ``allowed``; anything else is one line that lists the spellings."""
    allowed = tuple(allowed)
    text = str(value).strip().lower().removeprefix("torch.")
    name = next((short for short, long in DTYPES.items() if text == long), text)
    if name in allowed:
        return name
    raise ConfigError(f"{flag} must be {', '.join(allowed)} (or {', '.join(DTYPES[short] for short in allowed)}); "
                      f"got {value!r}")


def torch_dtype(value: object) -> torch.dtype:
    """The torch dtype of any spelling :func:`parse_dtype` accepts."""
    return getattr(torch, DTYPES[parse_dtype(value)])


# -- the device a command runs on, and its free memory ---------------------------------------------------------------
DEVICE_SPELLINGS = "auto, cpu, cuda (or gpu), cuda:N or mps"


def resolve_device(name: object, flag: str = "--device") -> torch.device:
    """The torch device ``name`` means on this machine, for every command that takes ``--device`` (one vocabulary):
    ``auto`` is the GPU where CUDA has one, else the CPU; ``gpu`` is Lightning's spelling of ``cuda``; ``cuda:N``
    one GPU of several; ``mps`` Apple's GPU. A device this machine does not have is a one-line usage error before
    anything starts (issue 69: ``train --device cuda`` on a machine without CUDA was a 30-line Lightning traceback
    and an empty --out, while ``generate`` refused it in one line)."""
    text = str(name).strip().lower()
    if text == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device("cuda" if text == "gpu" else text)
    except (RuntimeError, ValueError, TypeError):
        device = None
    if device is None or device.type not in ("cpu", "cuda", "mps"):
        raise ConfigError(f"{flag} must be {DEVICE_SPELLINGS}; got {name!r}")
    if device.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            raise ConfigError(f"{flag} {name}, but CUDA has no GPU on this machine; use {flag} cpu (or auto)")
        if device.index is not None and device.index >= count:
            raise ConfigError(f"{flag} {name}, but this machine has {count} CUDA GPU{'s' * (count != 1)} "
                              f"(cuda:0 to cuda:{count - 1}); pick one of them")
    if device.type == "mps" and not torch.backends.mps.is_available():
        raise ConfigError(f"{flag} {name}, but MPS (Apple's GPU) is not available on this machine; use {flag} cpu "
                          "(or auto)")
    return device


def available_memory_bytes(device: torch.device | str) -> int | None:
    """Bytes a command can still allocate on ``device``: the GPU's free memory, or the CPU's available memory
    (Linux's MemAvailable: free memory plus the caches the kernel can drop, within the container's memory limit
    where there is one). None where this cannot be read (MPS, a system without /proc/meminfo); a size check then
    lets the command run."""
    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[0]
    if device.type != "cpu":
        return None
    try:
        fields = dict(line.split(":", 1) for line in Path("/proc/meminfo").read_text().splitlines() if ":" in line)
        available = int(fields["MemAvailable"].split()[0]) * 1024
    except (OSError, KeyError, ValueError):
        return None
    try:  # a cgroup v2 limit (a container's) below the machine's memory
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        if limit != "max":
            used = int(Path("/sys/fs/cgroup/memory.current").read_text())
            available = min(available, max(0, int(limit) - used))
    except (OSError, ValueError):
        pass
    return available
