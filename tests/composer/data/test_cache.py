from __future__ import annotations

import os

import numpy as np
import pytest

from composer.data import ByteTokenizer, DataConfig, DataPipeline
from composer.data.cache import NpyWriter, cache_key, read_meta
from composer.data.corpus import token_cache_dir
from composer.data.sources import resolve_source

from .conftest import write_jsonl


def test_npy_writer_streams_chunks_into_a_standard_npy(tmp_path):
    path = tmp_path / "a.npy"
    with NpyWriter(path, np.uint32) as writer:
        for start in range(0, 1000, 300):
            writer.append(np.arange(start, min(start + 300, 1000)))
        writer.commit()
    assert np.array_equal(np.load(path), np.arange(1000, dtype=np.uint32))
    assert np.load(path, mmap_mode="r").dtype == np.uint32
    assert [p.name for p in tmp_path.iterdir()] == ["a.npy"]


def test_npy_writer_abandoned_on_error_leaves_nothing(tmp_path):
    with pytest.raises(RuntimeError), NpyWriter(tmp_path / "a.npy", np.uint16) as writer:
        writer.append(np.arange(10))
        raise RuntimeError("interrupted")
    assert list(tmp_path.iterdir()) == []


def test_cache_key_is_canonical():
    assert (
        cache_key({"a": 1, "b": [1, 2]})
        == cache_key({"b": [1, 2], "a": 1})
        != cache_key({"a": 2, "b": [1, 2]})
    )


def test_cache_is_built_once_and_memory_mapped(config, monkeypatch):
    first = DataPipeline(config)
    first.prepare()
    expected = np.array(first.corpus.train)

    def fail(*args, **kwargs):
        raise AssertionError("tokenised again")

    monkeypatch.setattr(ByteTokenizer, "encode_documents", fail)
    second = DataPipeline(config)
    second.prepare()
    assert isinstance(second.corpus.train, np.memmap)
    assert np.array_equal(second.corpus.train, expected)
    # another split seed re-splits the cached tokens without tokenising again
    other = DataPipeline(config.replace(split_seed=1))
    assert other.stats()["tokens"] == first.stats()["tokens"]
    assert other.corpus.directory != first.corpus.directory


def test_interrupted_build_publishes_nothing_and_is_rebuilt(config, monkeypatch):
    calls = {"n": 0}
    original = ByteTokenizer.encode_documents

    def flaky(self, texts):
        calls["n"] += 1
        if calls["n"] == 1:
            raise KeyboardInterrupt  # killed mid-build
        return original(self, texts)

    monkeypatch.setattr(ByteTokenizer, "encode_documents", flaky)
    with pytest.raises(KeyboardInterrupt):
        DataPipeline(config).prepare()
    directory = token_cache_dir(config, resolve_source(config.source), ByteTokenizer())
    assert read_meta(directory) is None
    assert not [p for p in directory.iterdir() if p.suffix in (".npy", ".json") or p.name.endswith(".tmp")]
    pipeline = DataPipeline(config)
    pipeline.prepare()
    assert read_meta(directory) is not None and pipeline.stats()["documents"] == 60


def test_changed_file_gets_a_new_cache_entry(config, corpus):
    before = DataPipeline(config).corpus.directory
    write_jsonl(corpus[0], corpus[1][:30])
    os.utime(corpus[0], ns=(1, 1))
    after = DataPipeline(config)
    assert after.corpus.directory != before and after.stats()["documents"] == 30


def test_tokenizer_and_field_are_part_of_the_key(config, hf_tokenizer_dir):
    source = resolve_source(config.source)
    byte_dir = token_cache_dir(config, source, ByteTokenizer())
    from composer.data import load_tokenizer

    assert token_cache_dir(config, source, load_tokenizer(hf_tokenizer_dir)) != byte_dir
    assert token_cache_dir(config.replace(text_field="body"), source, ByteTokenizer()) != byte_dir
    assert token_cache_dir(config.replace(seq_len=99, seed=3), source, ByteTokenizer()) == byte_dir


def test_cache_root_defaults(monkeypatch, tmp_path):
    monkeypatch.setenv("COMPOSER_CACHE", str(tmp_path / "cc"))
    assert DataConfig().cache_root == tmp_path / "cc" / "data"
    monkeypatch.delenv("COMPOSER_CACHE")
    assert str(DataConfig().cache_root).endswith(os.path.join(".cache", "composer", "data"))
    assert DataConfig(cache_dir=str(tmp_path)).cache_root == tmp_path
