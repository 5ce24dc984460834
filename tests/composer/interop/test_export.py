"""``composer export --format hf``: the export loads with transformers and computes our logits."""

from __future__ import annotations

import json
import sys

import pytest
import torch

from composer.cli import main
from composer.data.tokenizer import ByteTokenizer
from composer.interop.export import byte_tokenizer_fast, export_hf, find_tokenizer, is_llama
from composer.interop.model_dir import export_weights
from composer.model import build_model
from composer.presets import resolve_architecture
from primitives.rope import RopeScaling

transformers = pytest.importorskip("transformers")
from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402

TEXT = "Héllo wörld, 🎉 tabs\tand  spaces\n"


@pytest.fixture(autouse=True)
def _quiet_transformers():
    from transformers.utils import logging as hf_logging

    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    yield
    hf_logging.set_verbosity(verbosity)


def train_dir(tmp_path, pattern: str, tokenizer: str | None = None, **changes):
    """What ``composer train --out RUN`` leaves behind: RUN/model (via the same export_weights) and
    RUN/summary.json naming the tokenizer; returns the model directory and the model."""
    arch, _ = resolve_architecture(pattern, "tiny", "tiny")
    arch = arch.replace(vocab_size=320, **changes)  # 257 byte ids rounded up to 64, as composer train does
    model = build_model(arch).eval()
    with torch.no_grad():  # norms start at 1: make them matter, so a misplaced norm weight cannot pass
        for name, param in model.named_parameters():
            if name.endswith("norm.weight"):
                param.uniform_(0.5, 1.5)
    run = tmp_path / f"run-{arch.compact}"
    export_weights(model.state_dict(), arch, run / "model")
    (run / "summary.json").write_text(json.dumps({"tokenizer": tokenizer or "bytes"}))
    return run / "model", model


def logits_both(ours, hf, seq_len: int = 80) -> tuple[torch.Tensor, torch.Tensor]:
    ids = torch.randint(0, 257, (2, seq_len))
    with torch.no_grad():
        return ours(ids).logits, hf(input_ids=ids).logits


@pytest.mark.parametrize(
    "changes",
    [
        {},
        # untied head, llama3 RoPE scaling that changes the frequencies at this head_dim (wavelengths > 64)
        {"tie_embeddings": False, "rope_theta": 10_000.0, "max_seq_len": 256,
         "rope_scaling": RopeScaling(factor=8.0, original_max_seq_len=64), "options": {"M": {"ffn_dim": 96}}},
    ],
    ids=["tied", "untied-rope-scaling-ffn-option"],
)
def test_llama_pattern_is_a_plain_llama_checkpoint(tmp_path, changes):
    model_dir, ours = train_dir(tmp_path, "(AM)x2", **changes)
    out = tmp_path / "hf"
    result = export_hf(model_dir, out)
    assert result.kind == "llama"
    assert not list(out.glob("*.py"))  # no custom code
    config = json.loads((out / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLM"] and "auto_map" not in config

    hf = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32).eval()
    assert type(hf).__name__ == "LlamaForCausalLM"
    arch = ours.arch
    assert hf.config.intermediate_size == changes.get("options", {}).get("M", {}).get("ffn_dim", arch.ffn_dim)
    assert hf.config.tie_word_embeddings == arch.tie_embeddings
    if arch.rope_scaling is not None:
        rope = getattr(hf.config, "rope_parameters", None) or hf.config.rope_scaling  # transformers 5 / 4
        assert rope["rope_type"] == "llama3" and rope["factor"] == 8.0
    assert sum(p.numel() for p in hf.parameters()) == sum(p.numel() for p in ours.parameters())
    a, b = logits_both(ours, hf)
    torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-5)


def test_byte_tokenizer_round_trips_to_the_same_ids(tmp_path):
    model_dir, ours = train_dir(tmp_path, "(AM)x2")
    out = tmp_path / "hf"
    result = export_hf(model_dir, out)
    assert "byte-level" in result.tokenizer and "summary.json" in result.tokenizer
    tok = AutoTokenizer.from_pretrained(out)
    expected = ByteTokenizer().encode_batch([TEXT])[0]
    assert tok(TEXT)["input_ids"] == expected  # no BOS added: the model never saw one
    assert tok.decode(expected) == TEXT
    assert tok.eos_token_id == 256 and tok.decode([*expected, 256], skip_special_tokens=True) == TEXT
    generation = json.loads((out / "generation_config.json").read_text())
    assert generation["eos_token_id"] == 256 and generation["bos_token_id"] is None

    hf = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32).eval()
    prompt = tok(TEXT, return_tensors="pt")
    generated = hf.generate(**prompt, max_new_tokens=5, do_sample=False, eos_token_id=None)
    assert torch.equal(generated, greedy(ours, prompt["input_ids"], 5))


def greedy(model, ids: torch.Tensor, n: int) -> torch.Tensor:
    for _ in range(n):
        with torch.no_grad():
            ids = torch.cat((ids, model(ids).logits[:, -1].argmax(-1, keepdim=True)), dim=1)
    return ids


