"""Real two-process DDP (CPU, gloo): ranks see disjoint data and resume exactly, packed and streaming."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
SCRIPT = Path(__file__).with_name("ddp_resume_script.py")


def test_ddp_sharding_and_resume(tmp_path):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
           "OMP_NUM_THREADS": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", str(SCRIPT), str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    by_kind = json.loads(result.stdout.strip().splitlines()[-1])
    assert set(by_kind) == {"packed", "streaming"}
    for kind, checks in by_kind.items():
        assert checks["resume_exact"] == [True, True], kind
        assert checks["train_rows"] == checks["train_unique"] == 2 * 6 * 2, kind  # ranks x steps x micro-batch
        assert checks["val_rows"] == checks["val_unique"] > 0, kind
        assert checks["state_kind"] == ("packed" if kind == "packed" else "streaming-ranks")
