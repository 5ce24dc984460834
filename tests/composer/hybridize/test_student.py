"""Hybridization: the student architecture, the weight mapping from the teacher's attention, freezing, and the
distillation run (composer/hybridize/student.py)."""

from __future__ import annotations

import json

import pytest
import torch

from composer.cli import main
from composer.errors import ConfigError
from composer.hybridize.distill import kl_divergence
from composer.hybridize.student import freeze, init_student, student_arch
from composer.model import build_model
from tests.composer.hybridize.models import TEACHER, student_of, teacher_model


def test_the_student_keeps_depth_widths_and_ffn_layers():
    arch = student_arch(TEACHER, "AMDMSM")
    assert arch.pattern == "AMDMSM" and arch.d_model == TEACHER.d_model and arch.vocab_size == TEACHER.vocab_size
    assert arch.options["D"] == {"n_heads": 4, "head_dim": 16, "expand_v": 1.0}
    assert arch.options["S"] == {"expand": 1, "head_dim": 16, "n_groups": 4, "d_state": 16}
    with pytest.raises(ConfigError, match="the pattern has 4 layers but the teacher 6"):
        student_arch(TEACHER, "AMDM")
    with pytest.raises(ConfigError, match="layer 1 is M in the teacher but S in the pattern"):
        student_arch(TEACHER, "ASAMAM")


def test_sliding_window_and_kept_attention_copy_the_teacher_exactly():
    teacher = teacher_model()
    student, notes = student_of("WMAMWM", teacher)  # W's default window (4,096) covers these 32 tokens
    ids = torch.randint(0, TEACHER.vocab_size, (2, 32))
    with torch.no_grad():
        torch.testing.assert_close(student(ids).logits, teacher(ids).logits)
    assert notes == []


def test_gated_deltanet_and_mamba2_read_the_attention_projections():
    teacher = teacher_model()
    student, notes = student_of("DMSMAM", teacher)
    assert notes == []
    q, k, v = teacher.layers[0].primitive.wqkv.weight.split((64, 32, 32))
    repeat = lambda w: w.unflatten(0, (2, 16)).repeat_interleave(2, 0).flatten(0, 1)  # noqa: E731
    d = student.layers[0].primitive
    assert torch.equal(d.q_proj.weight, q) and torch.equal(d.k_proj.weight, repeat(k))
    assert torch.equal(d.v_proj.weight, repeat(v))
    assert torch.equal(d.o_proj.weight, teacher.layers[0].primitive.wo.weight)
    assert torch.equal(d.q_conv1d.weight[:, 0, -1], torch.ones(64)) and d.q_conv1d.weight[:, 0, :-1].abs().sum() == 0
    q2, k2, v2 = teacher.layers[2].primitive.wqkv.weight.split((64, 32, 32))
    s = student.layers[2].primitive
    _, x, b, c, _ = s.in_proj.weight.split([64, 64, 64, 64, 4])
    assert torch.equal(x, repeat(v2)) and torch.equal(b, repeat(k2)) and torch.equal(c, q2)
    assert torch.equal(s.out_proj.weight, teacher.layers[2].primitive.wo.weight)
    for i in (1, 3, 4, 5):  # MLPs and the kept attention layer are the teacher's
        theirs = teacher.layers[i].state_dict()
        for name, ours in student.layers[i].state_dict().items():
            assert torch.equal(ours, theirs[name]), (i, name)


def test_the_mapped_start_is_closer_to_the_teacher_than_a_random_one():
    teacher = teacher_model()
    mapped, _ = student_of("DMSMAM", teacher)
    torch.manual_seed(1)
    unmapped = build_model(student_arch(TEACHER, "DMSMAM")).eval()
    unmapped.load_state_dict({**unmapped.state_dict(), **{n: t for n, t in teacher.state_dict().items()
                                                          if not n.startswith(("layers.0.", "layers.2."))}})
    ids = torch.randint(0, TEACHER.vocab_size, (4, 48))
    with torch.no_grad():
        reference = teacher(ids).logits
        assert kl_divergence(mapped(ids).logits, reference) < kl_divergence(unmapped(ids).logits, reference)


def test_freeze_groups():
    student = build_model(student_arch(TEACHER, "DMAMSM"))
    frozen = set(freeze(student, ["mlp", "embeddings"]))
    assert "tok_embeddings.weight" in frozen and "layers.1.primitive.w13.weight" in frozen
    assert "layers.1.norm.weight" in frozen and not any(n.startswith("layers.0.") for n in frozen)
    assert set(freeze(student, ["attention"])) >= {"layers.2.primitive.wqkv.weight"}
    with pytest.raises(ConfigError, match="unknown group"):
        freeze(student, ["mlps"])
    trained = {id(p) for group in student.parameter_groups(0.1) for p in group["params"]}
    assert all(id(p) not in trained for n, p in student.named_parameters() if n in frozen)


