"""Streaming sources: web-scale corpora read, tokenised and packed on the fly.

For a corpus too large to tokenise up front (DCLM-baseline, FineWeb-Edu), each rank reads its own part of the
stream (``datasets.distributed.split_dataset_by_node``: whole shards when their number divides the world size,
else every ``W``-th document), shuffles documents in a buffer (``IterableDataset.shuffle(seed, buffer_size)``,
which also shuffles shard order per epoch), tokenises them in small batches, and packs the tokens into
``[micro_batch, seq_len + 1]`` micro-batches with EOS between documents. Dataloader workers split the rank's
shards among themselves (``datasets`` does this inside each worker).

Validation: the first ``val_documents`` documents of the unshuffled stream are held out, tokenised once into
the cache (like a materialised source) together with their content hashes; the training stream drops every
document whose hash is in that set, whatever rank, worker or shard reads it.

Resuming: every micro-batch carries a snapshot of its worker's reader state (``IterableDataset.state_dict()``,
the epoch, and the tokens left in the packing buffer); the state after ``n`` consumed batches is each worker's
latest snapshot before batch ``n``. Resuming restores those. It is exact when ``shuffle_buffer`` is 0; with a
shuffle buffer, the documents that were in the buffer at save time are skipped (a ``datasets`` limitation).
The number of workers and the world size must match the saved run to restore reader positions.
"""

from __future__ import annotations

import copy
import logging
import warnings
from collections import deque
from collections.abc import Iterator
from itertools import islice
from pathlib import Path
from typing import Any

import numpy as np
import torch

from composer.data.cache import (
    META,
    PIPELINE_VERSION,
    NpyWriter,
    cache_key,
    read_meta,
    save_array,
    write_json,
)
from composer.data.config import DataConfig
from composer.data.corpus import reading_identity
from composer.data.errors import DataError, describe
from composer.data.holdout import document_hash
from composer.data.loader import ResumableStream, worker_slot
from composer.data.packed import _check_shape
from composer.data.sources import Source
from composer.data.tokenizer import Tokenizer, token_dtype

log = logging.getLogger(__name__)
STATE_VERSION = 1
_DOCS_PER_BATCH = 64  # documents tokenised together: enough for the fast tokenizers' parallelism
_HISTORY = 32  # snapshots kept per worker: covers any prefetch depth between reader and training step


def stream_cache_dir(config: DataConfig, source: Source, tokenizer: Tokenizer) -> Path:
    identity = {
        "source": source.identity(),
        "tokenizer": tokenizer.fingerprint,
        "streaming_val_documents": config.val_documents,
        **reading_identity(config, source),
    }
    return config.cache_root / f"{source.slug}-stream-{cache_key(identity)}"


def prepare_stream_validation(config: DataConfig, source: Source, tokenizer: Tokenizer) -> Path:
    """Tokenise the first ``val_documents`` documents of the stream into the cache; return its directory.

    ``val.npy`` holds their tokens and ``held_out.npy`` their content hashes. Reading them also checks, before
    any worker starts, that the source can be opened and has the text field.
    """
    directory = stream_cache_dir(config, source, tokenizer)
    if read_meta(directory) is not None:
        return directory
    directory.mkdir(parents=True, exist_ok=True)
    hashes: list[int] = []
    with NpyWriter(directory / "val.npy", token_dtype(tokenizer.vocab_size)) as val:
        if config.val_documents > 0:
            for texts in source.iter_texts(config.replace(max_documents=config.val_documents)):
                flat, _ = tokenizer.encode_documents(texts)
                val.append(flat)
                hashes.extend(document_hash(text) for text in texts)
        else:  # still open the stream, so that a bad name or field fails here rather than in a worker
            next(source.iter_texts(config.replace(max_documents=1)), None)
        val.commit()
    save_array(directory / "held_out.npy", np.array(sorted(set(hashes)), np.uint64))
    meta = {
        "pipeline": PIPELINE_VERSION,
        "source": source.description,
        "identity": source.identity(),
        "tokenizer": tokenizer.name,
        "tokenizer_fingerprint": tokenizer.fingerprint,
        "vocab_size": tokenizer.vocab_size,
        "val_documents": len(hashes),
        "val_tokens": val.length,
    }
    write_json(directory / META, meta)
    return directory