def test_hybrid_is_a_remote_code_model_with_our_logits(tmp_path):
    model_dir, ours = train_dir(tmp_path, "AMSMWM", options={"W": {"window": 8}})
    assert not is_llama(ours.arch)
    out = tmp_path / "hf"
    result = export_hf(model_dir, out)
    assert result.kind == "remote-code"
    assert {"configuration_composer.py", "modeling_composer.py"} <= set(result.files)
    config = json.loads((out / "config.json").read_text())
    assert config["auto_map"]["AutoModelForCausalLM"] == "modeling_composer.ComposerForCausalLM"
    assert config["arch"]["pattern"] == "AMSMWM"

    hf = AutoModelForCausalLM.from_pretrained(out, trust_remote_code=True, dtype=torch.float32).eval()
    assert type(hf).__name__ == "ComposerForCausalLM"
    a, b = logits_both(ours, hf, seq_len=40)  # longer than the window
    torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-5)

    tok = AutoTokenizer.from_pretrained(out, trust_remote_code=True)
    prompt = tok(TEXT, return_tensors="pt")
    generated = hf.generate(**prompt, max_new_tokens=4, do_sample=False, eos_token_id=None)
    assert torch.equal(generated, greedy(ours, prompt["input_ids"], 4))
    ids = prompt["input_ids"]
    loss = hf(input_ids=ids, labels=ids).loss
    targets = torch.cat((ids[:, 1:], torch.full((1, 1), -100)), dim=1)
    with torch.no_grad():
        torch.testing.assert_close(loss, ours(ids, targets).lm_loss, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="right padding only"):
        hf(input_ids=ids[:, :3], attention_mask=torch.tensor([[0, 1, 1]]))


def test_hf_tokenizer_files_in_the_model_dir_are_resaved(tmp_path):
    from transformers import PreTrainedTokenizerFast

    model_dir, _ = train_dir(tmp_path, "AMSM")
    hf_tok = PreTrainedTokenizerFast(tokenizer_object=byte_tokenizer_fast(), eos_token="<|endoftext|>")
    hf_tok.save_pretrained(model_dir)  # as if the model had been trained with this Hugging Face tokenizer
    assert find_tokenizer(model_dir)[0] == str(model_dir)
    out = tmp_path / "hf"
    result = export_hf(model_dir, out)
    assert "Hugging Face tokenizer" in result.tokenizer
    tok = AutoTokenizer.from_pretrained(out, trust_remote_code=True)
    assert tok(TEXT)["input_ids"] == hf_tok(TEXT)["input_ids"] and tok.eos_token_id == 256


def test_cli_export_and_force(tmp_path, capsys):
    model_dir, _ = train_dir(tmp_path, "AMSM")
    out = tmp_path / "hf"
    assert main(["export", "--model", str(model_dir), "--format", "hf", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "remote code" in text and "trust_remote_code=True" in text
    assert (out / "modeling_composer.py").is_file()
    (out / "README.md").write_text("kept")

    llama_dir, _ = train_dir(tmp_path, "(AM)x2")
    assert main(["export", "--model", str(llama_dir), "--out", str(out)]) == 2
    assert "--force" in capsys.readouterr().err
    assert main(["export", "--model", str(llama_dir), "--out", str(out), "--force", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["kind"] == "llama" and data["load"].endswith(f"from_pretrained({str(out)!r})")
    assert not (out / "modeling_composer.py").exists()  # the previous export's remote code is gone
    assert (out / "README.md").read_text() == "kept"  # files the export does not own stay
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staging directory left


def test_usage_errors_exit_2_with_one_line(tmp_path, capsys, monkeypatch):
    model_dir, _ = train_dir(tmp_path, "(AM)x2")
    nonempty = tmp_path / "full"
    nonempty.mkdir()
    (nonempty / "x").write_text("x")
    cases = [
        (["--model", str(tmp_path / "nope")], "does not exist"),
        (["--model", str(model_dir.parent)], "pass the model/ folder inside it"),
        (["--model", str(model_dir), "--format", "gguf"], "unknown --format 'gguf'; supported: hf"),
        (["--model", str(model_dir), "--out", str(nonempty)], "exists and is not empty; pass --force"),
        (["--model", str(model_dir), "--out", str(model_dir)], "not the model directory itself"),
    ]
    for argv, message in cases:
        argv = ["export", *argv] + ([] if "--out" in argv else ["--out", str(tmp_path / "o")])
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1 and "Traceback" not in err, err
    monkeypatch.setitem(sys.modules, "transformers", None)  # import transformers now raises ImportError
    assert main(["export", "--model", str(model_dir), "--out", str(tmp_path / "o")]) == 2
    assert "pip install 'composer-hnas[bench]'" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_parallel_layers_export_as_remote_code_with_our_logits_and_generation(tmp_path):
    model_dir, ours = train_dir(tmp_path, "[AS]M[WS]M", options={"W": {"window": 8}})
    out = tmp_path / "hf"
    assert export_hf(model_dir, out).kind == "remote-code"
    hf = AutoModelForCausalLM.from_pretrained(out, trust_remote_code=True, dtype=torch.float32).eval()
    assert hf.config.num_hidden_layers == 4
    a, b = logits_both(ours, hf, seq_len=40)
    torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-5)
    prompt = AutoTokenizer.from_pretrained(out, trust_remote_code=True)(TEXT, return_tensors="pt")
    generated = hf.generate(**prompt, max_new_tokens=4, do_sample=False, eos_token_id=None)
    assert torch.equal(generated, greedy(ours, prompt["input_ids"], 4))
