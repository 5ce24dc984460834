"""``composer generate``: the model and its saved tokenizer, streamed text equal to ComposerModel.generate's."""

from __future__ import annotations

import json

import pytest
import torch

from composer.cli import main
from composer.cli.generate import StreamDecoder
from composer.data import ByteTokenizer
from composer.interop.model_dir import export_weights
from composer.model import build_model
from composer.presets import resolve_architecture

PROMPT = "Héllo wörld 🎉 "


def model_dir(tmp_path, pattern="AMSMWM", vocab=257, tokenizer="bytes", max_seq_len=64):
    """A random model as composer train leaves it in <out>/model (vocab 257: no padded rows to mask)."""
    arch, _ = resolve_architecture(pattern, "tiny", "tiny")
    arch = arch.replace(vocab_size=vocab, max_seq_len=max_seq_len)
    model = build_model(arch).eval()
    directory = export_weights(model.state_dict(), arch, tmp_path / "run" / "model", tokenizer=tokenizer)
    return directory, model


def prompt_ids(text=PROMPT):
    return torch.tensor(list(text.encode("utf-8")))


def test_greedy_stream_equals_model_generate(tmp_path, capsys):
    directory, model = model_dir(tmp_path)
    argv = ["generate", "--model", str(directory), "--prompt", PROMPT, "--max-new-tokens", "30",
            "--temperature", "0"]
    assert main(argv) == 0
    out, err = capsys.readouterr()
    expected = model.generate(prompt_ids(), 30, temperature=0, eos=256)
    assert out == ByteTokenizer().decode(expected.tolist()) + "\n"
    # one generation's time, not a decode speed: a single timing has no spread (issue 61)
    assert "tokens in" in err and "tokens/s" not in err and "timed once" in err and err.count("\n") == 1


def test_sampling_json_equals_model_generate_with_the_same_seed(tmp_path, capsys):
    directory, model = model_dir(tmp_path, "AMDMEM")
    argv = ["generate", "--model", str(directory.parent), "--prompt", PROMPT, "--max-new-tokens", "25",
            "--temperature", "0.9", "--top-k", "40", "--top-p", "0.95", "--seed", "3", "--json"]
    assert main(argv) == 0
    data = json.loads(capsys.readouterr().out)
    generator = torch.Generator().manual_seed(3)
    expected = model.generate(prompt_ids(), 25, temperature=0.9, top_k=40, top_p=0.95, eos=256,
                              generator=generator).tolist()
    assert data["token_ids"] == expected
    assert data["completion"] == ByteTokenizer().decode(expected)
    assert data["prompt"] == PROMPT and data["prompt_ids"] == prompt_ids().tolist()
    assert data["stop"] == ("eos" if expected[-1] == 256 else "max_new_tokens")
    for key in ("time_to_first_token_s", "tokens_per_s", "total_s"):
        assert data[key] > 0
    assert data["tokenizer"] == "bytes" and data["pattern"] == "AMDMEM"


