"""Preemption in a subprocess, for the tests of training and hybridization: start a ``composer`` command, send it
SIGTERM once it is training, and read which steps each segment of the (resumed) run trained."""

from __future__ import annotations

import csv
import signal
import subprocess
import time
from pathlib import Path


def sigterm_while_training(argv: list[str], out: Path, env: dict, settle_s: float = 2.0) -> tuple[int, str]:
    """Run ``argv`` (writing under ``out``), SIGTERM it ``settle_s`` after its first metrics appear; returns its exit
    status and stderr."""
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.time() + 120
    started = out / "logs" / "version_0" / "metrics.csv"
    while time.time() < deadline and process.poll() is None and not started.exists():
        time.sleep(0.2)  # wait until training has started
    time.sleep(settle_s)
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=120)
    return process.returncode, err


def checkpoint_step(path: Path) -> int:
    """The optimizer step a ``step-00000012.ckpt`` holds."""
    return int(path.name.split("-")[1].split(".")[0])


def trained_steps(out: Path) -> list[list[int]]:
    """Per segment of the run (``logs/version_0``, ``version_1``, ...), the steps whose training loss it logged.
    Lightning numbers them from 0, so a segment that resumed from the checkpoint of step ``k`` (``k`` optimizer
    steps done) logs ``k, k + 1, ...``; a run that restarted from scratch would log 0 again."""
    segments = sorted((out / "logs").glob("version_*/metrics.csv"), key=lambda p: int(p.parent.name.split("_")[1]))
    steps = []
    for metrics in segments:
        with open(metrics) as f:
            steps.append([int(row["step"]) for row in csv.DictReader(f) if row.get("train/loss")])
    return steps
