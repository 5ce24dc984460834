"""mamba_ssm's Triton kernels for Mamba-2, also from an install without its compiled CUDA extensions.

:class:`primitives.mamba2.Mamba2` uses two functions of mamba-ssm, both plain Python and Triton:
``mamba_ssm.ops.triton.ssd_combined.mamba_chunk_scan_combined`` (the SSD scan) and
``mamba_ssm.ops.triton.layernorm_gated.rmsnorm_fn`` (the gated RMSNorm). mamba-ssm 2.3.2's package
``__init__`` imports ``ops/selective_scan_interface.py``, which imports the compiled ``selective_scan_cuda``
unconditionally, and Python runs a package's ``__init__`` before any of its submodules. So an install built
without the CUDA extensions (``MAMBA_SKIP_CUDA_BUILD=TRUE``, as ``benchmarks/gpu_wheels.sh`` builds it for a
GPU machine that has no network and no time to compile them) fails at importing
``mamba_ssm.ops.triton.ssd_combined`` although nothing that module needs is compiled.

:func:`load_triton_kernels` imports the two functions the normal way first. When that fails with an error
naming one of the compiled extensions (:data:`COMPILED_EXTENSIONS`), it imports them once more with
``mamba_ssm``'s ``__init__`` skipped: ``importlib.util.find_spec`` locates the installed package without
running it, a module made from that spec (its ``__path__`` set, nothing executed) stands in for the package in
``sys.modules``, and the two submodules import under it (they import only sibling submodules, torch, triton
and einops). The stand-in stays registered only if that works; a later ``from mamba_ssm import Mamba2`` in the
process then still fails with an ImportError, as it would without it. Any other failure returns None, and
Mamba2 runs its PyTorch path, as it does without the package.

Verification: the fallback logic is tested on CPU only (``tests/primitives/test_mamba_ssm_triton.py``, with a
fake package); by hand, also on CPU, the real mamba-ssm 2.3.2.post1 wheel of gpu_wheels.sh with triton 3.6
installed loaded both functions this way. That kernels loaded this way match the PyTorch path, forward and
gradients, must be checked on the next GPU lease:
``tests/primitives/test_mamba2.py::test_cuda_kernels_match_the_torch_path``, which ``benchmarks/gpu_check.sh``
runs.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable

PACKAGE = "mamba_ssm"
# The compiled modules whose absence (or failure to load: built for another torch) the fallback works around:
# mamba_ssm's own, and causal_conv1d (its package and compiled ``causal_conv1d_cuda``), which older mamba-ssm
# releases imported at the top of the package too.
COMPILED_EXTENSIONS = ("selective_scan_cuda", "causal_conv1d")

TritonKernels = tuple[Callable, Callable]  # (mamba_chunk_scan_combined, rmsnorm_fn)


def load_triton_kernels() -> TritonKernels | None:
    """``(mamba_chunk_scan_combined, rmsnorm_fn)`` from mamba_ssm, through its package ``__init__`` or, where
    that fails on a missing compiled extension only, around it; None where they do not import."""
    try:
        return _import_kernels()
    except (ImportError, OSError) as err:  # OSError: a compiled module built against another torch/CUDA
        if not _names_compiled_extension(err):
            return None
    return _import_kernels_without_package_init()


def _names_compiled_extension(err: BaseException) -> bool:
    """Whether an import error is about one of :data:`COMPILED_EXTENSIONS`: the missing module's name, or the
    message (a ``.so`` that fails to load, e.g. on an undefined symbol, names its file)."""
    text = f"{getattr(err, 'name', None) or ''} {err}"
    return any(ext in text for ext in COMPILED_EXTENSIONS)


def _import_kernels() -> TritonKernels:
    from mamba_ssm.ops.triton.layernorm_gated import rmsnorm_fn
    from mamba_ssm.ops.triton.ssd_combined import mamba_chunk_scan_combined

    return mamba_chunk_scan_combined, rmsnorm_fn


def _import_kernels_without_package_init() -> TritonKernels | None:
    try:
        spec = importlib.util.find_spec(PACKAGE)  # a top-level name: finds the package, runs nothing
    except (ImportError, ValueError):
        return None
    if spec is None or spec.submodule_search_locations is None:
        return None
    stand_in = PACKAGE not in sys.modules  # else someone else's stand-in (or the package) is already there
    if stand_in:
        # Submodules the failed __init__ imported before it stopped are still registered, orphaned: drop them,
        # so that every mamba_ssm module in sys.modules hangs off the stand-in (``mamba_ssm.ops`` and so on).
        _forget_package()
        sys.modules[PACKAGE] = importlib.util.module_from_spec(spec)
    try:
        return _import_kernels()
    except (ImportError, OSError):
        if stand_in:
            _forget_package()
        return None


def _forget_package() -> None:
    for name in [n for n in sys.modules if n == PACKAGE or n.startswith(PACKAGE + ".")]:
        del sys.modules[name]
