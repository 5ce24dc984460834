"""From a ``DataConfig`` to datasets: resolve the source and tokenizer, build the caches, make the datasets.

``DataPipeline`` is the framework-free core that ``TokenDataModule`` wraps; a plain PyTorch loop can use it
directly::

    pipeline = DataPipeline(config)
    if rank == 0:
        pipeline.prepare()          # tokenise into the cache (or hold out the stream's validation documents)
    torch.distributed.barrier()     # other ranks wait, then memory-map what rank 0 built
    loader = TokenLoader(pipeline.train_dataset(micro_batch_size, rank, world_size))

Materialised sources (local files, the default corpus, hub datasets with ``streaming=False``) are tokenised
once into memory-mapped arrays (``corpus``); streamed sources (hub datasets by default) are read, tokenised
and packed on the fly (``streaming``).
"""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path
from typing import Any

import numpy as np

from composer.data.cache import open_tokens, read_meta
from composer.data.config import DataConfig
from composer.data.corpus import TokenCorpus, load_corpus, prepare_corpus
from composer.data.errors import DataError
from composer.data.loader import ResumableStream
from composer.data.packed import PackedTokenDataset, ValidationDataset
from composer.data.packing import dropped_tail, num_chunks
from composer.data.repeated_spans import RepeatedSpans, default_span
from composer.data.sources import Source, StdlibSource, resolve_source
from composer.data.streaming import StreamingTokenDataset, prepare_stream_validation, stream_cache_dir
from composer.data.tokenizer import ByteTokenizer, HFTokenizer, load_tokenizer

log = logging.getLogger(__name__)


