from __future__ import annotations

import gzip
import json

import numpy as np
import pytest

from composer.data import DataConfig, DataError, DataPipeline, load_tokenizer
from composer.data.sources import HubDataset, LocalFiles, resolve_source

from .conftest import words, write_jsonl


def tokens_of(pipeline: DataPipeline) -> np.ndarray:
    """The whole tokenised corpus (train and val documents, in source order) from the first cache level."""
    directory = pipeline.corpus.directory.parent
    return np.load(directory / "tokens.npy")


def expected_bytes(texts: list[str]) -> list[int]:
    out: list[int] = []
    for text in texts:
        out += list(text.encode()) + [256]
    return out


def test_jsonl_source_tokenises_every_document_with_eos(config, corpus):
    pipeline = DataPipeline(config)
    assert tokens_of(pipeline).tolist() == expected_bytes(corpus[1])
    stats = pipeline.stats()
    assert stats["documents"] == 60 and stats["tokens"] == len(expected_bytes(corpus[1]))
    assert stats["train_documents"] + stats["val_documents"] == 60 and stats["val_documents"] >= 1


def test_txt_source_splits_paragraphs_by_default(tmp_path):
    path = tmp_path / "book.txt"
    path.write_text("first paragraph\nstill first\n\nsecond\n\nthird one")
    pipeline = DataPipeline(DataConfig(source=str(path), cache_dir=str(tmp_path / "c"), seq_len=4))
    assert tokens_of(pipeline).tolist() == expected_bytes(
        ["first paragraph\nstill first", "second", "third one"]
    )
    whole = DataPipeline(
        DataConfig(source=str(path), cache_dir=str(tmp_path / "c"), seq_len=4, text_unit="document")
    )
    assert whole.stats()["documents"] == 1


def test_parquet_source_with_another_text_field(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    texts = [words(i) for i in range(10)]
    pq.write_table(pa.table({"content": texts, "n": list(range(10))}), tmp_path / "part.parquet")
    pipeline = DataPipeline(
        DataConfig(
            source=str(tmp_path / "part.parquet"),
            text_field="content",
            cache_dir=str(tmp_path / "c"),
            seq_len=8,
        )
    )
    assert tokens_of(pipeline).tolist() == expected_bytes(texts)


def test_directory_glob_and_compressed_json(tmp_path):
    texts = [words(i) for i in range(12)]
    write_jsonl(tmp_path / "d" / "a.jsonl", texts[:6])
    with gzip.open(tmp_path / "d" / "b.jsonl.gz", "wt") as f:
        f.writelines(json.dumps({"text": t}) + "\n" for t in texts[6:])
    (tmp_path / "d" / ".hidden.jsonl").write_text('{"text": "ignored"}\n')
    for spec in (str(tmp_path / "d"), str(tmp_path / "d" / "*.jsonl*")):
        source = resolve_source(spec)
        assert isinstance(source, LocalFiles) and [p.name for p in source.files] == ["a.jsonl", "b.jsonl.gz"]
        pipeline = DataPipeline(DataConfig(source=spec, cache_dir=str(tmp_path / "c"), seq_len=8))
        assert tokens_of(pipeline).tolist() == expected_bytes(texts)


def test_json_array_file(tmp_path):
    texts = [words(i) for i in range(5)]
    (tmp_path / "rows.json").write_text(json.dumps([{"text": t} for t in texts]))
    pipeline = DataPipeline(
        DataConfig(source=str(tmp_path / "rows.json"), cache_dir=str(tmp_path / "c"), seq_len=8)
    )
    assert tokens_of(pipeline).tolist() == expected_bytes(texts)


def test_local_source_with_hf_tokenizer(config, corpus, hf_tokenizer_dir):
    pipeline = DataPipeline(config.replace(tokenizer=str(hf_tokenizer_dir)))
    tok = load_tokenizer(str(hf_tokenizer_dir))
    expected = [i for ids in tok.encode_batch(corpus[1]) for i in ids + [tok.eos_id]]
    assert tokens_of(pipeline).tolist() == expected
    assert pipeline.vocab_size == tok.vocab_size and tokens_of(pipeline).dtype == np.uint16


def test_max_documents_reads_only_the_first_documents(config, corpus):
    pipeline = DataPipeline(config.replace(max_documents=7))
    assert tokens_of(pipeline).tolist() == expected_bytes(corpus[1][:7])


def test_hub_names_and_paths_are_told_apart(tmp_path):
    assert isinstance(resolve_source("mlfoundations/dclm-baseline-1.0"), HubDataset)
    hub = resolve_source("HuggingFaceFW/fineweb-edu:sample-10BT")
    assert (hub.name, hub.config_name) == ("HuggingFaceFW/fineweb-edu", "sample-10BT")
    assert hub.streams_by_default


@pytest.mark.parametrize("spec", ["foo.jsonl", "./data/train", "/no/such/dir", "missing/*.jsonl"])
def test_missing_path_is_a_one_line_data_error(spec, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(
        DataError, match=r"(dataset path|glob) '.*' (does not exist|matches no files); pass an"
    ) as info:
        resolve_source(spec)
    assert "\n" not in str(info.value)


def test_unsupported_file_type(tmp_path):
    (tmp_path / "data.csv").write_text("text\nhello\n")
    with pytest.raises(
        DataError, match=r"unsupported file type '.csv' .*; use .txt, .jsonl, .json or .parquet"
    ):
        resolve_source(str(tmp_path / "data.csv"))


def test_mixed_file_types_in_a_directory(tmp_path):
    write_jsonl(tmp_path / "a.jsonl", ["x"])
    (tmp_path / "b.txt").write_text("y")
    with pytest.raises(DataError, match="mixes file types"):
        resolve_source(str(tmp_path))


def test_empty_directory(tmp_path):
    with pytest.raises(
        DataError, match="has no .txt, .jsonl, .json or .parquet files .*; put data files in it"
    ):
        resolve_source(str(tmp_path))


def test_missing_text_field_names_the_available_fields(config):
    pipeline = DataPipeline(config.replace(text_field="body"))
    with pytest.raises(
        DataError, match=r"text field 'body' not found in .*available fields: id, text; set text_field"
    ):
        pipeline.prepare()


def test_non_text_field(config):
    with pytest.raises(DataError, match="holds int values, not text"):
        DataPipeline(config.replace(text_field="id")).prepare()


def test_unreachable_hub_dataset_is_a_one_line_data_error(tmp_path):
    pipeline = DataPipeline(DataConfig(source="composer-test/no-such-dataset", cache_dir=str(tmp_path)))
    with pytest.raises(
        DataError, match="could not load Hugging Face dataset 'composer-test/no-such-dataset'"
    ) as info:
        pipeline.prepare()
    message = str(info.value)
    assert "\n" not in message and "hub is unreachable" in message and "local file" in message


def test_default_corpus_cannot_be_streamed(tmp_path):
    with pytest.raises(DataError, match="default corpus is always materialised"):
        DataPipeline(DataConfig(streaming=True, cache_dir=str(tmp_path))).prepare()


def test_invalid_json_is_a_data_error(tmp_path):
    (tmp_path / "bad.jsonl").write_text('{"text": "ok"}\n{not json\n')
    bad_line = r"bad.jsonl' line 2 is not valid JSON \(Expecting property name .* at column 2\); fix or remove that line"
    with pytest.raises(DataError, match=bad_line):
        DataPipeline(DataConfig(source=str(tmp_path / "bad.jsonl"), cache_dir=str(tmp_path / "c"))).prepare()
