from __future__ import annotations

import numpy as np
import pytest
import torch

from composer.data import DataError, DataPipeline, PackedTokenDataset
from composer.data.packing import ChunkOrder, dropped_tail, epoch_permutation, gather_chunks, num_chunks


def take(dataset, n):
    iterator = iter(dataset)
    return [next(iterator) for _ in range(n)]


def test_every_token_is_in_exactly_one_chunk_and_the_tail_is_dropped():
    seq_len, n_tokens = 7, 8 * 30 + 5
    tokens = np.arange(n_tokens, dtype=np.uint32)
    assert (num_chunks(n_tokens, seq_len), dropped_tail(n_tokens, seq_len)) == (30, 5)
    dataset = PackedTokenDataset(tokens, seq_len, micro_batch_size=5, seed=3)
    batches = take(dataset, 6)  # one epoch: 30 chunks in micro-batches of 5
    assert all(b.shape == (5, 8) and b.dtype == torch.int64 for b in batches)
    seen = torch.cat(batches).flatten().tolist()
    assert sorted(seen) == list(range(30 * 8))  # every token once, the 5-token tail never
    rows = torch.cat(batches)
    assert all((row.diff() == 1).all() for row in rows)  # chunks are contiguous stretches of the stream
    assert rows[:, 0].tolist() != sorted(rows[:, 0].tolist())  # and shuffled


def test_input_and_target_are_the_chunk_shifted_by_one():
    tokens = np.arange(100)
    batch = gather_chunks(tokens, np.array([2, 0]), seq_len=9)
    inputs, targets = batch[:, :-1], batch[:, 1:]
    assert inputs[0].tolist() == list(range(20, 29)) and targets[0].tolist() == list(range(21, 30))


def test_epochs_are_reshuffled_deterministically_from_the_seed():
    a, b = epoch_permutation(50, seed=0, epoch=0), epoch_permutation(50, seed=0, epoch=1)
    assert sorted(a) == sorted(b) == list(range(50)) and not np.array_equal(a, b)
    assert np.array_equal(a, epoch_permutation(50, seed=0, epoch=0))
    assert not np.array_equal(epoch_permutation(50, seed=1, epoch=0), b)  # seed 1 epoch 0 != seed 0 epoch 1
    order = ChunkOrder(50, seed=0)
    assert np.array_equal(order[np.arange(50, 100)], b)


def test_micro_batches_run_on_across_epoch_boundaries():
    tokens = np.arange(4 * 10)
    dataset = PackedTokenDataset(tokens, seq_len=3, micro_batch_size=3, seed=0)
    rows = torch.cat(take(dataset, 10))[:, 0].div(4, rounding_mode="floor").tolist()  # chunk ids, 3 epochs
    for epoch in range(3):
        assert sorted(rows[10 * epoch : 10 * epoch + 10]) == list(range(10))


def test_documents_are_separated_by_eos(config, corpus):
    pipeline = DataPipeline(config)
    train = np.asarray(pipeline.corpus.train)
    assert train[-1] == 256
    documents = [
        bytes(doc.astype(np.uint8)).decode() for doc in np.split(train, np.flatnonzero(train == 256) + 1)[:-1]
    ]
    documents = [doc[:-1] for doc in documents]  # drop the EOS byte placeholder
    assert set(documents) < set(corpus[1]) and len(documents) == pipeline.stats()["train_documents"]
    assert [corpus[1].index(d) for d in documents] == sorted(corpus[1].index(d) for d in documents)


def test_too_little_data_for_one_sequence_is_a_data_error():
    with pytest.raises(DataError, match="fewer than one sequence of seq_len \\+ 1 = 11"):
        PackedTokenDataset(np.arange(10), seq_len=10, micro_batch_size=1)
