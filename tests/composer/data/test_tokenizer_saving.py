"""The tokenizer travels with the model: export_weights saves it beside the weights, load_tokenizer_for finds it."""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from composer.data import ByteTokenizer, DataError, HFTokenizer, load_tokenizer
from composer.data.tokenizer import TOKENIZER_FILES, find_tokenizer, load_tokenizer_for
from composer.interop.model_dir import export_weights, load_pretrained
from composer.model import build_model
from composer.presets import resolve_architecture

TEXT = "Héllo wörld, 🎉 alpha0 beta1\n"


def model_dir(tmp_path, tokenizer=None, name="model"):
    arch, _ = resolve_architecture("AMSM", "tiny", "tiny")
    arch = arch.replace(vocab_size=448)
    model = build_model(arch)
    return export_weights(model.state_dict(), arch, tmp_path / name, tokenizer=tokenizer), model


def test_byte_tokenizer_is_saved_and_marked(tmp_path):
    directory, model = model_dir(tmp_path, ByteTokenizer())
    config = json.loads((directory / "config.json").read_text())
    assert config["tokenizer"] == "bytes" and "tokenizer.json" in config["tokenizer_files"]
    assert (directory / "tokenizer.json").is_file() and (directory / "tokenizer_config.json").is_file()
    assert find_tokenizer(directory)[0] == "bytes"
    assert isinstance(load_tokenizer_for(directory), ByteTokenizer)
    assert not [p for p in directory.iterdir() if p.name.startswith(".")]  # no staging left
    # the saved files are the byte tokenizer for transformers too: the same ids
    from transformers import AutoTokenizer

    hf = AutoTokenizer.from_pretrained(directory)
    assert hf(TEXT)["input_ids"] == ByteTokenizer().encode_batch([TEXT])[0] and hf.eos_token_id == 256
    # and the weights still load as before
    loaded = load_pretrained(directory)
    ids = torch.randint(0, 256, (1, 12))
    torch.testing.assert_close(loaded(ids).logits, model.eval()(ids).logits)


def test_hf_tokenizer_is_saved_and_reloads_without_its_source(tmp_path, hf_tokenizer_dir):
    source = tmp_path / "tok"
    shutil.copytree(hf_tokenizer_dir, source)
    directory, _ = model_dir(tmp_path, str(source))
    assert json.loads((directory / "config.json").read_text())["tokenizer"] == str(source)
    shutil.rmtree(source)  # the model directory alone must be enough
    tok = load_tokenizer_for(directory)
    original = load_tokenizer(hf_tokenizer_dir)
    assert isinstance(tok, HFTokenizer) and tok.fingerprint == original.fingerprint
    assert tok.encode_batch([TEXT]) == original.encode_batch([TEXT]) and tok.eos_id == original.eos_id


def test_resaving_replaces_the_previous_tokenizer_files(tmp_path, hf_tokenizer_dir):
    directory, _ = model_dir(tmp_path, str(hf_tokenizer_dir))
    (directory / "vocab.json").write_text("{}")  # a stale file of some earlier tokenizer
    model_dir(tmp_path, "bytes")
    left = {name for name in TOKENIZER_FILES if (directory / name).is_file()}
    assert "vocab.json" not in left and "tokenizer.json" in left
    assert isinstance(load_tokenizer_for(directory), ByteTokenizer)


def test_old_model_directory_without_tokenizer(tmp_path):
    directory, _ = model_dir(tmp_path)  # as export_weights wrote them before tokenizers were saved
    assert "tokenizer" not in json.loads((directory / "config.json").read_text())
    load_pretrained(directory)
    with pytest.raises(DataError, match="no tokenizer is saved with the model.*--tokenizer") as err:
        load_tokenizer_for(directory)
    assert "\n" not in str(err.value)
    assert isinstance(load_tokenizer_for(directory, "bytes"), ByteTokenizer)
    (tmp_path / "summary.json").write_text(json.dumps({"tokenizer": "bytes"}))  # inside its run: found there
    assert find_tokenizer(directory) == ("bytes", f"{tmp_path.name}/summary.json")


def test_a_failed_tokenizer_save_keeps_the_weights_and_the_marker(tmp_path, monkeypatch):
    import composer.data.tokenizer as tokenizer_module

    def broken(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(tokenizer_module, "save_tokenizer_files", broken)
    directory, _ = model_dir(tmp_path, "bytes")
    config = json.loads((directory / "config.json").read_text())
    assert config["tokenizer"] == "bytes" and config["tokenizer_files"] == []
    assert isinstance(load_tokenizer_for(directory), ByteTokenizer)
    load_pretrained(directory)


def test_composer_export_reuses_the_saved_tokenizer(tmp_path):
    pytest.importorskip("transformers")
    from composer.interop.export import export_hf

    directory, _ = model_dir(tmp_path, "bytes")
    result = export_hf(directory, tmp_path / "hf")
    assert result.tokenizer.startswith("byte-level") and "model/config.json" in result.tokenizer
    assert (tmp_path / "hf" / "tokenizer.json").read_text() == (directory / "tokenizer.json").read_text()
