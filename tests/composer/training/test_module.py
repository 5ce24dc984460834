"""The Lightning module with auxiliary losses (MoE) and the new primitives under FSDP2 + activation checkpointing."""

from __future__ import annotations

import csv
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from composer.training.config import TrainConfig
from composer.training.run import train

MOE = {
    "arch": "AEAE",
    "preset": "tiny",
    "seq_len": 64,
    "batch_size": 8,
    "max_documents": 200,
    "val_batches": 4,
    "lr": 3e-3,
}


def metric_rows(out: Path) -> list[dict[str, str]]:
    rows = []
    for metrics in sorted((out / "logs").glob("version_*/metrics.csv")):
        with open(metrics) as f:
            rows.extend(csv.DictReader(f))
    return rows


def train_metric(out: Path, key: str) -> dict[int, float]:
    return {int(r["step"]): float(r[key]) for r in metric_rows(out) if r.get(key)}


def test_moe_run_logs_lm_and_aux_losses_and_validates_on_the_lm_loss(tmp_path):
    out = tmp_path / "run"
    summary = train(
        TrainConfig(
            **MOE, tokens=8 * 512, log_interval=1, wandb="off", activation_checkpointing=True, out=str(out)
        )
    )
    total, lm, aux = (train_metric(out, f"train/{key}") for key in ("loss", "lm_loss", "aux_loss"))
    assert total.keys() == lm.keys() == aux.keys() and len(total) == 8
    for step in total:
        assert total[step] == pytest.approx(lm[step] + aux[step], rel=1e-5)
        assert 0.01 <= aux[step] < 0.04  # 2 E layers x coefficient 0.01 x a balance score in [1, 4)
    assert math.isfinite(summary["val_loss"]) and summary["val_loss"] < math.log(256)


def test_dense_run_logs_no_aux_loss(tmp_path):
    out = tmp_path / "run"
    train(TrainConfig(**{**MOE, "arch": "AMAM"}, tokens=2 * 512, log_interval=1, wandb="off", out=str(out)))
    keys = set().union(*(row.keys() for row in metric_rows(out)))
    assert "train/loss" in keys and "train/aux_loss" not in keys and "train/lm_loss" not in keys


def run_cli(out: Path, *extra: str, arch: str = MOE["arch"], here: bool = False) -> dict:
    """``composer train`` with the shared flags: its summary. ``here``: in this process (a one-device reference
    needs no process of its own; a second would import torch and Lightning again, ~10 s)."""
    argv = [
        "train",
        "--arch",
        arch,
        "--preset",
        MOE["preset"],
        "--seq-len",
        "64",
        "--batch-size",
        "8",
        "--max-documents",
        "200",
        "--val-batches",
        "4",
        "--tokens",
        str(6 * 512),
        "--wandb",
        "off",
        "--log-interval",
        "1",
        "--activation-checkpointing",
        "--precision",  # step-by-step equality with one process is a float32 property
        "32-true",
        "--out",
        str(out),
        *extra,
    ]
    if "--val-batches" in extra:  # a flag is given once (a repeat with another value is refused): the caller's wins
        at = argv.index("--val-batches")
        del argv[at:at + 2]
    if here:
        from composer.cli import main

        assert main(argv) == 0
        return json.loads((out / "summary.json").read_text())
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "composer", *argv],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    return json.loads((out / "summary.json").read_text())


def test_moe_and_recurrent_and_windowed_primitives_under_fsdp_and_activation_checkpointing_match_one_process(
        tmp_path):
    """FSDP2 (2 CPU processes, 4 sequences each) with per-layer AC follows one process with 2 micro-batches of 4,
    step by step, for S (Mamba-2), D (Gated DeltaNet), W (window 16) and E (MoE) in one model: each shards per
    layer and recomputes under AC. (One pair of runs for all four, the one-process reference in this process: each
    further process pays a Python start of ~10 s.)

    The load-balancing loss is a statistic of each forward's tokens (per micro-batch and per rank, as in Mixtral),
    so the single-process reference accumulates gradients over the same 4-sequence micro-batches.
    """
    arch = "SDWE"
    options = ("--options", '{"W": {"window": 16}}')
    # val_batches counts micro-batches per device: 8 x 4 sequences here = 4 x 4 on each of the 2 ranks
    single = run_cli(tmp_path / "single", "--devices", "1", "--device", "cpu", "--micro-batch-size", "4",
                     "--val-batches", "8", *options, arch=arch, here=True)
    double = run_cli(tmp_path / "fsdp", "--devices", "2", "--device", "cpu", "--parallelism", "fsdp", *options,
                     arch=arch)
    assert double["world_size"] == 2 and double["strategy"] == "fsdp"
    assert double["param_share_per_rank"] == pytest.approx(0.5, abs=0.05)  # sharded, not a copy per rank
    # the global gradient norm of every step (logged after accumulation / reduce-scatter), then the end result
    one, two = (train_metric(tmp_path / run, "train/grad_norm") for run in ("single", "fsdp"))
    assert one.keys() == two.keys() and len(one) == 6
    for step in one:
        assert two[step] == pytest.approx(one[step], rel=1e-4), step
    assert train_metric(tmp_path / "fsdp", "train/aux_loss")
    assert double["val_loss"] == pytest.approx(single["val_loss"], rel=1e-4)
