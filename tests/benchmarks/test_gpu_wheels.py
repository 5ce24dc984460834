"""benchmarks/gpu_wheels.sh: what can be checked without a network (the download itself needs PyPI)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "gpu_wheels.sh"


def test_the_script_parses():
    assert subprocess.run(["bash", "-n", str(SCRIPT)], timeout=60).returncode == 0


def test_offline_it_fails_with_one_line_and_writes_nothing(tmp_path):
    # every HTTPS request through a proxy on a closed port: how a machine without network looks to urllib
    proxy = "http://127.0.0.1:9"
    env = {**os.environ, "WHEELS": str(tmp_path / "wheels"), "https_proxy": proxy, "HTTPS_PROXY": proxy,
           "no_proxy": "", "NO_PROXY": ""}
    result = subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    assert result.stdout == ""
    assert len(result.stderr.splitlines()) == 1
    assert result.stderr.startswith("gpu_wheels: cannot reach PyPI (")
    assert not (tmp_path / "wheels").exists()
