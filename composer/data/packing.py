"""Packing a token stream into fixed-length training sequences, and the order they are visited in.

The stream (documents joined by EOS) is cut into non-overlapping chunks of ``seq_len + 1`` tokens: chunk ``i``
is ``tokens[i * (seq_len + 1) : (i + 1) * (seq_len + 1)]``, its input is ``chunk[:-1]`` and its target
``chunk[1:]``. Every token is in exactly one chunk except the tail shorter than a chunk, which is dropped (and
reported). A chunk may span a document boundary; the EOS between documents is then an ordinary token to
predict, as in GPT-style pretraining. Non-overlapping chunks lose the prediction of each chunk's first token,
one token in ``seq_len + 1``, and in exchange nothing is seen twice per epoch.

Visit order: epoch ``e`` visits the chunks in a permutation drawn from ``numpy.random.default_rng((seed,
e))``, and epochs follow each other in one endless stream of chunk positions. ``(seed, e)`` rather than ``seed
+ e`` keeps runs with neighbouring seeds from replaying each other's epochs.
"""

from __future__ import annotations

import numpy as np


def num_chunks(n_tokens: int, seq_len: int) -> int:
    return n_tokens // (seq_len + 1)


def dropped_tail(n_tokens: int, seq_len: int) -> int:
    """Tokens after the last whole chunk; they are never trained on."""
    return n_tokens % (seq_len + 1)


def epoch_permutation(n_chunks: int, seed: int, epoch: int) -> np.ndarray:
    order = np.random.default_rng((seed, epoch)).permutation(n_chunks)
    return order.astype(np.int32) if n_chunks < 2**31 else order


def gather_chunks(tokens: np.ndarray, chunk_ids: np.ndarray, seq_len: int) -> np.ndarray:
    """``[len(chunk_ids), seq_len + 1]`` int64 array of the given chunks (one fancy-indexed memmap read)."""
    width = seq_len + 1
    index = np.asarray(chunk_ids, np.int64)[:, None] * width + np.arange(width, dtype=np.int64)
    return np.asarray(tokens[index], dtype=np.int64)


class ChunkOrder:
    """Chunk id at each position of the endless, epoch-shuffled chunk stream (caches the current order)."""

    def __init__(self, n_chunks: int, seed: int, shuffle: bool = True) -> None:
        if n_chunks <= 0:
            raise ValueError("ChunkOrder needs at least one chunk")
        self.n_chunks = n_chunks
        self.seed = seed
        self.shuffle = shuffle
        self._cache: dict[int, np.ndarray] = {}

    def permutation(self, epoch: int) -> np.ndarray:
        if epoch not in self._cache:
            if len(self._cache) >= 2:  # a micro-batch spans at most two epochs' orders at a time
                self._cache.pop(min(self._cache))
            self._cache[epoch] = (
                epoch_permutation(self.n_chunks, self.seed, epoch)
                if self.shuffle
                else np.arange(self.n_chunks)
            )
        return self._cache[epoch]

    def __getitem__(self, positions: np.ndarray) -> np.ndarray:
        positions = np.asarray(positions, np.int64)
        epochs, offsets = np.divmod(positions, self.n_chunks)
        out = np.empty(positions.shape, np.int64)
        for epoch in np.unique(epochs):
            selected = epochs == epoch
            out[selected] = self.permutation(int(epoch))[offsets[selected]]
        return out


__all__ = ["ChunkOrder", "dropped_tail", "epoch_permutation", "gather_chunks", "num_chunks"]
