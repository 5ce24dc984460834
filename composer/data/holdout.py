"""Which documents are held out for validation.

Validation is split at document level, never inside a document, so no held-out text leaks into training
through a shared document. For a materialised source the choice is a hash of (split seed, document index):
deterministic, order preserving, and independent of how documents are batched, read or tokenised. A streamed
source holds out its first documents and the training stream drops every document whose content hash is in
that set (which also drops exact duplicates of validation documents elsewhere in the stream).

The split seed is the data's, never the training run's: runs that differ only in their training seed must be
scored on the same text, or a mean over seeds mixes model noise with validation-set noise.
"""

from __future__ import annotations

import hashlib

import numpy as np

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def splitmix64(x: np.ndarray) -> np.ndarray:
    """The splitmix64 finaliser: a fast, well-mixed 64-bit hash of each element (uint64 arithmetic wraps)."""
    z = x.astype(np.uint64) + _GOLDEN
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def uniform_by_index(n: int, seed: int) -> np.ndarray:
    """A deterministic value in [0, 1) per document index, from (seed, index)."""
    key = splitmix64(np.array([seed], np.uint64))
    return (splitmix64(np.arange(n, dtype=np.uint64) ^ key) >> np.uint64(11)).astype(np.float64) / float(
        1 << 53
    )


def validation_mask(n_docs: int, seed: int, fraction: float) -> np.ndarray:
    """``True`` for held-out documents: about ``fraction`` of them, and at least one per split when possible.

    With ``fraction > 0`` and at least two documents, a split that the hash left empty gets the one document
    whose hash is closest to the threshold, so tiny corpora still have a validation set and a training set.
    """
    if n_docs == 0 or fraction <= 0:
        return np.zeros(n_docs, bool)
    u = uniform_by_index(n_docs, seed)
    mask = u < fraction
    if n_docs >= 2:
        if not mask.any():
            mask[np.argmin(u)] = True
        if mask.all():
            mask[np.argmax(u)] = False
    return mask


def document_hash(text: str) -> int:
    """A 64-bit content hash of a document (BLAKE2b), stable across processes and Python versions."""
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "little")


__all__ = ["document_hash", "splitmix64", "uniform_by_index", "validation_mask"]
