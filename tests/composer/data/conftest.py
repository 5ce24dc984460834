"""Fixtures for the data tests: tiny corpora in tmp_path, an offline hub, and a locally trained HF
tokenizer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from composer.data import DataConfig


def words(i: int, n: int = 12) -> str:
    """A distinct, deterministic document of ``n`` words (no EOS byte, ASCII only)."""
    vocab = ["alpha", "beta", "gamma", "delta", "eps", "zeta", "eta", "theta", "iota", "kappa", "lambda"]
    return " ".join(f"{vocab[(i * 7 + k) % len(vocab)]}{i}" for k in range(n))


def write_jsonl(path: Path, texts: list[str], field: str = "text") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        f.writelines(json.dumps({field: text, "id": i}) + "\n" for i, text in enumerate(texts))
    return path


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    """No test may reach the network: the hub libraries fail fast instead.

    The libraries read these variables when first imported, so their module-level flags are patched too (a
    test that ran earlier may have imported them online).
    """
    import datasets.config
    import huggingface_hub.constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "false")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_OFFLINE", True)


@pytest.fixture
def corpus(tmp_path) -> tuple[Path, list[str]]:
    """A 60-document JSON-lines corpus and its texts."""
    texts = [words(i, n=8 + i % 13) for i in range(60)]
    return write_jsonl(tmp_path / "corpus.jsonl", texts), texts


@pytest.fixture
def config(tmp_path, corpus) -> DataConfig:
    return DataConfig(source=str(corpus[0]), cache_dir=str(tmp_path / "cache"), seq_len=16, val_fraction=0.1)


@pytest.fixture(scope="session")
def hf_tokenizer_dir(tmp_path_factory) -> Path:
    """A tiny byte-level BPE trained on test text, saved as a transformers fast tokenizer with an EOS
    token."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=["<|eos|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    backend.train_from_iterator([words(i) for i in range(200)], trainer)
    directory = tmp_path_factory.mktemp("tokenizer")
    PreTrainedTokenizerFast(tokenizer_object=backend, eos_token="<|eos|>").save_pretrained(directory)
    return directory
