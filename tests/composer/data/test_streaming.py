"""Streaming sources, exercised offline on local JSON-lines shards forced to stream."""

from __future__ import annotations

from itertools import islice

import numpy as np
import pytest
import torch

from composer.data import DataConfig, DataPipeline, StreamingTokenDataset, TokenLoader

from .conftest import words, write_jsonl

N_FILES, DOCS_PER_FILE = 4, 8


@pytest.fixture
def shards(tmp_path) -> list[str]:
    texts = [words(i, n=2 + i % 5) for i in range(N_FILES * DOCS_PER_FILE)]
    for f in range(N_FILES):
        write_jsonl(
            tmp_path / "shards" / f"part-{f}.jsonl", texts[f * DOCS_PER_FILE : (f + 1) * DOCS_PER_FILE]
        )
    return texts


def stream_config(tmp_path, **changes) -> DataConfig:
    config = DataConfig(
        source=str(tmp_path / "shards"),
        cache_dir=str(tmp_path / "cache"),
        streaming=True,
        seq_len=15,
        val_documents=5,
        shuffle_buffer=0,
    )
    return config.replace(**changes)


def decode_documents(batches: list[torch.Tensor]) -> list[str]:
    tokens = torch.cat([b.flatten() for b in batches]).numpy()
    pieces = np.split(tokens, np.flatnonzero(tokens == 256) + 1)
    return [bytes(p[:-1].astype(np.uint8)).decode() for p in pieces[1:-1]]  # complete documents only


def stream_of(texts: list[str]) -> list[int]:
    return [t for text in texts for t in list(text.encode()) + [256]]


def test_first_documents_are_held_out_and_skipped_by_training(tmp_path, shards):
    pipeline = DataPipeline(stream_config(tmp_path))
    assert pipeline.streaming
    pipeline.prepare()
    stats = pipeline.stats()
    assert stats["val_documents"] == 5 and stats["val_tokens"] == len(stream_of(shards[:5]))
    assert stats["train_chunks"] is None and stats["val_chunks"] == len(stream_of(shards[:5])) // 16
    dataset = pipeline.train_dataset(micro_batch_size=2)
    assert isinstance(dataset, StreamingTokenDataset)
    expected = stream_of(shards[5:])
    n = len(expected) // 32
    batches = list(islice(iter(dataset), n))
    assert all(b.shape == (2, 16) and b.dtype == torch.int64 for b in batches)
    assert torch.cat([b.flatten() for b in batches]).tolist() == expected[: n * 32]


def test_each_rank_streams_its_part_and_the_parts_partition_the_training_set(tmp_path, shards):
    from datasets.distributed import split_dataset_by_node

    pipeline = DataPipeline(stream_config(tmp_path, seq_len=3))
    train_docs = shards[5:]
    parts = []
    for rank in range(2):
        node = split_dataset_by_node(pipeline.source.open_stream(pipeline.config), rank=rank, world_size=2)
        part = [row["text"] for row in node if row["text"] in train_docs]
        expected = stream_of(part)
        dataset = pipeline.train_dataset(micro_batch_size=1, rank=rank, world_size=2)
        got = torch.cat(list(islice(iter(dataset), len(expected) // 4))).flatten().tolist()
        assert got == expected[: len(got)]  # epoch 0 of this rank: its shards, held-out documents dropped
        parts.append(part)
    assert set(parts[0]).isdisjoint(parts[1]) and sorted(parts[0] + parts[1]) == sorted(train_docs)


@pytest.mark.filterwarnings("ignore:This DataLoader will create")
@pytest.mark.parametrize("workers, consumed", [(0, 5), (2, 5), (2, 6), (3, 7), (5, 9)])
def test_resume_continues_exactly_without_shuffle_buffer(tmp_path, shards, workers, consumed):
    pipeline = DataPipeline(stream_config(tmp_path))
    uninterrupted = list(
        islice(TokenLoader(pipeline.train_dataset(2, num_workers=workers), num_workers=workers), 30)
    )
    loader = TokenLoader(pipeline.train_dataset(2, num_workers=workers), num_workers=workers)
    head = list(islice(loader, consumed + 1))
    state = loader.dataset.state_dict(batches_consumed=consumed)  # one batch was prefetched, not consumed
    path = tmp_path / "state.pt"
    torch.save(state, path)
    state = torch.load(path, weights_only=True)
    resumed = pipeline.train_dataset(2, num_workers=workers)
    resumed.load_state_dict(state)
    loader = TokenLoader(resumed, num_workers=workers)
    tail = list(islice(loader, 10))
    assert all(torch.equal(a, b) for a, b in zip(head[:consumed] + tail, uninterrupted[: consumed + 10], strict=True))
    assert state["micro_batches_per_rank"] == consumed
    # and again from the resumed run: positions compose
    again = pipeline.train_dataset(2, num_workers=workers)
    again.load_state_dict(loader.dataset.state_dict(batches_consumed=3))
    more = list(islice(TokenLoader(again, num_workers=workers), 5))
    assert all(torch.equal(a, b) for a, b in zip(more, uninterrupted[consumed + 3 : consumed + 8], strict=True))


def test_shuffle_buffer_shuffles_deterministically(tmp_path, shards):
    def documents(seed: int) -> list[str]:
        pipeline = DataPipeline(stream_config(tmp_path, seq_len=3, shuffle_buffer=16, seed=seed))
        return decode_documents(list(islice(iter(pipeline.train_dataset(1)), 40)))

    first = documents(0)
    assert first == documents(0) and first != documents(1)
    assert set(first) <= set(shards[5:]) and first[: len(shards) - 6] != shards[6 : len(shards)]
