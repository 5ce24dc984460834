"""Data config: where the text comes from, how it is tokenised, packed, held out and cached.

A ``DataConfig`` says nothing about the model or the optimiser; the micro-batch size belongs to the trainer
and is passed to ``TokenDataModule`` separately. Everything that changes the token stream (source, tokenizer,
text field, text unit, document cap, split seed, validation fraction) is part of the cache key, so two configs
never share a stale cache. The shuffle ``seed`` is not: it only changes the order in which cached chunks are read.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from composer.data.errors import DataError
from composer.data.repeated_spans import check_settings as check_repeats

TEXT_UNITS = ("paragraph", "line", "document")
DEFAULT_VAL_DOCUMENTS = 1000


@dataclass(frozen=True)
class DataConfig:
    """Training-data settings.

    ``source``: ``None`` for the offline default corpus (the running Python's standard library, see
    ``composer.data.stdlib_corpus``); a Hugging Face dataset name, optionally with a config as ``name:config``
    (``mlfoundations/dclm-baseline-1.0``, ``HuggingFaceFW/fineweb-edu:sample-10BT``); or a local ``.txt``,
    ``.jsonl``, ``.json`` or ``.parquet`` file (``.gz``/``.zst`` compressed text and JSON too), a glob, or a
    directory of such files.

    ``tokenizer``: ``None`` (or ``"bytes"``) for the offline byte tokenizer, else a Hugging Face tokenizer
    name or local directory (``meta-llama/Llama-3.2-1B`` for paper runs).

    ``streaming``: ``None`` streams hub datasets and materialises local files and the default corpus into a
    memory-mapped token cache; ``True``/``False`` force one or the other (the default corpus is always
    materialised).

    Validation is held out at document level: ``val_fraction`` of the documents of a materialised source
    (chosen by a hash of the document index and ``split_seed``), or the first ``val_documents`` documents of a
    streamed one; ``val_sequences`` caps the number of held-out sequences evaluated.

    ``seed`` shuffles the training order; ``split_seed`` chooses the held-out documents. They are separate so
    that runs differing only in their training seed are scored on exactly the same validation text (a mean
    over seeds is then a mean over models, not over validation sets).

    ``text_unit`` is what a document is in a ``.txt`` file: a paragraph (blank-line separated, the default, so
    a single text file still has documents to hold out), a line, or the whole file. ``max_documents`` reads
    only the first documents of a source, for smoke runs and tests.

    ``cache_dir`` defaults to ``$COMPOSER_CACHE/data``, else ``~/.cache/composer/data``.
    """

    source: str | None = None
    tokenizer: str | None = None
    text_field: str = "text"
    seq_len: int = 256
    val_fraction: float = 0.005
    val_sequences: int | None = None
    seed: int = 0
    split_seed: int = 0
    cache_dir: str | None = None
    streaming: bool | None = None
    num_workers: int = 0
    shuffle_buffer: int = 10_000
    max_documents: int | None = None
    val_documents: int = DEFAULT_VAL_DOCUMENTS
    text_unit: str = "paragraph"
    # a recall-bearing share of the training windows repeat a span of their own text (composer.data.repeated_spans);
    # repeat_span None: 64 bytes or 32 subword tokens, at most a quarter of seq_len. Validation is never changed.
    repeat_share: float = 0.0
    repeat_span: int | None = None

    def __post_init__(self) -> None:
        for name in ("source", "tokenizer", "cache_dir"):
            value = getattr(self, name)
            if value is not None and not (isinstance(value, (str, os.PathLike)) and str(value).strip()):
                raise DataError(f"{name} must be a non-empty string or None, got {value!r}")
            if isinstance(value, os.PathLike):
                object.__setattr__(self, name, os.fspath(value))
        if not (isinstance(self.text_field, str) and self.text_field):
            raise DataError(f"text_field must be a non-empty column name, got {self.text_field!r}")
        _check_int("seq_len", self.seq_len, minimum=1)
        _check_int("seed", self.seed, minimum=0)
        _check_int("split_seed", self.split_seed, minimum=0)
        _check_int("num_workers", self.num_workers, minimum=0)
        _check_int("shuffle_buffer", self.shuffle_buffer, minimum=0)
        _check_int("val_documents", self.val_documents, minimum=0)
        if self.val_sequences is not None:
            _check_int("val_sequences", self.val_sequences, minimum=0)
        if self.max_documents is not None:
            _check_int("max_documents", self.max_documents, minimum=1)
        if isinstance(self.val_fraction, bool) or not isinstance(self.val_fraction, (int, float)):
            raise DataError(f"val_fraction must be a number in [0, 1), got {self.val_fraction!r}")
        if not 0.0 <= self.val_fraction < 1.0:
            raise DataError(f"val_fraction (--val-fraction) must be the share of documents held out, in [0, 1) "
                            f"(e.g. 0.02), got {self.val_fraction}")
        if self.streaming is not None and not isinstance(self.streaming, bool):
            raise DataError(f"streaming must be True, False or None (automatic), got {self.streaming!r}")
        check_repeats(self.repeat_share, self.repeat_span)
        if self.text_unit not in TEXT_UNITS:
            raise DataError(f"text_unit must be one of {', '.join(TEXT_UNITS)}, got {self.text_unit!r}")

    @property
    def cache_root(self) -> Path:
        """Token cache directory: ``cache_dir``, else ``$COMPOSER_CACHE/data``, else ``~/.cache/composer/data``."""
        if self.cache_dir is not None:
            return Path(self.cache_dir).expanduser()
        root = os.environ.get("COMPOSER_CACHE")
        return (Path(root).expanduser() if root else Path.home() / ".cache" / "composer") / "data"

    def replace(self, **changes: Any) -> DataConfig:
        unknown = set(changes) - set(_field_names())
        if unknown:
            raise DataError(f"unknown data field(s) {sorted(unknown)}; valid: {_field_names()}")
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DataConfig:
        unknown = set(data) - set(_field_names())
        if unknown:
            raise DataError(f"unknown data field(s) {sorted(unknown)}; valid: {_field_names()}")
        return cls(**data)


def _check_int(name: str, value: Any, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise DataError(f"{name} must be an integer >= {minimum}, got {value!r}")


def _field_names() -> list[str]:
    return [f.name for f in dataclasses.fields(DataConfig)]


__all__ = ["DEFAULT_VAL_DOCUMENTS", "TEXT_UNITS", "DataConfig"]