@pytest.mark.slow
def test_hybridize_distils_a_trained_llama_and_writes_the_summary(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COMPOSER_CACHE", str(tmp_path / "cache"))
    common = ["--seq-len", "64", "--batch-size", "8", "--max-documents", "200", "--wandb", "off",
              "--precision", "32-true"]
    assert main(["train", "--arch", "(AM)x3", "--preset", "tiny", "--tokens", str(30 * 512), "--lr", "3e-3",
                 "--out", str(tmp_path / "teacher"), *common]) == 0
    capsys.readouterr()
    assert main(["hybridize", "--init-from", str(tmp_path / "teacher" / "model"), "--arch", "AMDMSM",
                 "--tokens", str(6 * 512), "--out", str(tmp_path / "hybrid"), "--json", *common]) == 0
    summary = json.loads(capsys.readouterr().out)
    h = summary["hybridize"]
    assert summary["pattern"] == "AMDMSM" and summary["val_loss"] > 0 and h["val_kl"] >= 0
    assert h["teacher_pattern"] == "(AM)x3" and h["cache_ratio"] < 1 and h["frozen"] == ["mlp", "embeddings"]
    assert h["frozen_params"] > 0 and (tmp_path / "hybrid" / "model" / "model.safetensors").is_file()
    assert json.loads((tmp_path / "hybrid" / "summary.json").read_text()) == summary
    # distillation did something: the trained hybrid is closer to the teacher than where the mapping started it
    from composer.data.tokenizer import ByteTokenizer
    from composer.interop.model_dir import load_pretrained

    teacher = load_pretrained(tmp_path / "teacher" / "model")
    start = build_model(student_arch(teacher.arch, "AMDMSM")).eval()
    init_student(start, teacher.arch, teacher.state_dict())
    trained = load_pretrained(tmp_path / "hybrid" / "model")
    text = "The hybrid keeps the teacher's embeddings and MLPs, and learns its new mixers from the teacher. " * 2
    ids = torch.tensor([ByteTokenizer().encode_batch([text])[0][:64]])
    with torch.no_grad():
        reference = teacher(ids).logits
        start_kl, trained_kl = (kl_divergence(model(ids).logits, reference).item() for model in (start, trained))
    assert trained_kl < start_kl, f"KL to the teacher went from {start_kl:.4f} to {trained_kl:.4f}"
    assert main(["hybridize", "--init-from", str(tmp_path / "teacher" / "model"), "--arch", "AMDM",
                 "--out", str(tmp_path / "bad")]) == 2
    assert "the pattern has 4 layers but the teacher 6" in capsys.readouterr().err


# the data and precision of the command-line hybridize runs below (equality across processes needs fp32)
COMMON = ["--seq-len", "64", "--batch-size", "8", "--max-documents", "200", "--wandb", "off", "--precision", "32-true"]


@pytest.fixture(scope="module")
def small_teacher(tmp_path_factory):
    """A tiny (AM)x2 Llama trained for 8 steps: the teacher of the kill and two-process tests, trained once for
    both (in this process; its own cache directory)."""
    out = tmp_path_factory.mktemp("teacher")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("COMPOSER_CACHE", str(out / "cache"))
        assert main(["train", "--arch", "(AM)x2", "--preset", "tiny", "--tokens", str(8 * 512), "--out",
                     str(out / "run"), "--device", "cpu", *COMMON]) == 0
    return out / "run" / "model"


@pytest.mark.slow
def test_a_killed_hybridize_resumes_and_keeps_the_frozen_weights(tmp_path, small_teacher, monkeypatch):
    """SIGTERM mid-training in its own process, then ``--resume`` in this one (a second process would only import
    torch and Lightning again, ~10 s)."""
    import os
    import sys

    from safetensors.torch import load_file

    from composer.training.checkpoint import latest_checkpoint
    from tests.composer.training.preempt import checkpoint_step, sigterm_while_training, trained_steps

    env = {**os.environ, "OMP_NUM_THREADS": "1", "COMPOSER_CACHE": str(tmp_path / "cache")}
    out = tmp_path / "hybrid"
    argv = [sys.executable, "-m", "composer", "hybridize", "--init-from", str(small_teacher), "--arch", "DMAM",
            *COMMON, "--out", str(out)]
    returncode, err = sigterm_while_training([*argv, "--tokens", str(4000 * 512)], out, env)
    saved = latest_checkpoint(out / "checkpoints")
    assert returncode == 143 and saved is not None, err[-2000:]  # 128 + SIGTERM, as README promises
    step = checkpoint_step(saved)
    # hybridize logs the training loss every 10 steps (steps 9, 19, ...; the first log is what the kill waited
    # for, so step >= 10): resume to the next multiple of 10, whose last step is logged by the resumed run alone
    end = (step // 10 + 1) * 10
    monkeypatch.setenv("COMPOSER_CACHE", env["COMPOSER_CACHE"])
    assert main([*argv[3:], "--tokens", str(end * 512), "--resume"]) == 0
    first, second = trained_steps(out)
    assert first[0] == 9 and step >= 10
    assert second == [end - 1], f"the resumed run logged steps {second}: not only the last of {step}..{end - 1}"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["steps"] == end
    ours = load_file(str(out / "model" / "model.safetensors"))
    theirs = load_file(str(small_teacher / "model.safetensors"))
    for name in ("tok_embeddings.weight", "layers.1.primitive.w13.weight", "layers.3.primitive.w2.weight"):
        assert torch.equal(ours[name], theirs[name]), f"{name} is frozen and must not change"
    teacher_q = theirs["layers.0.primitive.wqkv.weight"][: ours["layers.0.primitive.q_proj.weight"].shape[0]]
    assert not torch.equal(ours["layers.0.primitive.q_proj.weight"], teacher_q), "the new mixer trained"


def test_hybridize_recipes_load_with_valid_keys(capsys):
    from pathlib import Path

    recipes = sorted((Path(__file__).resolve().parents[3] / "recipes").glob("hybridize*.yaml"))
    assert recipes
    for recipe in recipes:  # the teacher does not exist here: the recipe is read, then the import fails by name
        assert main(["hybridize", "--recipe", str(recipe)]) == 2
        err = capsys.readouterr().err
        assert "unknown option" not in err and "is not a Composer model directory" in err, err


def test_hybridize_takes_a_transformers_checkpoint_and_imports_it_once(tmp_path, capsys, monkeypatch):
    transformers = pytest.importorskip("transformers")
    monkeypatch.setenv("COMPOSER_CACHE", str(tmp_path / "cache"))
    from composer.data.tokenizer import load_tokenizer, save_tokenizer_files

    config = transformers.LlamaConfig(vocab_size=320, hidden_size=64, intermediate_size=160, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128)
    torch.manual_seed(0)
    transformers.AutoModelForCausalLM.from_config(config).save_pretrained(tmp_path / "hf")
    save_tokenizer_files(load_tokenizer("bytes"), tmp_path / "hf", 128)
    out = tmp_path / "hybrid"
    assert main(["hybridize", "--init-from", str(tmp_path / "hf"), "--arch", "DMAM", "--out", str(out),
                 "--tokens", "1024", "--seq-len", "64", "--batch-size", "8", "--max-documents", "100",
                 "--wandb", "off", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["hybridize"]["teacher_pattern"] == "(AM)x2" and (out / "imported" / "model.safetensors").is_file()


@pytest.mark.slow
def test_hybridize_on_two_processes_with_fsdp2_matches_one_device(tmp_path, small_teacher, monkeypatch):
    """The teacher stays whole on every rank, the student is sharded with its frozen MLPs; 2 CPU processes (gloo)
    with the same global batch give the single-device result."""
    import os
    import subprocess
    import sys

    monkeypatch.setenv("COMPOSER_CACHE", str(tmp_path / "cache"))
    argv = ["hybridize", "--init-from", str(small_teacher), "--arch", "DMAM", "--tokens", str(6 * 512), *COMMON,
            "--device", "cpu"]
    assert main([*argv, "--out", str(tmp_path / "single")]) == 0  # one device, in this process
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    run = subprocess.run([sys.executable, "-m", "composer", *argv, "--out", str(tmp_path / "fsdp"), "--devices", "2",
                          "--parallelism", "fsdp", "--json"], capture_output=True, text=True, env=env, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    results = {name: json.loads((tmp_path / name / "summary.json").read_text()) for name in ("single", "fsdp")}
    assert json.loads(run.stdout) == results["fsdp"]  # one JSON document: only the main process prints
    assert results["fsdp"]["world_size"] == 2 and results["fsdp"]["strategy"] == "fsdp"
    assert results["fsdp"]["param_share_per_rank"] == pytest.approx(0.5, abs=0.05)  # the student is sharded
    assert results["fsdp"]["val_loss"] == pytest.approx(results["single"]["val_loss"], rel=1e-4)
    assert results["fsdp"]["hybridize"]["val_kl"] == pytest.approx(results["single"]["hybridize"]["val_kl"], rel=1e-3)
