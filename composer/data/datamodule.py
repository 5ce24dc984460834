"""``TokenDataModule``: the data pipeline as a Lightning ``LightningDataModule``, resumable from checkpoints.

Lightning's order of calls in ``trainer.fit(module, datamodule=dm, ckpt_path=...)`` (lightning 2.6,
``Trainer._run`` and ``_FitLoop.setup_data``): ``prepare_data`` on local rank 0 while the other ranks wait at
a barrier; ``setup("fit")`` on every rank; then, when resuming, ``load_state_dict`` with the state saved in
the checkpoint; only then ``train_dataloader()``, from inside the fit loop. So ``load_state_dict`` stores the
position and ``train_dataloader`` starts the stream there (a call after the loader exists moves the existing
dataset, for loops outside Lightning).

What the saved position counts: the batches the *training loop* consumed. Lightning's fetcher draws one batch
ahead of the training step and workers prefetch more, so the number of batches the loader produced is not it.
Lightning calls ``on_before_batch_transfer`` exactly once per batch the training step receives, after
fetching; the datamodule counts those while ``trainer.training`` (not validation or sanity checks), then hands
the batch to the ``LightningModule``'s own ``on_before_batch_transfer`` when it overrides one. Outside
Lightning the batches the train loader yielded are counted, which is what a plain loop consumed.

Materialised sources have a rank-independent position (a global chunk count), so the state saved by rank 0
resumes every rank, even with another world size. Streamed sources have per-rank reader states, gathered from
all ranks when the checkpoint is written (Lightning calls ``state_dict`` on every rank).
"""

from __future__ import annotations

import copy
import warnings
from typing import Any

import lightning as L
import torch
from lightning.pytorch.utilities.model_helpers import is_overridden
from torch.utils.data import DataLoader

from composer.data.config import DataConfig
from composer.data.errors import DataError
from composer.data.loader import ResumableStream, TokenLoader
from composer.data.pipeline import DataPipeline
from composer.data.tokenizer import ByteTokenizer, HFTokenizer

STATE_VERSION = 1


class TokenDataModule(L.LightningDataModule):
    """Packed token micro-batches (``LongTensor [micro_batch_size, seq_len + 1]``) for step-based training.

    The training loader is endless (it cycles epochs of the data), so train with ``max_steps`` and an integer
    ``val_check_interval``. The validation loader is finite and the same on every call.
    """

    def __init__(self, config: DataConfig, micro_batch_size: int) -> None:
        super().__init__()
        if type(micro_batch_size) is not int or micro_batch_size < 1:
            raise DataError(f"micro_batch_size must be an integer >= 1, got {micro_batch_size!r}")
        self.config = config
        self.micro_batch_size = micro_batch_size
        self.pipeline = DataPipeline(config)
        self.rank = 0
        self.world_size = 1
        self._train: ResumableStream | None = None
        self._pending: dict[str, Any] | None = None  # a loaded position waiting for train_dataloader()
        self._consumed = 0  # training batches the trainer consumed from the current train loader

    # -- what the model needs to know ------------------------------------------------------------------------
    @property
    def tokenizer(self) -> ByteTokenizer | HFTokenizer:
        return self.pipeline.tokenizer

    @property
    def vocab_size(self) -> int:
        """The tokenizer's vocabulary (the trainer rounds the model's up to a multiple of 64)."""
        return self.pipeline.vocab_size

    def stats(self) -> dict[str, Any]:
        """Documents, tokens, train/val chunks and dropped tail tokens (``DataPipeline.stats``)."""
        return self.pipeline.stats()

    # -- Lightning hooks -------------------------------------------------------------------------------------
    def prepare_data(self) -> None:
        """Tokenise into the cache. Lightning runs it on local rank 0; the other ranks wait, then load."""
        self.pipeline.prepare()

    def setup(self, stage: str | None = None) -> None:
        trainer = self.trainer
        if trainer is not None:
            self.rank, self.world_size = int(trainer.global_rank), int(trainer.world_size)
        self.pipeline.load()
        stats = self.pipeline.stats()
        if stats["val_chunks"] == 0:
            warnings.warn(
                f"no validation sequences: the held-out split has {stats['val_tokens']} tokens, fewer than "
                f"seq_len + 1 = {self.config.seq_len + 1}; raise val_fraction/val_documents or use more data",
                stacklevel=2,
            )

    def train_dataloader(self) -> DataLoader:
        """This rank's endless training loader, starting at the loaded position (or where a previous one was)."""
        start = self._position() if self._train is not None else self._pending
        workers = self.config.num_workers
        dataset = self.pipeline.train_dataset(
            self.micro_batch_size, self.rank, self.world_size, num_workers=workers
        )
        if start:
            dataset.load_state_dict(self._state_for_this_rank(start))
        self._train, self._pending, self._consumed = dataset, None, 0
        return TokenLoader(dataset, num_workers=workers)

    def val_dataloader(self) -> DataLoader:
        dataset = self.pipeline.val_dataset(self.micro_batch_size, self.rank, self.world_size)
        return DataLoader(dataset, batch_size=None, num_workers=0, pin_memory=torch.cuda.is_available())

    def on_before_batch_transfer(self, batch: Any, dataloader_idx: int) -> Any:
        trainer = self.trainer
        if trainer is None:
            return batch
        if trainer.training:
            self._consumed += 1
        module = trainer.lightning_module
        if module is not None and is_overridden("on_before_batch_transfer", module):
            batch = module.on_before_batch_transfer(batch, dataloader_idx)
        return batch

    # -- checkpointing ---------------------------------------------------------------------------------------
    def _fitting(self) -> bool:
        trainer = self.trainer
        return trainer is not None and trainer.state.fn == "fit"

    def _position(self) -> dict[str, Any]:
        """This rank's stream position after the batches consumed so far."""
        assert self._train is not None
        return self._train.state_dict(self._consumed if self._fitting() else None)

    def state_dict(self) -> dict[str, Any]:
        """The training stream's position after the batches consumed so far (see the module docstring)."""
        if self._train is None:
            return copy.deepcopy({"version": STATE_VERSION, "train": self._pending}) if self._pending else {}
        state = self._position()
        if state["kind"] == "streaming" and self.world_size > 1:
            state = {"kind": "streaming-ranks", "ranks": _gather(state, self.world_size)}
        return {"version": STATE_VERSION, "train": state}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Resume the training stream from ``state_dict`` (before or after ``train_dataloader()``)."""
        if not state_dict:
            return
        if state_dict.get("version") != STATE_VERSION or "train" not in state_dict:
            raise DataError(
                f"unrecognised data state (version {state_dict.get('version')!r}); it was not written by "
                "TokenDataModule.state_dict of this version"
            )
        state = copy.deepcopy(state_dict["train"])
        if self._train is None:
            self._pending = state  # applied by train_dataloader(), which Lightning calls after this
        else:
            self._train.load_state_dict(self._state_for_this_rank(state))
            self._consumed = 0

    def _state_for_this_rank(self, state: dict[str, Any]) -> dict[str, Any]:
        if state.get("kind") != "streaming-ranks":
            return state
        ranks = state["ranks"]
        if len(ranks) == self.world_size:
            return ranks[self.rank]
        # another world size: the dataset warns that the layout changed and restarts the saved epoch
        return ranks[self.rank % len(ranks)]


def _gather(state: dict[str, Any], world_size: int) -> list[dict[str, Any]]:
    """Every rank's stream state. A collective: every rank must call it (Lightning does, for checkpoints)."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return [state]
    gathered: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, state)
    return gathered


__all__ = ["TokenDataModule"]
