"""``benchmarks/gpu_check.sh`` refuses a machine without CUDA at once, with one clear line and exit status 2.

What it checks on a GPU is covered on CPU by tests/primitives/test_compile.py (every primitive compiled against
eager) and the FSDP2 tests of tests/composer/training; the script repeats them in bf16 on CUDA."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(torch.cuda.is_available() or shutil.which("nvidia-smi") is not None, reason="a GPU machine")
def test_without_cuda_it_stops_with_one_line_and_exit_2(tmp_path):
    result = subprocess.run(["bash", str(ROOT / "benchmarks" / "gpu_check.sh")], capture_output=True, text=True,
                            env={**os.environ, "OUT": str(tmp_path)}, timeout=60)
    assert result.returncode == 2
    assert "no CUDA device: this script is for GPU machines" in result.stderr + result.stdout
    assert "Traceback" not in result.stderr


def test_the_script_parses():
    assert subprocess.run(["bash", "-n", str(ROOT / "benchmarks" / "gpu_check.sh")], timeout=60).returncode == 0


def test_the_cuda_tests_it_runs_include_marks_named_at_module_level(tmp_path, load_benchmark):
    """The fla tests skip through a module-level ``needs_fla = pytest.mark.skipif(...cuda...)``; a search for
    ``skipif`` at the decorator alone missed them, so the H200 run checked no D kernel (2026-11-26, run 2)."""
    gpu_check = load_benchmark("gpu_check")
    (tmp_path / "test_x.py").write_text(
        "import pytest, torch\n"
        "needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason='CUDA')\n"
        "other = pytest.mark.slow\n"
        "@needs_gpu\ndef test_named(): pass\n"
        "@pytest.mark.skipif(not torch.cuda.is_available(), reason='x')\ndef test_inline(): pass\n"
        "@other\ndef test_unrelated(): pass\n"
        "def test_plain(): pass\n")
    assert [node.rsplit("::", 1)[1] for node in gpu_check.cuda_test_ids(tmp_path)] == ["test_named", "test_inline"]
    assert ("tests/primitives/test_gated_deltanet.py::test_fla_kernel_forward_matches_torch_path"
            in gpu_check.cuda_test_ids(ROOT / "tests"))