class _KeepForTraining:
    """``datasets`` filter: a non-empty text that is not held out (a class, so that workers can pickle it)."""

    def __init__(self, held_out: np.ndarray, field: str) -> None:
        self.held_out = frozenset(int(h) for h in held_out)
        self.field = field

    def __call__(self, example: dict[str, Any]) -> bool:
        text = example.get(self.field)
        return isinstance(text, str) and bool(text) and document_hash(text) not in self.held_out


class StreamingTokenDataset(ResumableStream):
    """One rank's endless stream of ``[micro_batch_size, seq_len + 1]`` micro-batches packed from documents.

    ``stream`` is the source's ``datasets.IterableDataset`` (all ranks' documents, unshuffled); this class
    takes this rank's part, drops held-out documents, shuffles, tokenises and packs. See the module docstring
    for resume.
    """

    def __init__(
        self,
        stream: Any,
        tokenizer: Tokenizer,
        seq_len: int,
        micro_batch_size: int,
        *,
        text_field: str = "text",
        held_out: np.ndarray | None = None,
        seed: int = 0,
        shuffle_buffer: int = 10_000,
        rank: int = 0,
        world_size: int = 1,
        max_documents: int | None = None,
        fingerprint: str = "",
    ) -> None:
        super().__init__()
        _check_shape(seq_len, micro_batch_size, rank, world_size)
        from datasets.distributed import split_dataset_by_node

        self.tokenizer = tokenizer
        self.seq_len = seq_len
        self.micro_batch_size = micro_batch_size
        self.text_field = text_field
        self.seed = seed
        self.shuffle_buffer = shuffle_buffer
        self.rank = rank
        self.world_size = world_size
        self.fingerprint = fingerprint
        held_out = np.zeros(0, np.uint64) if held_out is None else held_out
        try:
            node = stream.select_columns([text_field])
            if max_documents is not None:
                node = node.take(max_documents)
            node = node.filter(_KeepForTraining(held_out, text_field))
            node = split_dataset_by_node(node, rank=rank, world_size=world_size)
            if shuffle_buffer > 0:
                node = node.shuffle(seed=seed, buffer_size=shuffle_buffer)
        except Exception as err:  # noqa: BLE001 - wrapped into a one-line DataError
            raise DataError(
                f"could not set up the training stream ({describe(err)}); check text_field"
            ) from None
        self._stream = node
        self.loader_workers = 1  # set by the datamodule to the DataLoader's worker count
        self._resume: dict[int, dict[str, Any] | None] = {}
        self._base = 0  # micro-batches per rank consumed before the state this stream started from
        self._history: dict[int, deque[tuple[int, Any]]] = {}
        self._skip_at_load = 0  # batches of the loaded round to regenerate and drop (see "resume" below)
        self._dropped = 0

    # -- iteration -------------------------------------------------------------------------------------------
    def _generate(self) -> Iterator[tuple[torch.Tensor, Any]]:
        worker, _ = worker_slot()
        stream = copy.deepcopy(self._stream)  # a fresh reader per pass, never a previous pass's resume point
        has_shards = worker < stream.num_shards
        start = self._resume.get(worker)
        epoch = int(start["epoch"]) if start else 0
        buffer = np.asarray(start["buffer"], np.int64) if start else np.zeros(0, np.int64)
        reader = start["reader"] if start else None
        need = self.micro_batch_size * (self.seq_len + 1)
        while True:
            stream.set_epoch(epoch)
            resumed = reader is not None
            if resumed:
                stream.load_state_dict(reader)
                reader = None
            documents = 0
            examples = iter(stream)
            while batch := list(islice(examples, _DOCS_PER_BATCH)):
                documents += len(batch)
                flat, _ = self.tokenizer.encode_documents([example[self.text_field] for example in batch])
                buffer = np.concatenate([buffer, flat.astype(np.int64)])
                while buffer.size >= need:
                    out, buffer = buffer[:need].reshape(self.micro_batch_size, -1), buffer[need:]
                    snapshot = {
                        "epoch": epoch,
                        "reader": stream.state_dict(),
                        "buffer": torch.from_numpy(buffer.astype(np.int32)),  # ids < 2**31
                    }
                    yield torch.from_numpy(out.copy()), snapshot
            if documents == 0 and not resumed:
                if not has_shards:
                    return  # more workers than shards: datasets leaves this one idle
                raise DataError(
                    "the streamed source yielded no training documents (all held out, empty, or none for "
                    "this rank); use a larger source, fewer val_documents, or a larger max_documents"
                )
            epoch += 1

    # -- resume ----------------------------------------------------------------------------------------------
    # Workers take turns: with A active workers (those that have shards), the loader's batch i comes from
    # worker i % A. A saved position is "every worker's reader state at the start of the current round of A
    # batches, plus the number of batches of that round already consumed" (``skip``). On resume, the workers
    # regenerate those ``skip`` batches, which are dropped, so the loader's turn order lines up again. Indices
    # below are counted from the loaded position's round start ("logical" indices): received batch r has index
    # r, the first ``skip`` of them being the regenerated ones.

    @property
    def active_workers(self) -> int:
        return max(1, min(self.loader_workers, self._stream.num_shards))

    def _record(self, index: int, worker: int, snapshot: Any) -> None:
        self._history.setdefault(worker, deque(maxlen=_HISTORY)).append((index, snapshot))

    def _received(self, item: tuple[torch.Tensor, int, Any]) -> torch.Tensor | None:
        batch, worker, snapshot = item
        self._record(self.batches_yielded + self._dropped, int(worker), snapshot)  # = its logical index
        if self._dropped < self._skip_at_load:
            self._dropped += 1
            return None
        self.batches_yielded += 1
        return batch

    def _snapshot_before(self, worker: int, index: int) -> Any:
        history = self._history.get(worker, ())
        for recorded, snapshot in reversed(history):
            if recorded < index:
                return snapshot
        if (
            len(history) == _HISTORY
        ):  # full, so older snapshots were evicted: the one needed may be among them
            raise DataError(
                f"cannot resume the stream at batch {index}: only the last {_HISTORY} reader states per "
                "worker are kept; save the data state right after the training step that consumed the batch"
            )
        return self._resume.get(worker)  # this worker has produced nothing since the loaded position

    def state_dict(self, batches_consumed: int | None = None) -> dict[str, Any]:
        consumed = self._consumed(batches_consumed)
        logical = self._skip_at_load + consumed
        active = self.active_workers
        round_start = logical - logical % active
        workers = {str(w): self._snapshot_before(w, round_start) for w in range(active)}
        return {
            "kind": "streaming",
            "version": STATE_VERSION,
            "workers": workers,
            "skip": logical - round_start,
            "num_workers": self.loader_workers,
            "world_size": self.world_size,
            "rank": self.rank,
            "micro_batches_per_rank": self._base + consumed,
            "micro_batch_size": self.micro_batch_size,
            "seq_len": self.seq_len,
            "seed": self.seed,
            "fingerprint": self.fingerprint,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._check_state(
            state,
            "streaming",
            STATE_VERSION,
            {"seq_len": self.seq_len, "micro_batch_size": self.micro_batch_size, "fingerprint": self.fingerprint},
        )
        self._history.clear()
        self.batches_yielded = 0
        self._dropped = 0
        self._base = int(state.get("micro_batches_per_rank", 0))
        same_layout = (
            state.get("num_workers") == self.loader_workers and state.get("world_size") == self.world_size
        )
        if same_layout:
            self._resume = {int(w): s for w, s in state.get("workers", {}).items()}
            self._skip_at_load = int(state.get("skip", 0))
            return
        warnings.warn(
            f"stream state was saved with world_size={state.get('world_size')}, "
            f"num_workers={state.get('num_workers')}; this run has world_size={self.world_size}, "
            f"num_workers={self.loader_workers}, so reader positions "
            "cannot be restored and the stream restarts at the beginning of the saved epoch",
            stacklevel=2,
        )
        epoch = max((int(s["epoch"]) for s in state.get("workers", {}).values() if s), default=0)
        empty = torch.zeros(0, dtype=torch.int64)
        self._resume = {
            w: {"epoch": epoch, "reader": None, "buffer": empty} for w in range(self.loader_workers)
        }
        self._skip_at_load = 0


__all__ = ["StreamingTokenDataset", "prepare_stream_validation", "stream_cache_dir"]
