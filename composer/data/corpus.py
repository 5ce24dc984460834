"""Materialised corpora: tokenise a source once, split it once per split seed, memory-map it ever after.

Two cache levels, so that changing the split seed or the validation fraction never re-tokenises:

``<cache_root>/<slug>-<key>/``: ``tokens.npy`` (every document in source order, EOS after each, uint16 for
vocabularies up to 65,536 ids else uint32), ``doc_lengths.npy`` (tokens per document, EOS included) and
``meta.json``. The key covers the source identity (file paths, sizes and mtimes; the Python version for the
default corpus; the hub name and config), the tokenizer fingerprint, the text field, the text unit of ``.txt``
files, ``max_documents`` and the pipeline version.

``.../split-<key>/``: ``train.npy`` and ``val.npy``, the training and held-out documents (chosen by
``holdout.validation_mask`` from ``split_seed`` and ``val_fraction``; the training seed plays no part, so
every training seed sees the same held-out text) each concatenated in source order, and
``meta.json`` with the counts.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from composer.data.cache import (
    META,
    PIPELINE_VERSION,
    NpyWriter,
    cache_key,
    open_tokens,
    read_meta,
    write_json,
)
from composer.data.config import DataConfig
from composer.data.errors import DataError
from composer.data.holdout import validation_mask
from composer.data.sources import LocalFiles, Source, no_documents
from composer.data.tokenizer import Tokenizer, token_dtype

log = logging.getLogger(__name__)
_SPLIT_BLOCK_TOKENS = 1 << 24  # split the corpus in blocks of ~16M tokens: bounded memory for any corpus size


def reading_identity(config: DataConfig, source: Source) -> dict[str, Any]:
    """The config fields that change which text is read from ``source``."""
    identity: dict[str, Any] = {
        "text_field": source.text_field(config),
        "max_documents": config.max_documents,
    }
    if isinstance(source, LocalFiles) and source.builder == "text":
        identity["text_unit"] = config.text_unit
    return identity


def token_cache_dir(config: DataConfig, source: Source, tokenizer: Tokenizer) -> Path:
    identity = {
        "source": source.identity(),
        "tokenizer": tokenizer.fingerprint,
        **reading_identity(config, source),
    }
    return config.cache_root / f"{source.slug}-{cache_key(identity)}"


def split_cache_dir(token_dir: Path, config: DataConfig) -> Path:
    # the key's name stays "seed" so that caches built before the split seed had a name of its own still match
    key = cache_key({"seed": config.split_seed, "val_fraction": float(config.val_fraction)})
    return token_dir / f"split-{key}"


@dataclass(frozen=True)
class TokenCorpus:
    """A tokenised, split corpus on disk; arrays are memory-mapped on first use, in each process."""

    directory: Path
    meta: dict[str, Any]
    _arrays: dict[str, np.ndarray] = field(default_factory=dict, repr=False, compare=False)

    @property
    def train_path(self) -> Path:
        return self.directory / "train.npy"

    @property
    def val_path(self) -> Path:
        return self.directory / "val.npy"

    def _open(self, name: str) -> np.ndarray:
        if name not in self._arrays:
            self._arrays[name] = open_tokens(self.directory / f"{name}.npy")
        return self._arrays[name]

    @property
    def train(self) -> np.ndarray:
        return self._open("train")

    @property
    def val(self) -> np.ndarray:
        return self._open("val")


def build_tokens(config: DataConfig, source: Source, tokenizer: Tokenizer, directory: Path) -> dict[str, Any]:
    """Tokenise every document of ``source`` into ``directory`` (the first cache level); return its meta."""
    meta = read_meta(directory)
    if meta is not None:
        return meta
    directory.mkdir(parents=True, exist_ok=True)
    log.info("tokenising %s with %s into %s", source.description, tokenizer.name, directory)
    start = time.perf_counter()
    documents = 0
    with (
        NpyWriter(directory / "tokens.npy", token_dtype(tokenizer.vocab_size)) as tokens,
        NpyWriter(directory / "doc_lengths.npy", np.int64) as lengths,
    ):
        for texts in source.iter_texts(config):
            flat, doc_lengths = tokenizer.encode_documents(texts)
            tokens.append(flat)
            lengths.append(doc_lengths)
            documents += len(texts)
        if documents == 0:
            raise DataError(no_documents(source))
        tokens.commit()
        lengths.commit()
    seconds = time.perf_counter() - start
    meta = {
        "pipeline": PIPELINE_VERSION,
        "source": source.description,
        "identity": source.identity(),
        "reading": reading_identity(config, source),
        "tokenizer": tokenizer.name,
        "tokenizer_fingerprint": tokenizer.fingerprint,
        "vocab_size": tokenizer.vocab_size,
        "eos_id": tokenizer.eos_id,
        "dtype": token_dtype(tokenizer.vocab_size).name,
        "documents": documents,
        "tokens": tokens.length,
        "seconds": round(seconds, 3),
        "tokens_per_second": round(tokens.length / max(seconds, 1e-9)),
    }
    write_json(directory / META, meta)
    log.info("tokenised %d documents, %d tokens in %.1fs", documents, tokens.length, seconds)
    return meta


def build_split(token_dir: Path, split_dir: Path, seed: int, val_fraction: float) -> dict[str, Any]:
    """Write the training and held-out token arrays of a tokenised corpus (the second cache level)."""
    meta = read_meta(split_dir)
    if meta is not None:
        return meta
    split_dir.mkdir(parents=True, exist_ok=True)
    tokens = open_tokens(token_dir / "tokens.npy")
    lengths = np.load(token_dir / "doc_lengths.npy")
    held_out = validation_mask(len(lengths), seed, val_fraction)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    with (
        NpyWriter(split_dir / "train.npy", tokens.dtype) as train,
        NpyWriter(split_dir / "val.npy", tokens.dtype) as val,
    ):
        first = 0
        while first < len(lengths):
            last = int(np.searchsorted(offsets, offsets[first] + _SPLIT_BLOCK_TOKENS, side="right")) - 1
            last = min(max(last, first + 1), len(lengths))
            block = np.asarray(tokens[offsets[first] : offsets[last]])
            in_val = np.repeat(held_out[first:last], lengths[first:last])
            val.append(block[in_val])
            train.append(block[~in_val])
            first = last
        train.commit()
        val.commit()
    meta = {
        "pipeline": PIPELINE_VERSION,
        "seed": seed,
        "val_fraction": val_fraction,
        "documents": len(lengths),
        "train_documents": int((~held_out).sum()),
        "val_documents": int(held_out.sum()),
        "tokens": int(offsets[-1]),
        "train_tokens": train.length,
        "val_tokens": val.length,
    }
    write_json(split_dir / META, meta)
    return meta


def prepare_corpus(config: DataConfig, source: Source, tokenizer: Tokenizer) -> Path:
    """Build whatever of the cache is missing; return the split directory. Cheap when everything is cached."""
    token_dir = token_cache_dir(config, source, tokenizer)
    split_dir = split_cache_dir(token_dir, config)
    if read_meta(split_dir) is None:
        build_tokens(config, source, tokenizer, token_dir)
        build_split(token_dir, split_dir, config.split_seed, float(config.val_fraction))
    return split_dir


def load_corpus(config: DataConfig, source: Source, tokenizer: Tokenizer, build: bool = True) -> TokenCorpus:
    """The cached corpus for ``config``; built first when missing unless ``build`` is False."""
    token_dir = token_cache_dir(config, source, tokenizer)
    split_dir = split_cache_dir(token_dir, config)
    split_meta = read_meta(split_dir)
    if split_meta is None:
        if not build:
            raise DataError(
                f"no token cache for {source.description} under {str(config.cache_root)!r}; call "
                "composer.data.prepare(config) (TokenDataModule.prepare_data) first"
            )
        prepare_corpus(config, source, tokenizer)
        split_meta = read_meta(split_dir)
    token_meta = read_meta(token_dir) or {}
    return TokenCorpus(split_dir, {**token_meta, **(split_meta or {})})


__all__ = ["TokenCorpus", "build_split", "build_tokens", "load_corpus", "prepare_corpus", "token_cache_dir"]