class DataPipeline:
    """The tokenizer, source, caches and datasets of one ``DataConfig``. Everything is resolved lazily."""

    def __init__(self, config: DataConfig) -> None:
        if not isinstance(config, DataConfig):
            raise DataError(f"expected a DataConfig, got {type(config).__name__}")
        self.config = config
        self._tokenizer: ByteTokenizer | HFTokenizer | None = None
        self._source: Source | None = None
        self._corpus: TokenCorpus | None = None
        self._stream_dir: Path | None = None

    # -- resolution ------------------------------------------------------------------------------------------
    @property
    def tokenizer(self) -> ByteTokenizer | HFTokenizer:
        if self._tokenizer is None:
            self._tokenizer = load_tokenizer(self.config.tokenizer)
        return self._tokenizer

    @property
    def vocab_size(self) -> int:
        return self.tokenizer.vocab_size

    @property
    def source(self) -> Source:
        if self._source is None:
            self._source = resolve_source(self.config.source)
        return self._source

    @property
    def streaming(self) -> bool:
        source = self.source
        if self.config.streaming is None:
            return source.streams_by_default
        if self.config.streaming and isinstance(source, StdlibSource):
            raise DataError("the default corpus is always materialised; set streaming to None or False")
        return self.config.streaming

    # -- caches ----------------------------------------------------------------------------------------------
    def prepare(self) -> Path:
        """Build what the run needs on disk (the token cache, or the stream's held-out documents); idempotent.

        Call it on one process per machine (or per shared file system) before the others load. Returns the
        cache directory.
        """
        if self.streaming:
            return prepare_stream_validation(self.config, self.source, self.tokenizer)
        return prepare_corpus(self.config, self.source, self.tokenizer)

    def load(self) -> None:
        """Open the caches, building missing ones (writes are atomic, so a racing build is harmless)."""
        if self.streaming:
            if self._stream_dir is None:
                self._stream_dir = self.prepare()
        elif self._corpus is None:
            self._corpus = load_corpus(self.config, self.source, self.tokenizer)

    @property
    def corpus(self) -> TokenCorpus:
        self.load()
        if self._corpus is None:
            raise DataError("a streamed source has no materialised corpus; use train_dataset()/val_dataset()")
        return self._corpus

    def _val_path(self) -> Path:
        self.load()
        return self._stream_dir / "val.npy" if self._stream_dir is not None else self.corpus.val_path

    # -- datasets --------------------------------------------------------------------------------------------
    def train_dataset(
        self, micro_batch_size: int, rank: int = 0, world_size: int = 1, num_workers: int | None = None
    ) -> ResumableStream:
        """This rank's endless training stream of ``[micro_batch_size, seq_len + 1]`` micro-batches."""
        self.load()
        config = self.config
        if self._stream_dir is not None:
            if config.repeat_share > 0:
                raise DataError("repeat_share repeats spans in a materialised corpus's windows; a streamed source "
                                "has none: pass streaming=False (or a local copy of the data)")
            held_out = np.load(self._stream_dir / "held_out.npy")
            dataset = StreamingTokenDataset(
                self.source.open_stream(config),
                self.tokenizer,
                config.seq_len,
                micro_batch_size,
                text_field=self.source.text_field(config),
                held_out=held_out,
                seed=config.seed,
                shuffle_buffer=config.shuffle_buffer,
                rank=rank,
                world_size=world_size,
                max_documents=config.max_documents,
                fingerprint=f"{self._stream_dir.name}",
            )
            dataset.loader_workers = max(1, config.num_workers if num_workers is None else num_workers)
            return dataset
        corpus = self.corpus
        meta = corpus.meta
        repeats = self.repeated_spans()
        return PackedTokenDataset(
            corpus.train_path,
            config.seq_len,
            micro_batch_size,
            seed=config.seed,
            rank=rank,
            world_size=world_size,
            fingerprint=f"{self.tokenizer.fingerprint}:{meta['documents']}:{meta['train_tokens']}:{meta['val_tokens']}"
            + (f":{repeats.identity}" if repeats is not None else ""),
            repeats=repeats,
        )

    def repeated_spans(self) -> RepeatedSpans | None:
        """The recall-bearing share of the training stream (``repeat_share``), or ``None`` when there is none."""
        config = self.config
        if config.repeat_share <= 0:
            return None
        span = config.repeat_span or default_span(isinstance(self.tokenizer, ByteTokenizer), config.seq_len)
        return RepeatedSpans(config.repeat_share, span, config.seed)

    def val_dataset(self, micro_batch_size: int, rank: int = 0, world_size: int = 1) -> ValidationDataset:
        """This rank's share of the fixed held-out sequences (at most ``val_sequences`` in all ranks)."""
        return ValidationDataset(
            self._val_path(),
            self.config.seq_len,
            micro_batch_size,
            rank=rank,
            world_size=world_size,
            max_sequences=self.config.val_sequences,
        )

    def validation_identity(self, max_sequences: int | None = None) -> dict[str, Any]:
        """What a validation pass scores: ``val_sequences``, ``val_tokens`` (predicted tokens, ``seq_len`` per
        sequence) and ``val_fingerprint``, a hash of the token ids of exactly those sequences.

        Two runs with equal fingerprints were scored on the same text, so their losses can be compared and
        averaged; this is what makes a mean over training seeds mean something. ``max_sequences`` caps the
        sequences as ``val_dataset`` does (``None``: ``config.val_sequences``, else the whole split).
        """
        dataset = ValidationDataset(self._val_path(), self.config.seq_len, 1,
                                    max_sequences=self.config.val_sequences if max_sequences is None else max_sequences)
        seq_len, n, tokens = self.config.seq_len, dataset.n_sequences, dataset.tokens.array
        digest = hashlib.blake2b(digest_size=16)
        digest.update(f"seq_len={seq_len};sequences={n};".encode())
        block = 1 << 22  # hash in bounded blocks: the held-out split of a large corpus need not fit in memory
        end = n * (seq_len + 1)
        for start in range(0, end, block):
            digest.update(np.ascontiguousarray(tokens[start : min(start + block, end)], dtype="<i8").tobytes())
        return {"val_sequences": n, "val_tokens": n * seq_len, "val_fingerprint": digest.hexdigest()}

    # -- reporting -------------------------------------------------------------------------------------------
    def stats(self) -> dict[str, Any]:
        """Sizes as the run sees them: documents, tokens, sequences (chunks) and dropped tail tokens."""
        self.load()
        seq_len = self.config.seq_len
        out: dict[str, Any] = {
            "source": self.source.description,
            "tokenizer": self.tokenizer.name,
            "vocab_size": self.vocab_size,
            "streaming": self._stream_dir is not None,
            "seq_len": seq_len,
        }
        if self._stream_dir is not None:
            meta = read_meta(self._stream_dir) or {}
            val_tokens = int(open_tokens(self._stream_dir / "val.npy").shape[0])
            out.update(
                documents=None, train_documents=None, tokens=None, train_tokens=None, train_chunks=None
            )
            out.update(val_documents=meta.get("val_documents"), val_tokens=val_tokens)
            dropped = dropped_tail(val_tokens, seq_len)
        else:
            meta = self.corpus.meta
            val_tokens = int(meta["val_tokens"])
            out.update(
                documents=meta["documents"],
                train_documents=meta["train_documents"],
                val_documents=meta["val_documents"],
                tokens=meta["tokens"],
                train_tokens=meta["train_tokens"],
                val_tokens=val_tokens,
                train_chunks=num_chunks(meta["train_tokens"], seq_len),
            )
            dropped = dropped_tail(meta["train_tokens"], seq_len) + dropped_tail(val_tokens, seq_len)
        available = num_chunks(val_tokens, seq_len)
        cap = self.config.val_sequences
        out["val_chunks"] = available if cap is None else min(available, cap)
        out["val_chunks_available"] = available
        out["dropped_tail_tokens"] = dropped
        out["cache_dir"] = str(self._stream_dir if self._stream_dir is not None else self.corpus.directory)
        return out


def prepare(config: DataConfig) -> Path:
    """Build the caches ``config`` needs and return their directory (``DataPipeline(config).prepare()``)."""
    return DataPipeline(config).prepare()


__all__ = ["DataPipeline", "prepare", "stream_cache_dir"]
