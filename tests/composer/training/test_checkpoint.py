"""Atomic checkpoints under a real kill (README: "a kill mid-save leaves the previous one usable"): a process
SIGKILLed half-way through writing a checkpoint leaves the previous checkpoint whole, and the newest checkpoint
that ``--resume`` finds is that one, not the half-written file."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import torch

from composer.training.checkpoint import (
    checkpoint_problem,
    latest_checkpoint,
    list_checkpoints,
    resumable_checkpoint,
)

# A child process saves step 1, then step 2 through AtomicCheckpoint.save. Its trainer stands in for Lightning's:
# save_checkpoint writes a real torch checkpoint to the path it is given, 64 KiB at a time with a pause between
# writes (a slow disk), so the parent's SIGKILL lands in the middle of step 2's file, whatever the machine's speed.
CHILD = r"""
import io, sys, time
from pathlib import Path
from types import SimpleNamespace

import torch

from composer.training.checkpoint import AtomicCheckpoint

class Trainer:
    is_global_zero = True
    strategy = SimpleNamespace(barrier=lambda name=None: None)

    def __init__(self, step, payload):
        self.global_step, self.payload = step, payload

    def save_checkpoint(self, path, weights_only=False):
        buffer = io.BytesIO()
        torch.save({"global_step": self.global_step, "state_dict": {"w": self.payload}}, buffer)
        data = buffer.getvalue()
        with open(path, "wb") as f:
            for start in range(0, len(data), 1 << 16):
                f.write(data[start:start + (1 << 16)])
                f.flush()
                if self.global_step == 2:
                    time.sleep(0.05)

callback = AtomicCheckpoint(Path(sys.argv[1]), every_n_steps=1, keep=2)
callback.save(Trainer(1, torch.arange(1000.0)))
print("saved 1", flush=True)
callback.save(Trainer(2, torch.ones(1 << 20)))  # 4 MiB: 64 writes, over 3 s
print("saved 2", flush=True)
"""


def test_a_checkpoint_killed_mid_write_leaves_the_previous_one_whole_and_newest(tmp_path):
    directory = tmp_path / "checkpoints"
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(directory)], stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert child.stdout.readline().strip() == "saved 1"
    first = directory / "step-00000001.ckpt"
    deadline = time.time() + 60

    def writing() -> list[Path]:  # any file of step 2 begun, under whatever name the save writes it
        return [p for p in directory.iterdir() if p != first and p.stat().st_size > 0]

    while time.time() < deadline and not writing() and child.poll() is None:
        time.sleep(0.01)
    partial = writing()
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=30)
    child.stdout.close()
    assert child.returncode == -signal.SIGKILL and partial, "the kill did not land while step 2 was being written"
    assert all(checkpoint_problem(p) is not None for p in partial), "step 2 was complete: the kill came too late"

    assert list_checkpoints(directory) == [first], [p.name for p in directory.iterdir()]
    assert latest_checkpoint(directory) == first == resumable_checkpoint(directory, warn=lambda _: None)
    assert checkpoint_problem(first) is None
    state = torch.load(first, weights_only=False)
    assert state["global_step"] == 1 and torch.equal(state["state_dict"]["w"], torch.arange(1000.0))
