"""A wsd run continued from a shorter run's trunk equals a fresh run of the longer budget (issue 36's freeze-thaw)."""

from __future__ import annotations

import pytest

from composer.errors import ConfigError
from composer.training import TrainConfig, train
from composer.training.continuation import checkpoint_step, train_continued, trunk_steps

STEP_TOKENS = 128 * 4


def config(steps: int, **overrides) -> TrainConfig:
    values = dict(arch="AMSA", preset="tiny", tokens=steps * STEP_TOKENS, seq_len=128, batch_size=4, lr=3e-3, seed=0,
                  wandb="off", val_tokens=2048, log_interval=10**9, keep_checkpoints=1, curve_points=5,
                  curve_tokens=1024, warmup=3, schedule="wsd", decay_fraction=0.25, precision="32-true")
    return TrainConfig(**{**values, **overrides})


def test_a_continued_run_equals_a_fresh_run_of_the_longer_budget(tmp_path):
    """Rung k trains 16 steps (trunk 12, cooldown 4); rung k+1 continues its trunk to 30 of 40 and cools down.
    Same seed: the same final loss and the same curve points as one fresh 40-step run, to the last bit in fp32.
    Red before ComposerLM.on_train_start reset the rate (the continued run's first step took the trunk's rate)."""
    fresh = train(config(40, out=str(tmp_path / "fresh")))
    short = train_continued(config(16), tmp_path / "short")
    assert (short.trunk_step, checkpoint_step(short.trunk), short.trained_tokens) == (12, 12, 16 * STEP_TOKENS)
    longer = train_continued(config(40), tmp_path / "long", start_from=short.trunk)
    assert (longer.trunk_step, longer.started_from_step, longer.trained_tokens) == (30, 12, 28 * STEP_TOKENS)
    assert longer.summary["val_loss"] == fresh["val_loss"]
    assert longer.summary["val_fingerprint"] == fresh["val_fingerprint"]
    fresh_points = {point["step"]: point["loss"] for point in fresh["curve"]}
    continued = {point["step"]: point["loss"] for point in longer.summary["curve"]}
    assert continued.keys() >= {point["step"] for point in short.summary["curve"] if point["step"] <= 12}
    shared = fresh_points.keys() & continued.keys()
    assert 40 in shared and len(shared) >= 2
    for step in shared:
        assert continued[step] == fresh_points[step], step
    assert short.summary["val_loss"] > longer.summary["val_loss"]  # it learned on: not the short run's score again


def test_a_trunk_at_the_cooldown_is_not_trained_again(tmp_path):
    """The same budget continued from its own trunk trains only the cooldown (a resumed rung)."""
    first = train_continued(config(16), tmp_path / "a")
    again = train_continued(config(16), tmp_path / "b", start_from=first.trunk)
    assert again.trained_tokens == 4 * STEP_TOKENS
    assert again.summary["val_loss"] == first.summary["val_loss"]


@pytest.mark.parametrize("overrides, message", [
    (dict(schedule="cosine"), "only a wsd schedule"),
    (dict(warmup=0.05), "warmup in steps"),
])
def test_what_cannot_continue_is_one_line(tmp_path, overrides, message):
    with pytest.raises(ConfigError, match=message):
        train_continued(config(16, **overrides), tmp_path)


def test_a_longer_trunk_cannot_continue_into_a_shorter_run(tmp_path):
    longer = train_continued(config(24), tmp_path / "long")
    assert trunk_steps(config(16)) == 12 < longer.trunk_step
    with pytest.raises(ConfigError, match="cannot continue"):
        train_continued(config(16), tmp_path / "short", start_from=longer.trunk)
