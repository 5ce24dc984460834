"""Instability made visible (issue 16): spikes, the largest rise of the smoothed loss, gradient norms, divergence."""

from __future__ import annotations

import json
import math

import pytest

from composer.cli import main
from composer.training.stability import SPIKE_WARMUP, StabilityRecord


def test_a_smoothly_falling_loss_has_no_spike_and_no_rise():
    record = StabilityRecord()
    for step in range(50):
        record.update(step, 5.0 - 0.05 * step, grad_norm=1.0 + step / 100)
    summary = record.summary()
    assert summary["loss_spikes"] == 0 and summary["loss_largest_rise"] == 0.0
    assert summary["max_grad_norm"] == pytest.approx(1.49) and not summary["diverged"]


def test_a_spike_is_counted_with_its_step_and_the_smoothed_rise_is_measured():
    record = StabilityRecord()
    losses = [3.0] * 30 + [4.5] + [3.0] * 5 + [3.5] * 30  # one spike, then a plateau higher than before
    for step, loss in enumerate(losses):
        record.update(step, loss, grad_norm=None)
    assert record.spike_count == 1 and record.spikes == [30]
    assert record.largest_rise == pytest.approx(0.5, abs=0.02)


def test_no_spike_is_flagged_during_the_first_steps():
    record = StabilityRecord()
    for step, loss in enumerate([10.0, 2.0] * (SPIKE_WARMUP // 2)):
        record.update(step, loss, None)
    assert record.spike_count == 0


def test_a_non_finite_loss_marks_divergence_at_its_step():
    record = StabilityRecord()
    for step, loss in enumerate([3.0, 2.9, math.nan, math.inf]):
        record.update(step, loss, None)
    assert record.diverged_at == 2 and record.nonfinite_steps == 2
    assert StabilityRecord(**dict(record.__dict__)).summary() == record.summary()  # checkpoint round trip


def test_summary_holds_the_instability_fields_and_a_diverging_run_ends_with_one_line(tmp_path, capsys):
    argv = ["train", "--arch", "AM", "--preset", "tiny", "--seq-len", "32", "--batch-size", "4",
            "--max-documents", "100", "--wandb", "off", "--precision", "32-true", "--tokens", str(40 * 128),
            "--lr", "1e4", "--grad-clip", "0", "--warmup", "0", "--out", str(tmp_path / "boom")]
    code = main(argv)
    err = capsys.readouterr().err.strip()
    assert code == 1, err
    assert "training diverged at step" in err.splitlines()[-1] and "Traceback" not in err
    summary = json.loads((tmp_path / "boom" / "summary.json").read_text())
    for key in ("loss_largest_rise", "loss_spikes", "loss_spike_steps", "max_grad_norm", "nonfinite_steps",
                "diverged", "diverged_at_step"):
        assert key in summary, key
    assert summary["diverged"] is True and summary["val_loss"] is None and summary["nonfinite_steps"] >= 1
