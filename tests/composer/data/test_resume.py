"""A resumed stream yields exactly the batches an uninterrupted one would."""

from __future__ import annotations

from itertools import islice

import numpy as np
import pytest
import torch

from composer.data import DataError, PackedTokenDataset, TokenLoader

SEQ_LEN, MICRO_BATCH = 7, 4
TOKENS = np.arange(50 * (SEQ_LEN + 1), dtype=np.uint32)  # 50 chunks: micro-batches straddle epochs


def dataset(**kwargs) -> PackedTokenDataset:
    return PackedTokenDataset(TOKENS, SEQ_LEN, MICRO_BATCH, seed=1, fingerprint="t", **kwargs)


def same(a: list[torch.Tensor], b: list[torch.Tensor]) -> bool:
    return len(a) == len(b) and all(torch.equal(x, y) for x, y in zip(a, b))


@pytest.mark.parametrize("consumed", [0, 3, 12, 13, 30])
def test_resume_in_process(consumed):
    uninterrupted = list(islice(iter(dataset()), consumed + 10))
    first = dataset()
    iterator = iter(first)
    assert same([next(iterator) for _ in range(consumed)], uninterrupted[:consumed])
    state = first.state_dict()
    assert state["micro_batches_per_rank"] == consumed and state["chunks_consumed"] == consumed * MICRO_BATCH
    resumed = dataset()
    resumed.load_state_dict(state)
    assert same(list(islice(iter(resumed), 10)), uninterrupted[consumed:])


@pytest.mark.parametrize("workers", [1, 2])
def test_resume_through_a_loader_with_workers(workers):
    uninterrupted = list(islice(iter(dataset()), 17))
    loader = TokenLoader(dataset(), num_workers=workers)
    head = list(islice(loader, 7))
    state = loader.dataset.state_dict()  # counted in the main process, whatever the workers did
    assert state["micro_batches_per_rank"] == 7
    resumed = dataset()
    resumed.load_state_dict(state)
    tail = list(islice(TokenLoader(resumed, num_workers=workers), 10))
    assert same(head + tail, uninterrupted)


def test_state_after_consumed_batches_ignores_prefetched_ones():
    uninterrupted = list(islice(iter(dataset()), 12))
    loader = TokenLoader(dataset(), num_workers=2)
    list(islice(loader, 6))  # six produced, but say the trainer consumed only four
    state = loader.dataset.state_dict(batches_consumed=4)
    resumed = dataset()
    resumed.load_state_dict(state)
    assert same(list(islice(iter(resumed), 8)), uninterrupted[4:])


@pytest.mark.parametrize("old_world, new_world", [(1, 2), (2, 3), (3, 1)])
def test_resume_with_another_world_size_continues_the_global_stream(old_world, new_world):
    reference = list(islice(iter(dataset()), 60))
    consumed_per_rank = 5
    state = dataset(rank=0, world_size=old_world).state_dict(batches_consumed=consumed_per_rank)
    start = consumed_per_rank * old_world
    for rank in range(new_world):
        resumed = dataset(rank=rank, world_size=new_world)
        resumed.load_state_dict(state)
        got = list(islice(iter(resumed), 4))
        assert same(got, [reference[start + rank + new_world * i] for i in range(4)])


def test_state_round_trips_through_torch_save_weights_only(tmp_path):
    state = dataset().state_dict(batches_consumed=3)
    torch.save({"data": state}, tmp_path / "s.pt")
    assert torch.load(tmp_path / "s.pt", weights_only=True)["data"] == state


def test_state_from_other_data_is_refused():
    state = dataset().state_dict(batches_consumed=3)
    other = PackedTokenDataset(TOKENS, SEQ_LEN, MICRO_BATCH, seed=2, fingerprint="t")
    with pytest.raises(DataError, match=r"other data \(seed 1 -> 2\)"):
        other.load_state_dict(state)
    with pytest.raises(DataError, match="cannot resume a packed dataset"):
        dataset().load_state_dict({"kind": "streaming", "version": 1})
