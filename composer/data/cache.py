"""Token cache primitives: content keys, streamed ``.npy`` writing, atomic commits, memory-mapped reads.

Tokenising a corpus is done once; every later run memory-maps the result. A cache entry is a directory named
``<slug>-<key>``, where the key hashes everything that determines its contents (see ``cache_key``). Arrays are
plain ``.npy`` files so that any tool can read them, written without holding the corpus in memory: the header
is reserved up front and filled in when the length is known. Every file is written to a private temporary name
and moved into place with ``os.replace``, and ``meta.json`` is written last, so a reader either sees a
complete entry or none; concurrent builders (several nodes sharing a file system) at worst duplicate work.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
from pathlib import Path
from typing import Any

import numpy as np

from composer.files import atomic_write_text, temporary_path

# Bump when the token layout or anything else that changes cached bytes changes; old entries are then ignored.
PIPELINE_VERSION = 1
META = "meta.json"
_HEADER_BYTES = 128  # a multiple of 64, as the .npy format recommends; room for any 1-D shape


def cache_key(identity: dict[str, Any]) -> str:
    """16 hex digits of SHA-256 over the canonical JSON of ``identity`` (plus the pipeline version)."""
    payload = json.dumps({"pipeline": PIPELINE_VERSION, **identity}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:16]


class NpyWriter:
    """Append 1-D chunks to a ``.npy`` file of unknown final length; ``commit`` publishes it atomically.

    Use as a context manager: an exception before ``commit`` removes the temporary file.
    """

    def __init__(self, path: Path, dtype: np.dtype) -> None:
        self.path = Path(path)
        self.dtype = np.dtype(dtype)
        self.length = 0
        self._tmp = temporary_path(self.path)
        self._file = open(self._tmp, "wb")  # noqa: SIM115 - closed by commit/abort
        self._file.write(b"\0" * _HEADER_BYTES)

    def append(self, array: np.ndarray) -> None:
        array = np.ascontiguousarray(array, dtype=self.dtype)
        if array.ndim != 1:
            raise ValueError("NpyWriter takes 1-D arrays")
        self._file.write(array.data)
        self.length += array.size

    def commit(self) -> Path:
        header = {
            "descr": np.lib.format.dtype_to_descr(self.dtype),
            "fortran_order": False,
            "shape": (self.length,),
        }
        text = repr(header).encode("latin1")
        room = _HEADER_BYTES - 10  # magic (6) + version (2) + header length (2)
        if len(text) + 1 > room:
            raise ValueError("npy header does not fit")  # cannot happen for a 1-D shape
        self._file.seek(0)
        self._file.write(np.lib.format.magic(1, 0) + struct.pack("<H", room) + text.ljust(room - 1) + b"\n")
        self._file.flush()
        os.fsync(self._file.fileno())
        self._file.close()
        os.replace(self._tmp, self.path)
        return self.path

    def abort(self) -> None:
        if not self._file.closed:
            self._file.close()
        self._tmp.unlink(missing_ok=True)

    def __enter__(self) -> NpyWriter:  # noqa: PYI034 - typing.Self needs Python 3.11
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None or not self._file.closed:
            self.abort()


def save_array(path: Path, array: np.ndarray) -> Path:
    """Write a small array atomically."""
    with NpyWriter(path, array.dtype) as writer:
        writer.append(array.reshape(-1))
        return writer.commit()


def write_json(path: Path, data: dict[str, Any]) -> Path:
    """Write JSON atomically (the completion marker of a cache entry)."""
    return atomic_write_text(path, json.dumps(data, indent=2, sort_keys=True) + "\n")


def read_meta(directory: Path) -> dict[str, Any] | None:
    """The entry's metadata, or None while it is missing or incomplete."""
    path = Path(directory) / META
    if not path.is_file():
        return None
    try:
        meta = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return meta if meta.get("pipeline") == PIPELINE_VERSION else None


def open_tokens(path: Path) -> np.ndarray:
    """Memory-map a token array read-only (no copy; pages are shared by every process on the machine)."""
    return np.load(path, mmap_mode="r")


__all__ = [
    "META",
    "PIPELINE_VERSION",
    "NpyWriter",
    "cache_key",
    "open_tokens",
    "read_meta",
    "save_array",
    "write_json",
]
