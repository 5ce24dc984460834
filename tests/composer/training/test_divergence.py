"""A run that blows up and stays finite is diverged too (issue 27): the rule, the CLI, and the MAD loop."""

from __future__ import annotations

import json
import math

import pytest

from composer.cli import main
from composer.training.divergence import BLOWUP_FACTOR, BLOWUP_PATIENCE, BlowupRule
from composer.training.stability import StabilityRecord

LN_256 = math.log(256)


def feed(rule: BlowupRule, losses) -> BlowupRule:
    for step, loss in enumerate(losses):
        rule.update(step, loss)
    return rule


def test_a_healthy_run_never_blows_up_even_with_a_spike():
    losses = [LN_256 - 0.02 * step for step in range(100)]
    losses[40] = 3 * LN_256  # one wild step: the moving average absorbs it
    rule = feed(BlowupRule(256), losses)
    assert rule.blown_up_at is None and not rule.finish(99)


def test_a_steady_blowup_fires_after_the_patience_and_is_counted():
    losses = [LN_256] * 3 + [500.0] * 40
    rule = feed(BlowupRule(256), losses)
    # the smoothed loss crosses 1.5 x ln(256) at the first 500 (EMA weight 0.1 of ~500 is far above 8.3)
    assert rule.blown_up_at == 3 + BLOWUP_PATIENCE - 1
    assert rule.steps_above_total == 40
    assert f"{BLOWUP_FACTOR:g}x" in rule.reason() and f"for {BLOWUP_PATIENCE} steps" in rule.reason()


def test_the_start_is_never_below_uniform_guessing():
    rule = feed(BlowupRule(256), [1.0, 1.0, 1.0])  # a lucky first batch must not lower the line
    assert rule.start == pytest.approx(LN_256)
    rule = feed(BlowupRule(256), [7.0])
    assert rule.start == 7.0


def test_a_short_run_that_ends_above_the_line_is_judged_at_its_end():
    rule = feed(BlowupRule(256), [LN_256, 300.0, 600.0])
    assert rule.blown_up_at is None  # fewer steps than the patience
    assert rule.finish(2) and rule.blown_up_at == 2 and "at the end of training" in rule.reason()


def test_a_run_that_recovers_below_the_line_is_not_diverged():
    rule = feed(BlowupRule(256), [LN_256] + [20.0] * 3 + [1.0] * 60)  # a short excursion
    assert rule.blown_up_at is None and not rule.finish(69)


def test_the_stability_record_reports_the_blowup_and_survives_a_checkpoint_round_trip():
    record = StabilityRecord(vocab_size=256)
    for step in range(5):
        record.update(step, 500.0 if step else LN_256, grad_norm=1.0)
    restored = StabilityRecord(**dict(record.__dict__))  # what StabilityMonitor.load_state_dict does
    for step in range(5, 5 + BLOWUP_PATIENCE):
        restored.update(step, 500.0, grad_norm=1.0)
    summary = restored.summary()
    assert summary["diverged"] and summary["diverged_at_step"] == BLOWUP_PATIENCE
    assert summary["loss_steps_above_start"] == 4 + BLOWUP_PATIENCE and "blew up" in summary["diverged_reason"]
    assert summary["nonfinite_steps"] == 0  # finite all along: the old rule called this run healthy


def test_train_at_lr_10_stops_early_as_diverged_with_one_line(tmp_path, capsys):
    """The issue's case: `--lr 10` climbs from 5.5 to hundreds and stays finite."""
    out = tmp_path / "lr10"
    code = main(["train", "--arch", "(AM)x2", "--preset", "tiny", "--tokens", "200000", "--lr", "10",
                 "--out", str(out), "--wandb", "off", "--val-interval", "1000"])
    assert code == 1
    errors = [line for line in capsys.readouterr().err.splitlines() if "error" in line]  # progress lines aside
    assert len(errors) == 1 and "diverged" in errors[0] and "blew up" in errors[0]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["diverged"] and summary["nonfinite_steps"] == 0 and summary["val_loss"] is None
    planned = 200000 // (16 * 256)
    assert summary["diverged_at_step"] <= BLOWUP_PATIENCE + 3 < planned  # stopped early, not at the end


def test_the_mad_loop_raises_on_a_blowup():
    import torch

    from search.mad.evaluate import NonFinite, fit

    class Loss(torch.nn.Module):  # a model whose loss is whatever the batch says, with one real parameter
        arch = type("Arch", (), {"vocab_size": 256})()

        def __init__(self):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.zeros(()))

        def parameter_groups(self, weight_decay):
            return [{"params": [self.weight], "weight_decay": weight_decay}]

        def forward(self, inputs, targets):
            return type("Out", (), {"loss": self.weight * 0 + inputs})()

    batches = [(torch.tensor(LN_256 if step < 2 else 400.0), None, "") for step in range(30)]
    with pytest.raises(NonFinite, match="blew up"):
        fit(Loss(), batches, 30, lr=1e-3, weight_decay=0.0, warmup_fraction=0.0, min_lr_ratio=1.0, grad_clip=1.0)
    healthy = [(torch.tensor(LN_256 - 0.01 * step), None, "") for step in range(30)]
    assert fit(Loss(), healthy, 30, lr=1e-3, weight_decay=0.0, warmup_fraction=0.0, min_lr_ratio=1.0,
               grad_clip=1.0) < LN_256
