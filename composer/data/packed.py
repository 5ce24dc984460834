"""Datasets over a materialised token array: the training stream and the fixed validation set.

Training (``PackedTokenDataset``): micro-batch ``g`` of the global stream holds the chunks at positions
``start + g * micro_batch ... start + (g + 1) * micro_batch - 1`` of the endless, epoch-shuffled chunk order
(``packing.ChunkOrder``). Rank ``r`` of ``W`` takes the micro-batches with ``g % W == r``; within a rank,
worker ``w`` of ``K`` takes every ``K``-th of them. So across ranks and workers every chunk position is
produced exactly once, and a rank's sequence of batches does not depend on ``K``.

The position is global (``chunks_consumed``), so a resumed run sees exactly the batches an uninterrupted run
would, and a run can even resume with another world size or micro-batch size: it continues from the same point
of the chunk stream. Ranks are assumed to consume batches in lockstep (true for data-parallel training).

Validation (``ValidationDataset``): the first ``val_sequences`` chunks of the held-out stream, in order, cut
into micro-batches that are dealt to ranks round-robin, with no sequence duplicated or dropped.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import IterableDataset

from composer.data.cache import open_tokens
from composer.data.errors import DataError
from composer.data.loader import ResumableStream, worker_slot
from composer.data.packing import ChunkOrder, gather_chunks, num_chunks
from composer.data.repeated_spans import RepeatedSpans

STATE_VERSION = 1


class _TokenArray:
    """A token array given in memory or as a ``.npy`` path; a path is memory-mapped lazily in each process."""

    def __init__(self, tokens: np.ndarray | str | Path) -> None:
        if isinstance(tokens, (str, Path)):
            self.path: Path | None = Path(tokens)
            self._array: np.ndarray | None = None
            self.length = int(open_tokens(self.path).shape[0])
        else:
            self.path = None
            self._array = np.asarray(tokens).reshape(-1)
            self.length = int(self._array.shape[0])

    @property
    def array(self) -> np.ndarray:
        if self._array is None:
            assert self.path is not None
            self._array = open_tokens(self.path)
        return self._array

    def __getstate__(self) -> dict[str, Any]:
        # Pickling a memmap copies the whole corpus into the message; send the path and map it again instead.
        state = dict(self.__dict__)
        if self.path is not None:
            state["_array"] = None
        return state


def _check_shape(seq_len: int, micro_batch_size: int, rank: int, world_size: int) -> None:
    for name, value, minimum in (
        ("seq_len", seq_len, 1),
        ("micro_batch_size", micro_batch_size, 1),
        ("world_size", world_size, 1),
        ("rank", rank, 0),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise DataError(f"{name} must be an integer >= {minimum}, got {value!r}")
    if rank >= world_size:
        raise DataError(f"rank {rank} is out of range for world_size {world_size}")


class PackedTokenDataset(ResumableStream):
    """One rank's endless stream of shuffled ``[micro_batch_size, seq_len + 1]`` micro-batches of a token array.

    ``state_dict(batches_consumed)`` is the stream position after this rank consumed that many batches since
    the last ``load_state_dict`` (default: the batches yielded in this process); ``load_state_dict`` continues
    from it. ``fingerprint`` identifies the data (tokenizer and split sizes); a state from other data is
    refused.
    """

    def __init__(
        self,
        tokens: np.ndarray | str | Path,
        seq_len: int,
        micro_batch_size: int,
        *,
        seed: int = 0,
        rank: int = 0,
        world_size: int = 1,
        shuffle: bool = True,
        fingerprint: str = "",
        repeats: RepeatedSpans | None = None,
    ) -> None:
        super().__init__()
        _check_shape(seq_len, micro_batch_size, rank, world_size)
        if repeats is not None:
            repeats.check_fits(seq_len)
        self.repeats = repeats if repeats is not None and repeats.share > 0 else None
        self.tokens = _TokenArray(tokens)
        self.seq_len = seq_len
        self.micro_batch_size = micro_batch_size
        self.seed = seed
        self.rank = rank
        self.world_size = world_size
        self.shuffle = shuffle
        self.fingerprint = fingerprint
        self.n_chunks = num_chunks(self.tokens.length, seq_len)
        if self.n_chunks == 0:
            raise DataError(
                f"the training split has {self.tokens.length} tokens, fewer than one sequence of "
                f"seq_len + 1 = {seq_len + 1}; use a larger source or a shorter seq_len"
            )
        self.start_chunk = 0  # global chunk position where this stream's micro-batch 0 starts

    def micro_batch_positions(self, index: int) -> np.ndarray:
        """Chunk positions of this rank's ``index``-th micro-batch (0-based, since ``start_chunk``)."""
        global_index = self.rank + self.world_size * index
        first = self.start_chunk + global_index * self.micro_batch_size
        return first + np.arange(self.micro_batch_size, dtype=np.int64)

    def _generate(self) -> Iterator[tuple[torch.Tensor, Any]]:
        worker, workers = worker_slot()
        order = ChunkOrder(self.n_chunks, self.seed, self.shuffle)
        tokens = self.tokens.array
        index = worker
        while True:
            positions = self.micro_batch_positions(index)
            windows = gather_chunks(tokens, order[positions], self.seq_len)
            if self.repeats is not None:
                self.repeats.apply(windows, positions)
            yield torch.from_numpy(windows), None
            index += workers

    def state_dict(self, batches_consumed: int | None = None) -> dict[str, Any]:
        consumed = self._consumed(batches_consumed)
        chunks = self.start_chunk + consumed * self.world_size * self.micro_batch_size
        return {
            "kind": "packed",
            "version": STATE_VERSION,
            "chunks_consumed": int(chunks),
            "epoch": int(chunks // self.n_chunks),
            "micro_batches_per_rank": int(chunks // (self.world_size * self.micro_batch_size)),
            "world_size": self.world_size,
            "micro_batch_size": self.micro_batch_size,
            "seq_len": self.seq_len,
            "seed": self.seed,
            "n_chunks": self.n_chunks,
            "fingerprint": self.fingerprint,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._check_state(
            state,
            "packed",
            STATE_VERSION,
            {"seq_len": self.seq_len, "seed": self.seed, "n_chunks": self.n_chunks, "fingerprint": self.fingerprint},
        )
        self.start_chunk = int(state["chunks_consumed"])
        self.batches_yielded = 0


def validation_slices(
    n_sequences: int, micro_batch_size: int, world_size: int, rank: int
) -> list[tuple[int, int]]:
    """``(start, stop)`` sequence ranges of this rank's validation micro-batches.

    Micro-batches of ``micro_batch_size`` consecutive sequences (the last one may be smaller) are dealt to
    ranks round-robin. When there are fewer such batches than ranks, the sequences are cut into
    ``min(n_sequences, world_size)`` near-equal batches instead, so that as many ranks as possible evaluate
    something (a rank with none gets an empty loader). No sequence is duplicated or dropped, so the set does
    not depend on the world size.
    """
    if n_sequences <= 0:
        return []
    if -(-n_sequences // micro_batch_size) >= world_size:
        starts = range(0, n_sequences, micro_batch_size)
        bounds = [(start, min(start + micro_batch_size, n_sequences)) for start in starts]
    else:
        edges = np.linspace(0, n_sequences, min(n_sequences, world_size) + 1).round().astype(int)
        bounds = [(int(a), int(b)) for a, b in itertools.pairwise(edges)]
    return bounds[rank::world_size]


class ValidationDataset(IterableDataset):
    """This rank's share of the fixed held-out sequences, in ``[<= micro_batch_size, seq_len + 1]`` batches.

    Finite and identical on every pass. Iterated in the main process (a handful of memory-mapped reads), so
    the loader needs no workers; with workers, each worker takes every ``K``-th batch.
    """

    def __init__(
        self,
        tokens: np.ndarray | str | Path,
        seq_len: int,
        micro_batch_size: int,
        *,
        rank: int = 0,
        world_size: int = 1,
        max_sequences: int | None = None,
    ) -> None:
        super().__init__()
        _check_shape(seq_len, micro_batch_size, rank, world_size)
        self.tokens = _TokenArray(tokens)
        self.seq_len = seq_len
        self.micro_batch_size = micro_batch_size
        self.rank = rank
        self.world_size = world_size
        available = num_chunks(self.tokens.length, seq_len)
        self.n_sequences = available if max_sequences is None else min(available, max_sequences)
        self.slices = validation_slices(self.n_sequences, micro_batch_size, world_size, rank)

    @property
    def num_batches(self) -> int:
        """Micro-batches on this rank. (No ``__len__``: Lightning warns about sized iterable datasets.)"""
        return len(self.slices)

    def __iter__(self) -> Iterator[torch.Tensor]:
        worker, workers = worker_slot()
        tokens = self.tokens.array
        for start, stop in self.slices[worker::workers]:
            yield torch.from_numpy(gather_chunks(tokens, np.arange(start, stop), self.seq_len))


__all__ = ["PackedTokenDataset", "ValidationDataset", "validation_slices"]
