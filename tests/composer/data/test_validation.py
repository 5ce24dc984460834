from __future__ import annotations

import numpy as np
import pytest
import torch

from composer.data import DataPipeline, ValidationDataset
from composer.data.holdout import validation_mask
from composer.data.packed import validation_slices


def decoded_documents(tokens: np.ndarray) -> list[str]:
    tokens = np.asarray(tokens)
    pieces = np.split(tokens, np.flatnonzero(tokens == 256) + 1)
    return [bytes(p[:-1].astype(np.uint8)).decode() for p in pieces if p.size]


def test_validation_is_disjoint_from_training_at_document_level(config, corpus):
    pipeline = DataPipeline(config.replace(val_fraction=0.2))
    train, val = decoded_documents(pipeline.corpus.train), decoded_documents(pipeline.corpus.val)
    assert set(train).isdisjoint(val) and sorted(train + val) == sorted(corpus[1])
    assert 3 <= len(val) <= 24  # ~20% of 60, chosen by hash
    again = DataPipeline(config.replace(val_fraction=0.2))
    assert decoded_documents(again.corpus.val) == val  # deterministic
    other_split = DataPipeline(config.replace(val_fraction=0.2, split_seed=5))
    assert decoded_documents(other_split.corpus.val) != val


def test_training_seed_never_moves_the_validation_split(config):
    """Runs that differ only in their training seed are scored on the same text (same fingerprint)."""
    base = DataPipeline(config.replace(val_fraction=0.2))
    reseeded = DataPipeline(config.replace(val_fraction=0.2, seed=7))
    assert np.array_equal(base.corpus.val, reseeded.corpus.val)
    assert base.corpus.directory == reseeded.corpus.directory  # one cache serves every training seed
    assert base.validation_identity() == reseeded.validation_identity()
    # ... while the training order does follow the seed
    first = next(iter(base.train_dataset(4)))
    assert not torch.equal(first, next(iter(reseeded.train_dataset(4))))
    moved = DataPipeline(config.replace(val_fraction=0.2, split_seed=5)).validation_identity()
    assert moved["val_fingerprint"] != base.validation_identity()["val_fingerprint"]


def test_validation_identity_counts_and_hashes_exactly_the_scored_sequences(config):
    pipeline = DataPipeline(config.replace(val_fraction=0.2))
    whole = pipeline.validation_identity()
    dataset = pipeline.val_dataset(micro_batch_size=3)
    scored = torch.cat(list(dataset))
    assert whole["val_sequences"] == scored.shape[0] > 2
    assert whole["val_tokens"] == scored.shape[0] * config.seq_len  # predicted tokens, as val/tokens counts them
    capped = pipeline.validation_identity(max_sequences=2)
    assert capped["val_sequences"] == 2 and capped["val_fingerprint"] != whole["val_fingerprint"]
    assert DataPipeline(config.replace(val_fraction=0.2, val_sequences=2)).validation_identity() == capped


def test_validation_mask_keeps_both_splits_non_empty():
    assert validation_mask(2, seed=0, fraction=0.001).sum() == 1
    assert validation_mask(2, seed=0, fraction=0.999).sum() == 1
    assert validation_mask(1, seed=0, fraction=0.5).sum() == 0
    assert not validation_mask(10, seed=0, fraction=0.0).any()
    assert abs(validation_mask(100_000, seed=3, fraction=0.01).mean() - 0.01) < 0.002


@pytest.mark.parametrize("n", [0, 1, 2, 3, 5, 7, 16, 33])
@pytest.mark.parametrize("world", [1, 2, 3, 4])
def test_validation_slices_cover_every_sequence_once(n, world):
    micro_batch = 4
    per_rank = [validation_slices(n, micro_batch, world, rank) for rank in range(world)]
    covered = sorted(i for slices in per_rank for a, b in slices for i in range(a, b))
    assert covered == list(range(n))
    assert all(0 < b - a <= micro_batch for slices in per_rank for a, b in slices)
    counts = [len(s) for s in per_rank]
    assert max(counts) - min(counts) <= 1
    if n >= world:
        assert min(counts) >= 1  # every rank evaluates something when it can


def test_validation_dataset_is_fixed_sharded_and_capped():
    tokens = np.arange(11 * 9, dtype=np.uint16)  # 11 sequences of seq_len 8
    full = list(ValidationDataset(tokens, 8, micro_batch_size=4))
    assert [b.shape[0] for b in full] == [4, 4, 3] and torch.equal(full[0][0], torch.arange(9))
    assert all(torch.equal(a, b) for a, b in zip(full, ValidationDataset(tokens, 8, micro_batch_size=4), strict=True))
    shards = [list(ValidationDataset(tokens, 8, 4, rank=r, world_size=2)) for r in range(2)]
    assert [len(s) for s in shards] == [2, 1]
    assert torch.equal(torch.cat(shards[0] + shards[1]).sort(0).values, torch.cat(full).sort(0).values)
    capped = list(ValidationDataset(tokens, 8, 4, max_sequences=5))
    assert sum(b.shape[0] for b in capped) == 5


def test_fewer_validation_sequences_than_ranks_still_works():
    tokens = np.arange(2 * 9)
    shards = [list(ValidationDataset(tokens, 8, micro_batch_size=4, rank=r, world_size=4)) for r in range(4)]
    assert [sum(b.shape[0] for b in s) for s in shards] == [1, 1, 0, 0]
