"""``benchmarks/gpu_check.sh`` refuses a machine without CUDA at once, with one clear line and exit status 2.

What it checks on a GPU is covered on CPU by tests/primitives/test_compile.py (every primitive compiled against
eager) and the FSDP2 tests of tests/composer/training; the script repeats them in bf16 on CUDA."""

from __future__ import annotations

import argparse
import json
import os
import re
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


def test_the_report_asks_only_for_the_primitives_it_was_asked_to_step(tmp_path, load_benchmark, capsys):
    """The H100 run asked for S and D alone (STEPS_PRIMITIVES=SD STEPS_ALL_SIX=0); the report failed it for
    'not reached: all six, A, W, M, E'. It now compares against the primitives the steps part was given."""
    gpu_check = load_benchmark("gpu_check")
    record = {"losses": [12.2, 12.1], "tokens_per_s": 1.0, "kernels": ["S:torch"], "graph_breaks": 0}
    row = {"primitive": "S", "pattern": "SM", "status": "pass", "eager": record, "compiled": record,
           "max_loss_rel_diff": 0.0, "compared_steps": 2, "speedup": 1.0}
    steps = {"precision": "bf16 autocast", "requested": ["S"], "rows": [row]}
    (tmp_path / "steps.json").write_text(json.dumps(steps))
    gpu_check.cmd_report(argparse.Namespace(dir=str(tmp_path), mfu=""))
    table = json.loads((tmp_path / "gpu_check.json").read_text())["table"]
    assert [r["check"] for r in table if r["part"] == "b"] == ["S (SM) eager vs compiled, bf16"]

    del steps["requested"]  # a steps.json written before the field existed asked for every primitive
    (tmp_path / "steps.json").write_text(json.dumps(steps))
    gpu_check.cmd_report(argparse.Namespace(dir=str(tmp_path), mfu=""))
    table = json.loads((tmp_path / "gpu_check.json").read_text())["table"]
    assert "not reached: all six, A, W, M, E, D" in [r["check"] for r in table]


def _limit_function() -> str:
    script = (ROOT / "benchmarks" / "gpu_check.sh").read_text()
    return re.search(r"^limit\(\) \{\n.*?^\}\n", script, re.S | re.M).group(0)


@pytest.mark.parametrize(("left", "reserve", "floor", "expected"), [
    (600, 100, "", 150),  # plenty of time: the cap
    (200, 100, "", 100),  # what the reserve leaves
    (100, 100, "", 20),  # nothing left: the default floor
    (100, 100, "75", 75),  # the CUDA tests' own floor (57 s on a fresh H100; 20 s ran none)
])
def test_a_part_gets_its_cap_what_the_reserve_leaves_or_its_floor(left, reserve, floor, expected):
    program = f"{_limit_function()}DEADLINE=$((SECONDS + {left})); limit 150 {reserve} {floor}"
    assert subprocess.run(["bash", "-c", program], capture_output=True, text=True,
                          timeout=30).stdout.strip() == str(expected)


def test_the_cuda_tests_have_a_floor_and_the_mfu_runs_a_stable_rate():
    """On the H100 the MFU part's (DMAM)x4 diverged at train's defaults (lr 3e-3, a 1-step warmup) and the
    divergence guard stopped it: a speed check sets a rate and a warmup that every pattern survives."""
    script = (ROOT / "benchmarks" / "gpu_check.sh").read_text()
    assert re.search(r"part cuda-tests \"\$\(limit 150 .*\) 75\)\"", script)
    assert '--lr "${MFU_LR:-0.001}" --warmup "${MFU_WARMUP:-5}"' in script
