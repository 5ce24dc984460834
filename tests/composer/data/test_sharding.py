"""Ranks and dataloader workers split the micro-batch stream with nothing lost, duplicated or reordered."""

from __future__ import annotations

from itertools import islice

import numpy as np
import pytest
import torch

from composer.data import PackedTokenDataset, TokenLoader

SEQ_LEN, MICRO_BATCH, N_CHUNKS = 5, 3, 36  # 12 micro-batches per epoch
TOKENS = np.arange(N_CHUNKS * (SEQ_LEN + 1) + 4, dtype=np.uint16)


def rank_batches(rank: int, world: int, workers: int, n: int) -> list[torch.Tensor]:
    dataset = PackedTokenDataset(TOKENS, SEQ_LEN, MICRO_BATCH, seed=7, rank=rank, world_size=world)
    return list(islice(TokenLoader(dataset, num_workers=workers), n))


@pytest.fixture(scope="module")
def reference() -> list[torch.Tensor]:
    """Two epochs of the single-rank, single-process stream."""
    dataset = PackedTokenDataset(TOKENS, SEQ_LEN, MICRO_BATCH, seed=7)
    return list(islice(iter(dataset), 24))


@pytest.mark.parametrize("workers", [0, 1, 2])
@pytest.mark.parametrize("world", [1, 2, 3])
def test_ranks_and_workers_partition_the_stream(world, workers, reference):
    per_rank = 24 // world
    streams = [rank_batches(rank, world, workers, per_rank) for rank in range(world)]
    for rank, batches in enumerate(streams):
        assert all(b.shape == (MICRO_BATCH, SEQ_LEN + 1) and b.dtype == torch.int64 for b in batches)
        # rank r gets global micro-batches r, r + W, r + 2W, ... in order, whatever the worker count
        assert all(torch.equal(b, reference[rank + world * i]) for i, b in enumerate(batches))
    for epoch in range(2):  # each epoch: every chunk exactly once across all ranks
        rows = [
            tuple(row.tolist())
            for rank in range(world)
            for i, b in enumerate(streams[rank])
            if (rank + world * i) // 12 == epoch
            for row in b
        ]
        assert len(rows) == len(set(rows)) == N_CHUNKS
        assert sorted(token for row in rows for token in row) == list(range(N_CHUNKS * (SEQ_LEN + 1)))


def test_a_second_pass_over_the_loader_continues_the_stream(reference):
    loader = TokenLoader(PackedTokenDataset(TOKENS, SEQ_LEN, MICRO_BATCH, seed=7), num_workers=2)
    first = list(islice(loader, 5))
    second = list(islice(loader, 5))
    assert all(torch.equal(a, b) for a, b in zip(first + second, reference[:10], strict=True))