def test_compile_generates_the_same_tokens_through_the_compiled_step(tmp_path, capsys, monkeypatch):
    """``--compile``: the decoding step compiled before the clock starts, named in the JSON and on stderr, the
    greedy tokens unchanged (torch.compile stubbed out: tests/composer/test_compiled_decode.py compiles)."""
    directory, model = model_dir(tmp_path, "AMDMEM")
    monkeypatch.setattr("torch.compile", lambda fn, **kwargs: fn)
    argv = ["generate", "--model", str(directory), "--prompt", PROMPT, "--max-new-tokens", "12",
            "--temperature", "0"]
    assert main([*argv, "--compile", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["token_ids"] == model.generate(prompt_ids(), 12, temperature=0, eos=256).tolist()
    assert data["decode_path"] == "compiled (inductor, cpu)" and data["compile_s"] > 0
    assert main([*argv, "--compile"]) == 0
    assert "(compiled (inductor, cpu), compiled in" in capsys.readouterr().err
    assert main([*argv, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["decode_path"] == "eager" and data["compile_s"] is None


def test_padded_vocabulary_rows_are_never_drawn(tmp_path, capsys):
    directory, _ = model_dir(tmp_path, "(AM)x2", vocab=320)  # 257 rounded up to 64, as composer train does
    argv = ["generate", "--model", str(directory), "--prompt", "ab", "--max-new-tokens", "60", "--temperature",
            "5", "--json"]
    assert main(argv) == 0
    ids = json.loads(capsys.readouterr().out)["token_ids"]
    assert ids and max(ids) <= 256


def test_stream_decoder_never_prints_broken_characters():
    text = "aé🎉日本\n"
    decoder = StreamDecoder(ByteTokenizer())
    pieces = [decoder.add(b) for b in text.encode()]
    assert "".join(pieces) + decoder.finish() == text
    assert all("\ufffd" not in piece for piece in pieces)
    assert pieces[:2] == ["a", ""] and pieces[2] == "é"
    broken = [0xF0, 0x9F, 0x41, 0xE6, 0x97]  # a cut 4-byte character, "A", then a cut 3-byte one at the end
    decoder = StreamDecoder(ByteTokenizer())
    assert "".join(decoder.add(b) for b in broken) + decoder.finish() == bytes(broken).decode(errors="replace")


def test_stream_decoder_with_a_hugging_face_tokenizer(hf_tokenizer):
    decoder = StreamDecoder(hf_tokenizer)
    text = "alpha0 beta1 é🎉 gamma2"
    ids = hf_tokenizer.encode_batch([text])[0]
    pieces = [decoder.add(i) for i in [*ids, hf_tokenizer.eos_id]]
    assert "".join(pieces) + decoder.finish() == text
    assert all("\ufffd" not in piece for piece in pieces)


@pytest.fixture
def hf_tokenizer(tmp_path):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    from composer.data import load_tokenizer

    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["<|eos|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    backend.train_from_iterator(["alpha0 beta1 gamma2 delta3"] * 20, trainer)
    PreTrainedTokenizerFast(tokenizer_object=backend, eos_token="<|eos|>").save_pretrained(tmp_path / "tok")
    return load_tokenizer(tmp_path / "tok")


def test_hf_tokenizer_saved_with_the_model(tmp_path, capsys, hf_tokenizer):
    directory, model = model_dir(tmp_path, "AMSM", vocab=320, tokenizer=hf_tokenizer)
    assert main(["generate", "--model", str(directory), "--prompt", "alpha0 beta1", "--max-new-tokens", "12",
                 "--temperature", "0", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    ids = hf_tokenizer.encode_batch(["alpha0 beta1"])[0]
    assert data["prompt_ids"] == ids
    assert data["completion"] == hf_tokenizer.decode([i for i in data["token_ids"] if i != hf_tokenizer.eos_id])


def test_prompt_near_the_context_limit(tmp_path, capsys):
    directory, _ = model_dir(tmp_path, "AM", max_seq_len=32)
    assert main(["generate", "--model", str(directory), "--prompt", "x" * 30, "--max-new-tokens", "10",
                 "--temperature", "0", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["n_new_tokens"] <= 2 and "cut to 2" in data["notes"][0]


def test_usage_errors_exit_2_with_one_line(tmp_path, capsys):
    directory, _ = model_dir(tmp_path, "AM", max_seq_len=32)
    arch = resolve_architecture("AM", "tiny", "tiny")[0]  # vocab 256: too small for the byte tokenizer
    small = export_weights(build_model(arch).state_dict(), arch, tmp_path / "small")
    arch = arch.replace(vocab_size=320)
    old = export_weights(build_model(arch).state_dict(), arch, tmp_path / "old")  # no tokenizer, no run around
    base = ["--model", str(directory), "--prompt", "hi"]
    cases = [
        (["--model", str(tmp_path / "nope"), "--prompt", "hi"], "does not exist"),
        (["--model", str(old), "--prompt", "hi"], "no tokenizer is saved with the model"),
        (["--model", str(directory), "--prompt", ""], "--prompt is empty"),
        (["--model", str(directory), "--prompt", "x" * 32], "shorten it to at most 31 tokens"),
        ([*base, "--max-new-tokens", "0"], "--max-new-tokens must be a positive integer, got '0'"),
        ([*base, "--max-new-tokens", "ten"], "--max-new-tokens must be a positive integer"),
        ([*base, "--temperature", "-1"], "--temperature must be a number >= 0"),
        ([*base, "--temperature", "nan"], "--temperature must be a number >= 0"),
        ([*base, "--top-k", "0"], "--top-k must be a positive integer"),
        ([*base, "--top-p", "0"], "--top-p must be a number in (0, 1]"),
        ([*base, "--top-p", "1.5"], "--top-p must be a number in (0, 1]"),
        ([*base, "--seed", "x"], "argument --seed: must be an integer from 0 to 4294967295, got 'x'"),
        ([*base, "--seed", "-1"], "argument --seed: must be an integer from 0 to 4294967295, got '-1'"),
        ([*base, "--tokenizer", str(tmp_path / "missing")], "does not exist"),
        (["--model", str(small), "--prompt", "hi", "--tokenizer", "bytes"], "has 257 ids but the model only 256"),
        (["--model", str(tmp_path), "--prompt", "hi"], "is not a Composer model directory"),
    ]
    for argv, message in cases:
        try:
            status = main(["generate", *argv])
        except SystemExit as stopped:  # refused by the parser (--seed's range, as on every command)
            status = stopped.code
        assert status == 2, argv
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1 and "Traceback" not in err, (argv, err)
    # an old model directory works with --tokenizer
    assert main(["generate", "--model", str(old), "--prompt", "hi", "--tokenizer", "bytes",
                 "--max-new-tokens", "3"]) == 0


def test_a_model_trained_by_composer_train_generates_offline(tmp_path, capsys, monkeypatch):
    from composer.training.config import TrainConfig
    from composer.training.run import train

    monkeypatch.setenv("COMPOSER_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    out = tmp_path / "run"
    train(TrainConfig(arch="AMSM", preset="tiny", seq_len=32, batch_size=4, tokens=2 * 4 * 32, max_documents=50,
                      val_batches=1, val_tokens=64, wandb="off", out=str(out)))
    capsys.readouterr()
    model = out / "model"
    assert json.loads((model / "config.json").read_text())["tokenizer"] == "bytes"
    assert (model / "tokenizer.json").is_file()
    moved = tmp_path / "elsewhere"
    model.rename(moved)  # no run directory around it any more
    assert main(["generate", "--model", str(moved), "--prompt", "The ", "--max-new-tokens", "8",
                 "--temperature", "0", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["tokenizer"] == "bytes" and 1 <= data["n_new_tokens"] <= 8


def test_stops_at_eos(tmp_path, capsys, monkeypatch):
    import composer.inference

    directory, _ = model_dir(tmp_path, "AM")
    drawn = iter([65, 66, 256, 67])
    monkeypatch.setattr(composer.inference, "sample_next", lambda logits, *a: torch.tensor([next(drawn)]))
    assert main(["generate", "--model", str(directory), "--prompt", "x", "--max-new-tokens", "10"]) == 0
    out, err = capsys.readouterr()
    assert out == "AB\n" and "stopped at eos" in err and "3 tokens" in err
