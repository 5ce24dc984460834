"""A wsd run continued from a shorter run's trunk equals a fresh run of the longer budget (issue 36's freeze-thaw)."""

from __future__ import annotations

import lightning as L
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


class KillAt(L.Callback):
    """A kill (SIGKILL, a lost node) after optimizer step ``step``."""

    def __init__(self, step: int) -> None:
        self.step = step

    def on_train_batch_end(self, trainer, *_) -> None:
        if trainer.global_step == self.step:
            raise RuntimeError(f"killed after step {self.step}")


class Steps(L.Callback):
    """The optimizer steps a run trains, in order."""

    def __init__(self) -> None:
        self.steps: list[int] = []

    def on_train_batch_end(self, trainer, *_) -> None:
        self.steps.append(trainer.global_step)


def test_a_trunk_killed_in_training_continues_from_its_last_checkpoint(tmp_path):
    """A search killed during a candidate used to train its run again from step 0 (the AMSD search lost 8 of 20
    minutes of a rung-2 run). With ``trunk_dir`` and ``trunk_saves`` the trunk trains where a kill leaves it and
    saves every eighth; the retry continues from the last save and scores exactly what an unkilled run scores."""
    whole = train_continued(config(40), tmp_path / "whole")
    trunk_dir = tmp_path / "kept-trunk"
    with pytest.raises(RuntimeError, match="killed after step 20"):
        train_continued(config(40), tmp_path / "a", trunk_dir=trunk_dir, trunk_saves=8, callbacks=[KillAt(20)])
    left = sorted(path.name for path in (trunk_dir / "checkpoints").iterdir())
    assert left == ["step-00000018.ckpt"], left  # every 30 // 8 = 3 steps, the newest kept
    trained = Steps()
    again = train_continued(config(40), tmp_path / "b", trunk_dir=trunk_dir, trunk_saves=8, callbacks=[trained])
    assert trained.steps[0] == 19, "the retry trains from the kill's last checkpoint, not from step 0"
    assert again.summary["val_loss"] == whole.summary["val_loss"]
    assert again.summary["val_fingerprint"] == whole.summary["val_fingerprint"]
    # a trunk of another run (past this one's cooldown start) is not continued
    shorter = train_continued(config(16), tmp_path / "c", trunk_dir=trunk_dir, trunk_saves=8)
    assert shorter.trunk_step == 12 and shorter.started_from_step == 0
    assert shorter.summary["val_loss"] == train_continued(config(16), tmp_path / "d").summary["val_loss"]
