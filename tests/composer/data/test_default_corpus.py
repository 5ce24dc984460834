from __future__ import annotations

import platform

import numpy as np

from composer.data import DataConfig, DataPipeline, stdlib_corpus
from composer.data.sources import StdlibSource, resolve_source


def test_listing_is_sorted_and_excludes_tests_idle_and_third_party():
    root = stdlib_corpus.stdlib_root()
    files = stdlib_corpus.stdlib_files()
    relative = [p.relative_to(root).as_posix() for p in files]
    assert relative == sorted(relative) and len(files) > 100
    assert all(p.suffix == ".py" for p in files)
    assert not any(set(r.split("/")[:-1]) & stdlib_corpus.EXCLUDED_DIRS for r in relative)
    assert "os.py" in relative and "json/__init__.py" in relative


def test_default_source_is_the_stdlib_keyed_by_python_version():
    source = resolve_source(None)
    assert isinstance(source, StdlibSource) and not source.streams_by_default
    assert source.identity()["python"] == platform.python_version()
    assert "PSF-2.0" in source.description


def test_default_corpus_loads_capped_for_smoke_runs(tmp_path):
    pipeline = DataPipeline(DataConfig(cache_dir=str(tmp_path), max_documents=25, seq_len=64))
    stats = pipeline.stats()
    assert stats["documents"] <= 25 and stats["val_documents"] >= 1
    first = stdlib_corpus.stdlib_files()[0].read_text(encoding="utf-8", errors="replace")
    tokens = np.load(pipeline.corpus.directory.parent / "tokens.npy")
    assert bytes(tokens[: len(first.encode())].astype(np.uint8)) == first.encode()
    assert tokens[len(first.encode())] == 256
    batch = next(iter(pipeline.train_dataset(micro_batch_size=4)))
    assert batch.shape == (4, 65) and int(batch.max()) <= 256
