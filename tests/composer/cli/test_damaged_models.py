"""Damaged model directories get one line and exit 2, naming the file and the problem (issue 27).

A half-finished download, a disk that filled up, a config saved by hand: each is tried here on every command that
reads a model directory (import, hybridize --from, train --init-from / --teacher, generate, eval, export), with
the file damaged in the ways users meet: truncated, overwritten with garbage, a config without a required field,
a sharded index naming a shard that is not there, a tokenizer file that does not load.
"""

from __future__ import annotations

import json
import shutil

import pytest
import torch

transformers = pytest.importorskip("transformers")

from composer.cli import main  # noqa: E402
from composer.interop.hf_import import import_hf  # noqa: E402

SMALL = dict(vocab_size=320, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
             num_key_value_heads=1, max_position_embeddings=64)


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    """One intact transformers checkpoint (single file and sharded) and its Composer import."""
    root = tmp_path_factory.mktemp("intact")
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(transformers.LlamaConfig(**SMALL)).float()
    model.save_pretrained(root / "hf", safe_serialization=True)
    model.save_pretrained(root / "hf-sharded", safe_serialization=True, max_shard_size="20KB")
    import_hf(root / "hf", root / "ours")
    return root


def damaged_copy(checkpoints, tmp_path, which: str):
    target = tmp_path / which
    shutil.copytree(checkpoints / which, target)
    return target


def truncate(path):
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def garbage(path):
    path.write_bytes(b"\x00\x13not a safetensors header" * 8)


def drop_heads(path):
    config = json.loads(path.read_text())
    del config["num_attention_heads"]
    path.write_text(json.dumps(config))


def broken_json(path):
    path.write_text('{"arch": {"pattern": "AMAM", ')


def assert_one_line(code, capsys, *names):
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if "error" in line]  # progress lines ("importing ...") aside
    assert code == 2, err
    assert len(lines) == 1 and "Traceback" not in err, err
    for name in names:
        assert name in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize("damage, file, words", [
    (truncate, "model.safetensors", "damaged"),
    (garbage, "model.safetensors", "damaged"),
    (drop_heads, "config.json", "num_attention_heads"),
    (broken_json, "config.json", "damaged"),
], ids=["truncated-weights", "garbage-weights", "config-without-heads", "config-not-json"])
def test_import_of_a_damaged_transformers_checkpoint(checkpoints, tmp_path, capsys, damage, file, words):
    source = damaged_copy(checkpoints, tmp_path, "hf")
    damage(source / file)
    code = main(["import", str(source), "--out", str(tmp_path / "out")])
    line = assert_one_line(code, capsys, words)
    assert file in line or "config.json" in line


def test_a_sharded_index_naming_a_missing_shard(checkpoints, tmp_path, capsys):
    source = damaged_copy(checkpoints, tmp_path, "hf-sharded")
    shard = sorted(source.glob("model-*.safetensors"))[-1]
    shard.unlink()
    code = main(["import", str(source), "--out", str(tmp_path / "out")])
    assert_one_line(code, capsys, "model.safetensors.index.json", shard.name, "missing")
    truncate(sorted(source.glob("model-*.safetensors"))[0])  # and a shard that is there but cut short
    (source / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {
        "x": sorted(source.glob("model-*.safetensors"))[0].name}}))
    code = main(["import", str(source), "--out", str(tmp_path / "out2")])
    assert_one_line(code, capsys, "damaged")


def test_hybridize_from_a_transformers_checkpoint_without_a_field(checkpoints, tmp_path, capsys):
    source = damaged_copy(checkpoints, tmp_path, "hf")
    drop_heads(source / "config.json")
    code = main(["hybridize", "--init-from", str(source), "--arch", "AMDM", "--out", str(tmp_path / "h"),
                 "--tokens", "8192", "--wandb", "off"])
    assert_one_line(code, capsys, "num_attention_heads")


COMMANDS = {
    "generate": lambda model, tmp: ["generate", "--model", str(model), "--prompt", "hi", "--max-new-tokens", "2"],
    "eval": lambda model, tmp: ["eval", "--model", str(model), "--tasks", "lambada_openai", "--limit", "1"],
    "eval --tasks recall": lambda model, tmp: ["eval", "--model", str(model), "--tasks", "recall", "--limit", "2"],
    "export": lambda model, tmp: ["export", "--model", str(model), "--out", str(tmp / "exported")],
    "hybridize --from": lambda model, tmp: ["hybridize", "--init-from", str(model), "--arch", "AMDM", "--out",
                                             str(tmp / "h"), "--tokens", "8192", "--wandb", "off"],
    "train --init-from": lambda model, tmp: ["train", "--init-from", str(model), "--tokens", "8192", "--out",
                                              str(tmp / "t"), "--wandb", "off"],
    "train --teacher": lambda model, tmp: ["train", "--arch", "(AM)x2", "--preset", "tiny", "--teacher", str(model),
                                            "--tokens", "8192", "--out", str(tmp / "t"), "--wandb", "off"],
}


@pytest.mark.parametrize("command", list(COMMANDS))
@pytest.mark.parametrize("damage, file", [(truncate, "model.safetensors"), (broken_json, "config.json")],
                         ids=["truncated-weights", "config-not-json"])
def test_every_command_that_reads_a_model_directory(checkpoints, tmp_path, capsys, command, damage, file):
    if command == "eval":
        pytest.importorskip("lm_eval")
    model = damaged_copy(checkpoints, tmp_path, "ours")
    damage(model / file)
    if command == "train --teacher" and file == "model.safetensors":
        pytest.skip("a teacher's weights are read once its vocabulary matched: the config case covers it")
    code = main(COMMANDS[command](model, tmp_path))
    assert_one_line(code, capsys, file)


def test_a_tokenizer_file_that_does_not_load(checkpoints, tmp_path, capsys):
    model = damaged_copy(checkpoints, tmp_path, "ours")
    (model / "tokenizer.json").write_text("{ not json")
    (model / "tokenizer_config.json").write_text('{"tokenizer_class": "PreTrainedTokenizerFast"}')
    code = main(["generate", "--model", str(model), "--prompt", "hi", "--max-new-tokens", "2"])
    assert_one_line(code, capsys, "tokenizer")
