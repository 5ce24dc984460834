"""Resumable micro-batch streams and the DataLoader that carries them.

A training dataset here is one rank's endless stream of whole micro-batches (``LongTensor [micro_batch,
seq_len + 1]``). Because items are whole micro-batches and the ``DataLoader`` runs with ``batch_size=None``,
the order of the batches does not depend on the number of dataloader workers: worker ``w`` of ``K`` produces
the rank's micro-batches ``w, w + K, w + 2K, ...`` and the loader hands them out round-robin, in order.

Resuming needs to know how many batches the *training loop* consumed, which the dataset cannot see: its copies
live in worker processes, and the consumer (Lightning) prefetches ahead. So a dataset's ``state_dict`` takes
that count (``batches_consumed``) and turns it into a position; ``TokenDataModule`` counts consumed batches.
Without a count, the batches yielded so far in this process are used, which is exact for a plain loop over the
loader.

``TokenLoader`` routes what workers report back to the dataset object in the main process (the count, and for
streamed sources a snapshot of each worker's reader state) and makes a second pass over the loader continue
where the first stopped. It deliberately has no ``state_dict``/``load_state_dict``: Lightning would then save
and restore it on its own, with the prefetched (not the consumed) count.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

from composer.data.errors import DataError


def worker_slot() -> tuple[int, int]:
    """(worker id, number of workers) of the calling process; (0, 1) outside dataloader workers."""
    info = get_worker_info()
    return (0, 1) if info is None else (info.id, info.num_workers)


class ResumableStream(IterableDataset):
    """Base of the training datasets: an endless micro-batch stream with a resumable position.

    Subclasses implement ``_generate()``, yielding ``(batch, snapshot)`` where ``snapshot`` is whatever they
    need to resume right after that batch (None when the position alone determines it), and ``state_dict`` /
    ``load_state_dict``.
    """

    def __init__(self) -> None:
        super().__init__()
        # batches this rank's stream has handed out in this process since the last load
        self.batches_yielded = 0
        self._managed = False  # set by TokenLoader: items then carry (worker id, snapshot) back to it

    def _generate(self) -> Iterator[tuple[torch.Tensor, Any]]:
        raise NotImplementedError

    def _record(self, index: int, worker: int, snapshot: Any) -> None:
        """Remember the reader state after batch ``index`` (counted since the last load) of ``worker``."""

    def __iter__(self) -> Iterator[Any]:
        worker, _ = worker_slot()
        for batch, snapshot in self._generate():
            if self._managed:
                yield batch, worker, snapshot
            else:
                if get_worker_info() is None:
                    self._record(self.batches_yielded, worker, snapshot)
                    self.batches_yielded += 1
                yield batch

    def _received(self, item: tuple[torch.Tensor, int, Any]) -> torch.Tensor | None:
        """Account for an item a worker produced; return the batch to hand out, or None to drop it."""
        batch, worker, snapshot = item
        self._record(self.batches_yielded, int(worker), snapshot)
        self.batches_yielded += 1
        return batch

    def _check_state(self, state: dict[str, Any], kind: str, version: int, expected: dict[str, Any]) -> None:
        """Refuse a saved position of another kind, version or data (``expected``: field -> current value)."""
        if state.get("kind") != kind or state.get("version") != version:
            raise DataError(
                f"data state of kind {state.get('kind')!r} (version {state.get('version')}) cannot resume "
                f"a {kind} dataset; resume with the data config the checkpoint was trained with"
            )
        changed = [f"{k} {state.get(k)!r} -> {v!r}" for k, v in expected.items() if state.get(k) != v]
        if changed:
            raise DataError(
                f"the checkpoint's data position is for other data ({', '.join(changed)}); resume with the "
                f"same source, tokenizer and {', '.join(k for k in expected if k != 'fingerprint')}"
            )

    def _consumed(self, batches_consumed: int | None) -> int:
        consumed = self.batches_yielded if batches_consumed is None else int(batches_consumed)
        if consumed < 0:
            raise ValueError("batches_consumed must be >= 0")
        return consumed

    def state_dict(self, batches_consumed: int | None = None) -> dict[str, Any]:
        raise NotImplementedError

    def load_state_dict(self, state: dict[str, Any]) -> None:
        raise NotImplementedError


class TokenLoader(DataLoader):
    """A ``DataLoader`` (``batch_size=None``) over a ``ResumableStream`` that reports progress to the dataset.

    Worker processes are not persistent, so a new pass (``iter``) starts workers from the dataset's current
    position: it continues where the previous pass stopped rather than replaying it.
    """

    def __init__(self, dataset: ResumableStream, num_workers: int = 0, **kwargs: Any) -> None:
        kwargs.setdefault("pin_memory", torch.cuda.is_available())
        if num_workers > 0:
            kwargs.setdefault("prefetch_factor", 4)
        super().__init__(
            dataset, batch_size=None, num_workers=num_workers, persistent_workers=False, **kwargs
        )
        dataset._managed = True
        self._passes = 0

    def __iter__(self) -> Iterator[torch.Tensor]:
        dataset: ResumableStream = self.dataset  # type: ignore[assignment]
        if self._passes and dataset.batches_yielded:
            dataset.load_state_dict(dataset.state_dict())
        self._passes += 1
        for item in super().__iter__():
            batch = dataset._received(item)
            if batch is not None:
                yield batch


__all__ = ["ResumableStream", "TokenLoader", "worker_slot"]
