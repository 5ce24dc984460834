"""A ``wsd`` run trained as a trunk and a cooldown branch, so that a longer run can continue the trunk.

Why (freeze-thaw, issue 36): a successive-halving search trains a candidate at rising budgets. Retraining it from
scratch at every rung pays again for the tokens it already saw. Under warmup-stable-decay (Hu et al. 2024;
Hägele et al., arXiv 2405.18392) every run of any length follows the same rate until its cooldown starts, so a run
is split in two: the *trunk*, at the peak rate up to the step where the cooldown would start, saved as a checkpoint;
and the *branch*, a copy of the trunk cooled down to the budget's end, which scores it. The next rung continues
the trunk to its own cooldown and cools down a branch of its own: it pays only for the tokens it adds.

A continued run equals a fresh ``wsd`` run of the longer budget, step for step (tests/composer/training/
test_continuation.py), because the warmup is a fixed number of steps (not a fraction of the budget), the rate is
constant before ``schedule.decay_start``, the data stream resumes where the checkpoint left it, and a continued run
takes its rate from its own schedule from its first step (``ComposerLM.on_train_start``).
"""

from __future__ import annotations

import dataclasses
import re
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from composer.errors import ConfigError
from composer.training.checkpoint import latest_checkpoint
from composer.training.config import TrainConfig
from composer.training.schedule import ScheduleConfig, decay_start

_STEP = re.compile(r"step-(\d+)\.ckpt$")


@dataclass(frozen=True)
class Branch:
    """What :func:`train_continued` trained: the cooled-down run's ``summary`` (its ``val_loss`` scores the run,
    its ``curve`` holds the trunk's points too), the ``trunk`` checkpoint at the start of the cooldown (inside
    the work directory: a caller that keeps it copies it), the step it started from and the tokens it trained."""

    summary: dict[str, Any]
    trunk: Path
    trunk_step: int
    started_from_step: int
    trained_tokens: int


def checkpoint_step(path: str | Path) -> int:
    """The optimizer step of a checkpoint named by ``AtomicCheckpoint`` (``step-00000048.ckpt``)."""
    match = _STEP.search(str(path))
    if match is None:
        raise ConfigError(f"{path}: not a checkpoint written by composer train (step-NNNNNNNN.ckpt)")
    return int(match.group(1))


def trunk_steps(config: TrainConfig) -> int:
    """The steps of ``config``'s trunk: those before its cooldown starts."""
    steps = config.tokens // (config.batch_size * config.seq_len)
    return decay_start(ScheduleConfig("wsd", warmup_steps=int(config.warmup), total_steps=steps,
                                      decay_fraction=config.decay_fraction))


def check_continuable(config: TrainConfig) -> None:
    """One line naming what keeps ``config`` from sharing its trunk with runs of other budgets."""
    if config.schedule != "wsd":
        raise ConfigError(f"only a wsd schedule can continue a trunk into a longer run, got {config.schedule!r}")
    if config.warmup < 1 or config.warmup != int(config.warmup):
        raise ConfigError(f"a continued run needs its warmup in steps (an integer >= 1), not a fraction of its "
                          f"budget: got {config.warmup}")
    if trunk_steps(config) < 1:
        raise ConfigError(f"{config.tokens:,} tokens leave no steps before the cooldown: raise the tokens")


def train_continued(config: TrainConfig, work: str | Path, start_from: str | Path | None = None,
                    save_on_sigterm: bool = False, callbacks: Sequence[Any] = (),
                    trunk_dir: str | Path | None = None, trunk_saves: int | None = None) -> Branch:
    """Train ``config`` (a ``wsd`` run) as a trunk and a cooldown branch under ``work``, the trunk continued
    from the checkpoint ``start_from`` (a trunk of the same run at fewer steps) when one is given.

    ``trunk_dir``: where the trunk trains (default ``work/trunk``), for a caller that keeps it past a killed
    process: a checkpoint of this run found there (further than ``start_from``, not past the cooldown) is
    continued instead of training those steps again, and ``trunk_saves`` spreads that many checkpoints over the
    trunk (at most 1/``trunk_saves`` of it is lost to a kill; a search's candidate used to lose all of it).
    Each is a trunk of the same run, which :func:`train_continued` already continues step for step."""
    from composer.training.run import train

    check_continuable(config)
    work = Path(work)
    stable = trunk_steps(config)
    tokens_per_step = config.batch_size * config.seq_len
    started = checkpoint_step(start_from) if start_from is not None else 0
    if started > stable:
        raise ConfigError(f"a trunk of {started} steps cannot continue into a run whose cooldown starts at step "
                          f"{stable}: continue a shorter trunk, or train this budget fresh")
    trunk_dir = Path(trunk_dir) if trunk_dir is not None else work / "trunk"
    interrupted = interrupted_trunk(trunk_dir, started, stable)
    if interrupted is None and start_from is not None and started == stable:
        trunk = Path(start_from)
    elif interrupted is not None and checkpoint_step(interrupted) == stable:
        trunk = interrupted  # killed in the cooldown: only the branch trains again
    else:
        if interrupted is None:
            shutil.rmtree(trunk_dir / "checkpoints", ignore_errors=True)  # another run's, or one it went past
            if start_from is not None:
                _place(start_from, trunk_dir / "checkpoints")
        every = max(1, stable // trunk_saves) if trunk_saves else 10**9
        train(dataclasses.replace(config, out=str(trunk_dir), tokens=stable * tokens_per_step, schedule="constant",
                                  val_tokens=config.curve_tokens, checkpoint_interval=every, keep_checkpoints=1),
              resume=start_from is not None or interrupted is not None, save_on_sigterm=save_on_sigterm,
              callbacks=callbacks)
        trunk = latest_checkpoint(trunk_dir / "checkpoints")
        if trunk is None or checkpoint_step(trunk) != stable:
            raise RuntimeError(f"the trunk run in {trunk_dir} did not save its step {stable}")
    branch_dir = work / "branch"
    _place(trunk, branch_dir / "checkpoints")
    summary = train(dataclasses.replace(config, out=str(branch_dir), checkpoint_interval=10**9, keep_checkpoints=1),
                    resume=True, save_on_sigterm=save_on_sigterm, callbacks=callbacks)
    return Branch(summary=summary, trunk=trunk, trunk_step=stable, started_from_step=started,
                  trained_tokens=(summary["steps"] - started) * tokens_per_step)


def interrupted_trunk(trunk_dir: Path, started: int, stable: int) -> Path | None:
    """The checkpoint a killed run left in ``trunk_dir`` that this run can continue: past ``started`` (the trunk it
    was given) and not past ``stable`` (its cooldown's start); None when there is none."""
    found = latest_checkpoint(trunk_dir / "checkpoints")  # None where the folder does not exist
    if found is None or not started < checkpoint_step(found) <= stable:
        return None
    return found


def _place(checkpoint: str | Path, directory: Path) -> None:
    """A copy of ``checkpoint`` as the only one in ``directory``, where ``train(resume=True)`` looks."""
    directory.mkdir(parents=True, exist_ok=True)
    shutil.copy2(checkpoint, directory / Path(checkpoint).name)
