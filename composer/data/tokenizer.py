"""Tokenizers: the offline byte tokenizer and any Hugging Face tokenizer, behind one small interface.

The pipeline needs four things from a tokenizer: a ``name`` (for messages), a ``vocab_size`` (the model's
vocabulary is sized from it), an ``eos_id`` (the separator appended after every document) and batch encoding.
A ``fingerprint`` identifies the exact vocabulary and merges so that the token cache is rebuilt when a
tokenizer at the same path changes.

The byte tokenizer needs no download: ids 0-255 are the UTF-8 bytes of the text and 256 is EOS, so its
vocabulary is 257 (the ``search-1m`` preset rounds it up to 512). It encodes with numpy at memory bandwidth.

Hugging Face tokenizers load through ``transformers.AutoTokenizer`` by hub name or local directory; the paper
runs use the Llama-3 tokenizer (``LLAMA3_TOKENIZER``, 128,256 ids) and its ``<|end_of_text|>`` as EOS. Special
tokens (Llama's BOS) are not added: documents are separated by EOS only.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from composer.data.errors import DataError, describe

LLAMA3_TOKENIZER = "meta-llama/Llama-3.2-1B"
BYTE_TOKENIZER_NAMES = ("bytes", "byte")
_HUB_NAME = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")


@runtime_checkable
class Tokenizer(Protocol):
    name: str
    vocab_size: int
    eos_id: int
    fingerprint: str

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]: ...

    def encode_documents(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]: ...

    def decode(self, ids: Sequence[int]) -> str: ...


def token_dtype(vocab_size: int) -> np.dtype:
    """Smallest unsigned dtype that holds every id: uint16 up to 65,536 ids, else uint32."""
    return np.dtype(np.uint16) if vocab_size <= 1 << 16 else np.dtype(np.uint32)


class ByteTokenizer:
    """UTF-8 bytes as ids 0-255, EOS 256: lossless, offline, and fast (numpy, ~1 GB/s)."""

    name = "bytes"
    vocab_size = 257
    eos_id = 256
    fingerprint = "bytes-utf8-eos256"

    def encode_arrays(self, texts: Sequence[str]) -> list[np.ndarray]:
        return [np.frombuffer(text.encode("utf-8"), np.uint8) for text in texts]

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        return [array.tolist() for array in self.encode_arrays(texts)]

    def encode_documents(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """All documents as one flat array with EOS after each, plus each document's length (EOS included)."""
        encoded = [text.encode("utf-8") for text in texts]
        lengths = np.fromiter((len(b) + 1 for b in encoded), np.int64, len(encoded))
        out = np.empty(int(lengths.sum()), np.uint16)
        eos_at = np.cumsum(lengths) - 1
        is_text = np.ones(out.size, bool)
        is_text[eos_at] = False
        out[is_text] = np.frombuffer(b"".join(encoded), np.uint8)
        out[eos_at] = self.eos_id
        return out, lengths

    def decode(self, ids: Sequence[int]) -> str:
        data = bytes(int(i) for i in ids if int(i) != self.eos_id)
        return data.decode("utf-8", errors="replace")

    def __repr__(self) -> str:
        return "ByteTokenizer(vocab_size=257, eos_id=256)"


class HFTokenizer:
    """A ``transformers`` tokenizer, encoding through its Rust backend when it has one (parallel, quiet)."""

    def __init__(self, tokenizer: Any, name: str) -> None:
        eos_id = tokenizer.eos_token_id
        if eos_id is None:
            raise DataError(
                f"tokenizer {name!r} has no eos token; use a tokenizer that defines one, or set "
                "tokenizer.eos_token before passing it"
            )
        self.hf = tokenizer
        self.name = name
        self.vocab_size = len(tokenizer)  # includes added special tokens, unlike tokenizer.vocab_size
        self.eos_id = int(eos_id)
        self._backend = getattr(tokenizer, "backend_tokenizer", None)
        self.fingerprint = self._fingerprint()

    def _fingerprint(self) -> str:
        if self._backend is not None:
            content = self._backend.to_str()
        else:  # slow tokenizer: the vocabulary is what defines the ids
            content = repr(sorted(self.hf.get_vocab().items()))
        digest = hashlib.sha256(content.encode("utf-8")).hexdigest()[:16]
        return f"hf-{self.vocab_size}-{self.eos_id}-{digest}"

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        texts = list(texts)
        if self._backend is not None:
            return [enc.ids for enc in self._backend.encode_batch_fast(texts, add_special_tokens=False)]
        out = self.hf(texts, add_special_tokens=False, return_attention_mask=False, verbose=False)
        return [list(ids) for ids in out["input_ids"]]

    def encode_documents(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """All documents as one flat array with EOS after each, plus each document's length (EOS included)."""
        dtype = token_dtype(self.vocab_size)
        ids = self.encode_batch(texts)
        lengths = np.fromiter((len(seq) + 1 for seq in ids), np.int64, len(ids))
        out = np.empty(int(lengths.sum()), dtype)
        start = 0
        for seq, length in zip(ids, lengths):
            out[start : start + length - 1] = seq
            out[start + length - 1] = self.eos_id
            start += int(length)
        return out, lengths

    def decode(self, ids: Sequence[int]) -> str:
        return self.hf.decode([int(i) for i in ids])

    def __repr__(self) -> str:
        return f"HFTokenizer({self.name!r}, vocab_size={self.vocab_size}, eos_id={self.eos_id})"


def load_tokenizer(name_or_path: str | os.PathLike | None = None) -> ByteTokenizer | HFTokenizer:
    """The byte tokenizer for ``None``/``"bytes"``, else a Hugging Face tokenizer by local directory or hub
    name.

    A path that exists is loaded with ``local_files_only`` (no network); a hub name goes through the hub (and
    its local cache). Every failure becomes a one-line ``DataError``.
    """
    if name_or_path is None or str(name_or_path).strip().lower() in BYTE_TOKENIZER_NAMES:
        return ByteTokenizer()
    spec = os.fspath(name_or_path).strip()
    path = Path(spec).expanduser()
    local = path.exists()
    if not local and not _HUB_NAME.match(spec):
        raise DataError(
            f"tokenizer path {spec!r} does not exist; pass a directory with tokenizer files, a Hugging Face "
            "tokenizer name (e.g. meta-llama/Llama-3.2-1B), or None for the byte tokenizer"
        )
    try:
        from transformers import AutoTokenizer
        from transformers.utils import logging as hf_logging

        verbosity = hf_logging.get_verbosity()
        hf_logging.set_verbosity_error()  # keep "default legacy behaviour" notices off the log
        try:
            hf = AutoTokenizer.from_pretrained(str(path) if local else spec, local_files_only=local)
        finally:
            hf_logging.set_verbosity(verbosity)
    except DataError:
        raise
    except Exception as err:  # noqa: BLE001 - transformers/huggingface_hub raise OSError, ValueError, HTTP...
        if local:
            raise DataError(
                f"could not load a tokenizer from {spec!r} ({describe(err)}); the directory needs "
                "tokenizer.json or tokenizer_config.json with its vocabulary files (save one with "
                "tokenizer.save_pretrained)"
            ) from None
        raise DataError(
            f"could not load tokenizer {spec!r}: unknown name or Hugging Face hub unreachable "
            f"({describe(err)}); check the name and network access (gated models need `hf auth login`), "
            "or pass a local tokenizer directory or None for the byte tokenizer"
        ) from None
    return HFTokenizer(hf, name=spec)


__all__ = ["LLAMA3_TOKENIZER", "ByteTokenizer", "HFTokenizer", "Tokenizer", "load_tokenizer", "token_dtype"]
