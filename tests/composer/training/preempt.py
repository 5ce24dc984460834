"""Preemption, for the tests of training, hybridization and the search: start a ``composer`` command in a
subprocess and send it SIGTERM once it is training, or signal this process from inside a run
(``signal_at_step``), and read which steps each segment of the (resumed) run trained."""

from __future__ import annotations

import csv
import os
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


def signal_at_step(monkeypatch, step: int = 1, signum: int = signal.SIGTERM) -> None:
    """Every run that ``composer.training.run.train`` builds from now on gets a real ``signum`` (SIGTERM: a
    scheduler's preemption; SIGINT: Ctrl-C), in this process, once it has trained ``step`` optimizer steps.
    Lightning takes it down the same path as from outside (``on_exception`` hooks, then ``SystemExit(143)`` from
    ``train`` for SIGTERM, ``SystemExit(1)`` for Ctrl-C), in a second instead of a subprocess's minutes."""
    import lightning as L

    import composer.training.run as run

    class Interrupt(L.Callback):
        def on_train_batch_end(self, trainer, *_):
            if trainer.global_step == step:
                assert callable(signal.getsignal(signum)), f"no handler for {signum!r}: it would end pytest"
                os.kill(os.getpid(), signum)

    real_build = run.build

    def build_interrupted(config, *options):
        trainer, *rest = real_build(config, *options)
        trainer.callbacks.append(Interrupt())
        return (trainer, *rest)

    monkeypatch.setattr(run, "build", build_interrupted)


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
