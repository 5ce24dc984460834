"""The mamba_ssm loader's fallback logic (primitives/mamba_ssm_triton.py), on a fake installed package.

The fake has the real layout: a package ``__init__`` that imports ``ops/selective_scan_interface.py``, which
imports a Triton submodule (``ops/triton/layer_norm.py``) and then the compiled ``selective_scan_cuda``
(absent, as in a wheel built with MAMBA_SKIP_CUDA_BUILD=TRUE), and the two Triton submodules Mamba2 needs.
Whether the real kernels loaded this way compute the right thing is for the CUDA test in test_mamba2.py, on a
GPU.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from primitives.mamba_ssm_triton import PACKAGE, load_triton_kernels

SSD = "def mamba_chunk_scan_combined(*args, **kwargs):\n    return 'fake ssd'\n"
NORM = "def rmsnorm_fn(*args, **kwargs):\n    return 'fake norm'\n"
# counts its runs in a file beside it, then fails the way mamba-ssm 2.3.2's does without its CUDA build
INIT_COUNTING = "open(__file__ + '.runs', 'a').write('ran\\n')\n__version__ = 'fake'\n"
INIT_NEEDS_CUDA_BUILD = INIT_COUNTING + "from mamba_ssm.ops import selective_scan_interface\n"
SCAN_INTERFACE = "from mamba_ssm.ops.triton import layer_norm\nimport selective_scan_cuda\n"


def package_modules() -> dict:
    return {name: module for name, module in sys.modules.items()
            if name == PACKAGE or name.startswith(PACKAGE + ".")}


@pytest.fixture
def fake_mamba(tmp_path, monkeypatch):
    """Writes a fake ``mamba_ssm`` under tmp_path, first on sys.path, and returns its folder. Any mamba_ssm
    modules of this process (a real install on a GPU machine) are set aside and put back afterwards."""
    saved = package_modules()
    for name in saved:
        del sys.modules[name]

    def write(init=INIT_NEEDS_CUDA_BUILD, ssd=SSD, norm=NORM, scan_interface=SCAN_INTERFACE):
        root = tmp_path / PACKAGE
        for rel, text in {
            "__init__.py": init,
            "ops/__init__.py": "",
            "ops/selective_scan_interface.py": scan_interface,
            "ops/triton/__init__.py": "",
            "ops/triton/layer_norm.py": "",
            "ops/triton/ssd_combined.py": ssd,
            "ops/triton/layernorm_gated.py": norm,
        }.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(text)
        monkeypatch.syspath_prepend(str(tmp_path))
        return root

    yield write
    for name in package_modules():
        del sys.modules[name]
    sys.modules.update(saved)


def init_runs(root) -> int:
    runs = root / "__init__.py.runs"
    return len(runs.read_text().splitlines()) if runs.exists() else 0


def test_kernels_load_around_an_init_that_needs_the_cuda_build(fake_mamba):
    root = fake_mamba()
    kernels = load_triton_kernels()
    assert kernels is not None
    ssd, norm = kernels
    assert (ssd(), norm()) == ("fake ssd", "fake norm")
    assert init_runs(root) == 1  # the normal import's try only: the fallback did not run __init__ again
    package = sys.modules[PACKAGE]
    assert not hasattr(package, "__version__")  # the stand-in, not an executed __init__
    assert list(package.__path__) == [str(root)]
    # one consistent module tree under the stand-in (the failed __init__'s orphaned submodules were dropped)
    assert package.ops.triton.ssd_combined.mamba_chunk_scan_combined is ssd
    assert package.ops.triton.layernorm_gated.rmsnorm_fn is norm


def test_a_compiled_extension_built_for_another_torch_also_falls_back(fake_mamba):
    so_error = (
        "raise ImportError('/site/selective_scan_cuda.cpython-312-x86_64-linux-gnu.so: undefined symbol: "
        "_ZN3c104cuda9SetDeviceEi')\n"
    )
    fake_mamba(init=INIT_COUNTING + so_error)
    assert load_triton_kernels() is not None


def test_a_working_package_imports_the_normal_way(fake_mamba):
    root = fake_mamba(init=INIT_COUNTING)
    ssd, norm = load_triton_kernels()
    assert (ssd(), norm()) == ("fake ssd", "fake norm")
    assert init_runs(root) == 1
    assert sys.modules[PACKAGE].__version__ == "fake"  # the real package object, its __init__ executed


@pytest.mark.parametrize("broken", ["ssd", "norm"])
def test_submodules_that_fail_too_give_none_and_leave_no_stand_in(fake_mamba, broken):
    """No Triton (or a broken kernel module): the fallback fails too; Mamba2 then runs its PyTorch path."""
    no_triton = "import triton_is_not_installed_here\n"
    fake_mamba(**{broken: no_triton})
    assert load_triton_kernels() is None
    assert package_modules() == {}  # a later `import mamba_ssm` fails as before, finds no bare module


def test_an_init_failing_for_another_reason_is_not_worked_around(fake_mamba):
    root = fake_mamba(init=INIT_COUNTING + "import einops_is_not_installed_here\n")
    assert load_triton_kernels() is None
    assert init_runs(root) == 1
    assert PACKAGE not in sys.modules


def test_no_package_gives_none(fake_mamba, monkeypatch):
    # nothing written, and a real install (on a GPU machine) taken off the path
    monkeypatch.setattr(sys, "path", [p for p in sys.path if not (Path(p or ".") / PACKAGE).exists()])
    assert load_triton_kernels() is None
