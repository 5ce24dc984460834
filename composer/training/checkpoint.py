"""Atomic periodic and final checkpoints, the latest-checkpoint lookup for ``--resume``, and the unsharded state
dict a run exports (the model directory itself: :mod:`composer.interop.model_dir`).

A checkpoint is written under a temporary name and renamed into place once complete (``os.replace`` is atomic),
so a run killed mid-save leaves the previous checkpoints intact and never a half-written ``step-*.ckpt``.
Under FSDP2 a checkpoint is a directory of sharded tensors (torch.distributed.checkpoint); otherwise a file.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import lightning as L
import torch

_NAME = re.compile(r"^step-(\d+)\.ckpt$")


def checkpoint_name(step: int) -> str:
    return f"step-{step:08d}.ckpt"


def list_checkpoints(directory: str | Path) -> list[Path]:
    """Complete checkpoints in ``directory``, oldest first (temporary ones are ignored)."""
    directory = Path(directory)
    if not directory.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in directory.iterdir() if (m := _NAME.match(p.name))]
    return [p for _, p in sorted(found)]


def latest_checkpoint(directory: str | Path) -> Path | None:
    found = list_checkpoints(directory)
    return found[-1] if found else None


def checkpoint_problem(path: Path) -> str | None:
    """Why ``path`` cannot be resumed from, or ``None`` when it opens.

    Cheap: a file checkpoint is opened memory-mapped (the zip directory and the pickled structure are read, the
    tensors are not); an FSDP2 checkpoint directory must have readable metadata.
    """
    try:
        if path.is_dir():
            from torch.distributed.checkpoint import FileSystemReader

            FileSystemReader(str(path)).read_metadata()
        else:
            torch.load(path, map_location="cpu", weights_only=False, mmap=True)
    except Exception as err:  # any failure to open means "not resumable"; the reason is reported
        return f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else 'unreadable'}"
    return None


def resumable_checkpoint(directory: str | Path, warn=print) -> Path | None:
    """The newest checkpoint in ``directory`` that opens; each newer one that does not is set aside.

    A checkpoint that fails to open (truncated by a full disk, a copy cut short) is renamed to
    ``<name>.corrupt`` on the first local process, never deleted: the run continues from the previous one, and
    the next save of that step cannot overwrite the evidence. ``warn`` gets one line per skipped checkpoint.
    """
    for path in reversed(list_checkpoints(directory)):
        problem = checkpoint_problem(path)
        if problem is None:
            return path
        warn(f"skipping checkpoint {path.name}: it does not load ({problem}); kept as {path.name}.corrupt")
        if int(os.environ.get("LOCAL_RANK", "0")) == 0 and path.exists():
            os.replace(path, path.with_name(path.name + ".corrupt"))
    return None


def _remove(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
    elif path.exists():
        path.unlink()


@contextmanager
def _as_if_saved_at_batch_end(trainer: L.Trainer) -> Iterator[None]:
    """Give a checkpoint written after a step's bookkeeping the loop state of one written in ``on_train_batch_end``.

    Lightning raises ``SIGTERMException`` after the batch loop has counted the step for its loggers, but on resume
    it assumes a checkpoint of a finished batch was written before that count (as ``ModelCheckpoint`` does): when
    the resumed run's validation falls on that step it counts it again, and every logged step from then on is one
    ahead of the optimizer's (seen in CI: resumed from step 100, the run logged 101, 102). Writing the counters as
    they stood in ``on_train_batch_end`` takes Lightning's own path there, whatever the resumed run's validation
    interval. A SIGTERM inside validation (the count not yet made) or in the middle of gradient accumulation is
    saved as it stands.
    """
    loop = trainer.fit_loop.epoch_loop
    progress = loop.batch_progress
    counted = (not loop._should_accumulate() and loop._batches_that_stepped == trainer.global_step
               and progress.total.completed == progress.total.processed and progress.current.completed > 0)
    if not counted:
        yield
        return
    loop._batches_that_stepped -= 1
    progress.total.completed -= 1
    progress.current.completed -= 1
    try:
        yield
    finally:
        loop._batches_that_stepped += 1
        progress.total.completed += 1
        progress.current.completed += 1


class AtomicCheckpoint(L.Callback):
    """Saves every ``every_n_steps`` optimizer steps and at the end; keeps the newest ``keep``.

    ``save_on_sigterm=False`` is for a run whose directory does not outlive it (a search candidate's): a SIGTERM
    checkpoint there is deleted unread, its save only delays the exit, and its ``--resume`` hint points at a file
    the user cannot use; the caller says how to continue instead.
    """

    def __init__(self, directory: str | Path, every_n_steps: int, keep: int = 2, save_on_sigterm: bool = True) -> None:
        self.directory = Path(directory)
        self.every_n_steps = max(1, every_n_steps)
        self.keep = max(1, keep)
        self.save_on_sigterm = save_on_sigterm
        self._saved_step = -1

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._saved_step = trainer.global_step  # a resumed run does not re-save the step it resumed from

    def on_train_batch_end(self, trainer: L.Trainer, *_) -> None:
        step = trainer.global_step
        if step != self._saved_step and step % self.every_n_steps == 0 and step < trainer.max_steps:
            self.save(trainer)

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.global_step != self._saved_step:
            self.save(trainer)

    def on_exception(self, trainer: L.Trainer, pl_module: L.LightningModule, exception: BaseException) -> None:
        """SIGTERM (a scheduler's preemption, ``kill``): save the step just finished before exiting.

        Lightning raises its ``SIGTERMException`` on every rank at a batch boundary, after this callback's
        ``on_train_batch_end``, so the state is whole. Ctrl-C (``KeyboardInterrupt``) can land mid-step, so it is
        not saved: ``--resume`` continues from the last periodic checkpoint.
        """
        from lightning.pytorch.utilities.exceptions import SIGTERMException

        if not self.save_on_sigterm:
            return
        if isinstance(exception, SIGTERMException) and trainer.global_step not in (self._saved_step, 0):
            with _as_if_saved_at_batch_end(trainer):
                path = self.save(trainer)
            if trainer.is_global_zero:
                print(f"SIGTERM: saved {path}; continue with --resume", file=sys.stderr, flush=True)

    def save(self, trainer: L.Trainer) -> Path:
        step = trainer.global_step
        final = self.directory / checkpoint_name(step)
        temporary = self.directory / f".tmp-{checkpoint_name(step)}"
        if trainer.is_global_zero:
            self.directory.mkdir(parents=True, exist_ok=True)
            _remove(temporary)
        trainer.strategy.barrier("checkpoint-prepare")
        trainer.save_checkpoint(temporary, weights_only=False)  # full state: optimizer, loops, data position
        trainer.strategy.barrier("checkpoint-written")
        if trainer.is_global_zero:
            _remove(final)
            os.replace(temporary, final)
            for old in list_checkpoints(self.directory)[: -self.keep]:
                _remove(old)
        trainer.strategy.barrier("checkpoint-renamed")
        self._saved_step = step
        return final


def full_state_dict(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """Unsharded CPU state dict; gathers FSDP2 (DTensor) shards (a collective: call on every rank)."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    options = StateDictOptions(full_state_dict=True, cpu_offload=True)
    return get_model_state_dict(model, options=options)


def __getattr__(name: str):
    if name in ("export_weights", "load_pretrained", "read_arch"):  # the model directory's, until issue 28
        raise AttributeError(f"composer.training.checkpoint.{name} moved to composer.interop.model_dir.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
