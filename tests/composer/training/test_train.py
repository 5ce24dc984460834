"""End-to-end training on CPU: offline default, W&B offline, resume, export, FSDP2 and DDP with 2 processes."""

from __future__ import annotations

import csv
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from composer.cli import main
from composer.training.checkpoint import checkpoint_problem, latest_checkpoint
from composer.training.config import TrainConfig
from composer.training.run import train
from tests.composer.training.preempt import (
    checkpoint_step,
    signal_at_step,
    sigterm_while_training,
    trained_steps,
)

# Small and fast: 512 tokens per step; the corpus is capped so tokenising it takes a moment.
FAST = dict(arch="(AM)x2", preset="tiny", seq_len=64, batch_size=8, max_documents=200, val_batches=4, lr=3e-3)


def train_losses(out: Path) -> dict[int, float]:
    """Per-step training loss from the always-written CSV metrics (all segments of a resumed run)."""
    losses = {}
    for metrics in sorted((out / "logs").glob("version_*/metrics.csv")):
        with open(metrics) as f:
            for row in csv.DictReader(f):
                if row.get("train/loss"):
                    losses[int(row["step"])] = float(row["train/loss"])
    return losses


def test_offline_default_trains_lowers_the_loss_and_logs_to_wandb_offline(tmp_path):
    out = tmp_path / "run"
    summary = train(TrainConfig(**FAST, tokens=60 * 512, log_interval=1, wandb="auto", out=str(out)))
    for key in ("val_loss", "tokens", "tokens_per_s", "params"):
        assert summary[key] is not None, key
    assert summary["tokens"] == 60 * 512 and summary["tokens_per_s"] > 0
    assert "mfu" not in summary  # no known peak for a CPU
    assert json.loads((out / "summary.json").read_text()) == summary
    losses = train_losses(out)
    first, last = sum(list(losses.values())[:5]) / 5, sum(list(losses.values())[-5:]) / 5
    assert last < first - 1.0, losses
    assert summary["val_loss"] < math.log(summary_vocab(out))
    runs = list((out / "wandb").glob("offline-run-*"))
    assert runs, "no offline W&B run directory"
    assert list(runs[0].glob("run-*.wandb")), "the offline W&B run holds no data"


def test_a_throughput_only_run_measures_speed_and_validates_and_saves_nothing(tmp_path, capsys):
    """The quick GPU check's MFU runs were killed after their timed steps, in the final validation and the 1B export
    (docs/gpu.md); --throughput-only leaves both out, and the validations during training too."""
    out = tmp_path / "run"
    assert main(["train", "--arch", FAST["arch"], "--preset", "tiny", "--seq-len", "64", "--batch-size", "8",
                 "--max-documents", "200", "--tokens", str(8 * 512), "--val-interval", "2", "--log-interval", "1",
                 "--wandb", "off", "--throughput-only", "--out", str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["steps"] == 8 and summary["tokens_per_s"] > 0 and summary["train_loss"] is not None
    assert summary["val_loss"] is None and summary["model_dir"] is None
    assert not (out / "checkpoints").exists() and not (out / "model").exists()
    logged = [row for metrics in (out / "logs").glob("version_*/metrics.csv")
              for row in csv.DictReader(metrics.read_text().splitlines())]
    assert len(train_losses(out)) == 8 and not any(row.get("val/loss") for row in logged), "a validation ran"
    assert "val_loss" not in capsys.readouterr().out


def test_offline_wandb_still_logs_after_an_earlier_wandb_run_in_the_process(tmp_path):
    """A pipeline's search logs its trials with wandb.init before training starts; wandb then ignores the
    WANDB_MODE that Lightning's offline flag sets, and asked for an API key (wandb 0.31)."""
    import wandb

    earlier = wandb.init(project="composer-search", dir=str(tmp_path), mode="offline",
                         settings=wandb.Settings(silent=True))
    earlier.log({"score": 1.0})
    earlier.finish()
    out = tmp_path / "run"
    train(TrainConfig(**FAST, tokens=2 * 512, wandb="auto", out=str(out)))
    assert list((out / "wandb").glob("offline-run-*/run-*.wandb")), "the offline W&B run holds no data"


def summary_vocab(out: Path) -> int:
    return json.loads((out / "model" / "config.json").read_text())["arch"]["vocab_size"]


def test_export_loads_back_with_the_trained_weights(tmp_path):
    from composer.training import latest_checkpoint, load_pretrained

    out = tmp_path / "run"
    train(TrainConfig(**FAST, tokens=6 * 512, wandb="off", out=str(out)))
    model = load_pretrained(out / "model")
    state = torch.load(latest_checkpoint(out / "checkpoints"), weights_only=False)["state_dict"]
    for name, tensor in model.state_dict().items():
        torch.testing.assert_close(tensor, state[f"model.{name}"], msg=name)
    ids = torch.randint(0, 256, (1, 16))
    assert torch.isfinite(model(ids).logits).all()


class _Crash(Exception):
    pass


def test_resumed_run_reproduces_the_uninterrupted_losses(tmp_path, monkeypatch):
    import lightning as L

    config = dict(FAST, tokens=12 * 512, checkpoint_interval=5, wandb="off", log_interval=1)
    reference = tmp_path / "reference"
    train(TrainConfig(**config, out=str(reference)))

    class CrashAfter(L.Callback):
        def on_train_batch_end(self, trainer, *_):
            if trainer.global_step == 7:  # after the checkpoint at step 5
                raise _Crash

    import composer.training.run as run

    real_build = run.build

    def build_with_crash(cfg, *options):
        trainer, *rest = real_build(cfg, *options)
        trainer.callbacks.append(CrashAfter())
        return (trainer, *rest)

    interrupted = tmp_path / "interrupted"
    monkeypatch.setattr(run, "build", build_with_crash)
    with pytest.raises(_Crash):
        train(TrainConfig(**config, out=str(interrupted)))
    monkeypatch.setattr(run, "build", real_build)
    assert not (interrupted / "summary.json").exists()

    with pytest.raises(Exception, match="pass --resume"):
        train(TrainConfig(**config, out=str(interrupted)))
    summary = train(TrainConfig(**config, out=str(interrupted)), resume=True)

    expected, resumed = train_losses(reference), train_losses(interrupted)
    assert sorted(resumed) == sorted(expected), "steps logged before the crash were lost"
    assert len(list((interrupted / "logs").glob("version_*"))) == 2
    for step in expected:
        assert resumed[step] == pytest.approx(expected[step], rel=1e-5), step
    assert summary["tokens"] == 12 * 512
    reference_summary = json.loads((reference / "summary.json").read_text())
    assert summary["val_loss"] == pytest.approx(reference_summary["val_loss"], rel=1e-5)


def run_cli(out: Path, *extra: str, launcher: tuple[str, ...] | None = (sys.executable, "-m", "composer")) -> dict:
    """``composer train`` with the shared flags, by ``launcher`` (None: in this process): its summary."""
    argv = [
        "train", "--arch", FAST["arch"], "--preset", FAST["preset"], "--seq-len", "64", "--batch-size", "8",
        "--max-documents", "200", "--val-batches", "4", "--tokens", str(10 * 512), "--wandb", "off",
        "--log-interval", "1", "--precision", "32-true", "--out", str(out), *extra,  # equality needs fp32
    ]
    if launcher is None:
        assert main(argv) == 0
    else:
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        result = subprocess.run([*launcher, *argv], capture_output=True, text=True, env=env, timeout=600)
        assert result.returncode == 0, result.stderr[-4000:]
    return json.loads((out / "summary.json").read_text())


@pytest.fixture(scope="module")
def one_process(tmp_path_factory) -> tuple[dict, dict[int, float]]:
    """The single-process run (8 sequences a step) that the multi-process tests below must follow: run once for
    them all (its own cache directory, as each test's), in this process (a process of its own would only import
    torch and Lightning again, ~10 s)."""
    out = tmp_path_factory.mktemp("one-process")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("COMPOSER_CACHE", str(out / "cache"))
        summary = run_cli(out / "single", "--devices", "1", "--device", "cpu", launcher=None)
    return summary, train_losses(out / "single")


@pytest.mark.parametrize("strategy", ["fsdp", "ddp"])
def test_two_processes_match_one_with_the_same_global_batch(tmp_path, strategy, one_process):
    """2 CPU processes (gloo) with 4 sequences each follow the single-process run of 8 sequences.

    Tolerance: 1e-4 relative on every step's loss; the only difference is the order of floating-point
    reductions (gradients all-reduced / reduce-scattered across ranks).
    """
    single, one = one_process
    double = run_cli(tmp_path / strategy, "--devices", "2", "--device", "cpu", "--parallelism", strategy)
    assert double["world_size"] == 2 and double["strategy"] == strategy
    # FSDP: each rank holds its half of every parameter (dim-0 shards, up to one row of rounding); DDP: a full copy
    expected = {"fsdp": pytest.approx(0.5, abs=0.02), "ddp": 1.0}[strategy]
    assert double["param_share_per_rank"] == expected and single["param_share_per_rank"] == 1.0
    two = train_losses(tmp_path / strategy)
    assert one.keys() == two.keys() and len(one) == 10
    for step in one:
        assert two[step] == pytest.approx(one[step], rel=1e-4), step
    assert double["val_loss"] == pytest.approx(single["val_loss"], rel=1e-4)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--data", "does/not/exist.jsonl"], "does/not/exist.jsonl"),
        (["--tokenizer", "/no/such/tokenizer"], "/no/such/tokenizer"),
        (["--arch", "AQM"], "unknown primitive 'Q'"),
        (["--arch", "AW", "--options", "{W: 3}"], "options must be JSON"),
        (["--arch", "AW", "--options", '{"W": {"windw": 8}}'], "windw"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, argv, message):
    code = main(["train", "--out", str(tmp_path / "run"), "--wandb", "off", *argv])
    err = capsys.readouterr().err
    assert code == 2
    assert message in err and err.strip().count("\n") == 0 and "Traceback" not in err


def test_per_primitive_options_reach_the_model_and_its_export(tmp_path):
    out = tmp_path / "run"
    train(TrainConfig(**{**FAST, "arch": "AWAW"}, options={"W": {"window": 8}}, tokens=2 * 512, wandb="off",
                      out=str(out)))
    saved = json.loads((out / "config.json").read_text())["arch"]
    assert saved["options"]["W"] == {"window": 8}
    from composer.interop.model_dir import load_pretrained

    model = load_pretrained(out / "model")
    assert model.layers[1].primitive.config.window == 8


def test_torchrun_launch_matches_one_process(tmp_path, one_process):
    """Launched by torchrun (as on clusters) rather than by Lightning itself: same losses as one process."""
    torchrun = (sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "-m", "composer")
    double = run_cli(tmp_path / "torchrun", "--devices", "2", "--device", "cpu", "--parallelism", "fsdp",
                     launcher=torchrun)
    assert double["world_size"] == 2
    one, two = one_process[1], train_losses(tmp_path / "torchrun")
    assert one.keys() == two.keys() and len(one) == 10
    for step in one:
        assert two[step] == pytest.approx(one[step], rel=1e-4), step


def test_seed_changes_the_model_but_not_the_validation_text(tmp_path):
    """Issue 10: two runs differing only in --seed report the same val_fingerprint and val_tokens, and the final
    validation scores the whole held-out split, not the training-time cap of val_batches micro-batches."""
    runs = {}
    for seed in (0, 1):
        runs[seed] = train(TrainConfig(**FAST, tokens=4 * 512, seed=seed, wandb="off", out=str(tmp_path / f"s{seed}")))
    a, b = runs[0], runs[1]
    assert (a["seed"], b["seed"], a["data_seed"], b["data_seed"]) == (0, 1, 0, 0)
    assert a["val_fingerprint"] == b["val_fingerprint"] and a["val_tokens"] == b["val_tokens"]
    assert a["val_loss"] != b["val_loss"]  # the seed did change the model
    per_pass = FAST["val_batches"] * FAST["batch_size"] * FAST["seq_len"]
    assert a["val_tokens"] == a["val_sequences"] * FAST["seq_len"] > per_pass  # more than the periodic cap
    capped = train(TrainConfig(**FAST, tokens=4 * 512, val_tokens=5 * 64, wandb="off", out=str(tmp_path / "cap")))
    assert capped["val_tokens"] == 5 * 64 and capped["val_fingerprint"] != a["val_fingerprint"]
    other = train(TrainConfig(**FAST, tokens=4 * 512, data_seed=3, wandb="off", out=str(tmp_path / "split3")))
    assert other["val_fingerprint"] != a["val_fingerprint"]


@pytest.mark.slow
def test_compile_trains_what_eager_trains(tmp_path):
    """Issue 11: `composer train --compile` used to crash in the rotary split under dynamo."""
    argv = ["--arch", "(AM)x2", "--preset", "tiny", "--seq-len", "64", "--batch-size", "8", "--max-documents",
            "200", "--val-batches", "2", "--tokens", str(3 * 512), "--precision", "32-true", "--log-interval", "1"]
    assert main(["train", "--out", str(tmp_path / "eager"), "--wandb", "off", *argv]) == 0
    torch._dynamo.utils.counters.clear()
    assert main(["train", "--out", str(tmp_path / "compiled"), "--wandb", "off", "--compile", *argv]) == 0
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] > 0, "--compile compiled nothing"
    eager, compiled = (json.loads((tmp_path / run / "summary.json").read_text()) for run in ("eager", "compiled"))
    assert (eager["compile"], compiled["compile"]) == (False, True)
    one, two = train_losses(tmp_path / "eager"), train_losses(tmp_path / "compiled")
    assert one.keys() == two.keys() and len(one) == 3
    for step in one:
        assert two[step] == pytest.approx(one[step], rel=1e-4), step
    assert compiled["val_loss"] == pytest.approx(eager["val_loss"], rel=1e-4)


def test_resume_falls_back_past_a_corrupt_newest_checkpoint_and_keeps_it(tmp_path, capsys):
    """Issue 13: a truncated newest checkpoint is skipped with a reason, set aside (never deleted), and the run
    continues from the previous one to the same end."""
    out = tmp_path / "run"
    config = TrainConfig(**FAST, tokens=6 * 512, checkpoint_interval=2, keep_checkpoints=3, wandb="off",
                         out=str(out))
    train(config)
    newest = latest_checkpoint(out / "checkpoints")
    assert newest.name == "step-00000006.ckpt"
    data = newest.read_bytes()
    newest.write_bytes(data[: len(data) // 2])  # a copy cut short

    summary = train(config, resume=True)
    err = capsys.readouterr().err
    assert "skipping checkpoint step-00000006.ckpt: it does not load" in err
    assert (out / "checkpoints" / "step-00000006.ckpt.corrupt").read_bytes() == data[: len(data) // 2]
    assert summary["tokens"] == 6 * 512 and summary["val_loss"] is not None
    assert checkpoint_problem(latest_checkpoint(out / "checkpoints")) is None


@pytest.mark.slow
def test_sigterm_saves_the_step_just_finished_and_resume_completes(tmp_path):
    """Issue 13: a preempted run (SIGTERM) leaves a checkpoint of its last step, not only the last periodic one,
    exits 143 (README's promise to schedulers), and --resume continues from that step, not from step 0."""
    out = tmp_path / "run"
    argv = [sys.executable, "-m", "composer", "train", "--arch", "(AM)x2", "--preset", "tiny", "--seq-len", "64",
            "--batch-size", "8", "--max-documents", "200", "--tokens", str(4000 * 512), "--checkpoint-interval",
            "1000", "--wandb", "off", "--precision", "32-true", "--log-interval", "1", "--out", str(out)]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    returncode, err = sigterm_while_training(argv, out, env)
    assert returncode == 143, err[-2000:]  # 128 + SIGTERM, as README promises schedulers
    saved = latest_checkpoint(out / "checkpoints")
    assert saved is not None and "SIGTERM: saved" in err, err[-2000:]
    step = checkpoint_step(saved)
    assert 0 < step < 4000
    # the resume in this process (a second one would only import torch and Lightning again, ~10 s)
    resumed = [*argv[3:-2], "--out", str(out), "--resume"]
    resumed[resumed.index("--tokens") + 1] = str((step + 2) * 512)  # one --tokens: a second value is refused
    assert main(resumed) == 0
    first, second = trained_steps(out)  # the resumed run logs beside the first, not over it
    assert first[0] == 0 and first[-1] <= step - 1
    assert second == [step, step + 1], f"the resumed run trained steps {second}, not the two after step {step}"
    assert json.loads((out / "summary.json").read_text())["steps"] == step + 2


@pytest.mark.parametrize("resumed_val_interval", [5, 7])
def test_a_resumed_sigterm_checkpoint_logs_each_step_under_its_own_number(tmp_path, monkeypatch,
                                                                         resumed_val_interval):
    """CI (stop 45): a run preempted at step 100 and resumed with a budget whose validation fell on step 100 logged
    its steps as 101, 102. Lightning counted the step a second time because the SIGTERM checkpoint held the loop's
    counters after their update; the optimizer's step was right, every logged step one ahead. Here the first run
    validates every 20 steps and stops at 5; the resumed one validates every 5 (the bug) or every 7 (control)."""
    signal_at_step(monkeypatch, step=5)
    config = dict(FAST, wandb="off", checkpoint_interval=1000, log_interval=1, out=str(tmp_path))
    with pytest.raises(SystemExit):
        train(TrainConfig(**config, tokens=40 * 512, val_interval=20))
    monkeypatch.undo()
    assert checkpoint_step(latest_checkpoint(tmp_path / "checkpoints")) == 5
    summary = train(TrainConfig(**config, tokens=8 * 512, val_interval=resumed_val_interval), resume=True)
    first, second = trained_steps(tmp_path)
    assert first == [0, 1, 2, 3, 4]
    assert second == [5, 6, 7], f"the resumed run logged steps {second} for optimizer steps 5, 6, 7"
    assert summary["steps"] == 8


def test_sigterm_hint_names_the_checkpoint_unless_the_caller_says_how_to_continue(tmp_path, monkeypatch, capsys):
    """``composer train`` keeps its preemption hint (the saved step and ``--resume``); ``save_on_sigterm=False``, for
    a run in a temporary directory (a search candidate, issue 34), neither saves nor points at the file."""
    signal_at_step(monkeypatch, step=1)
    config = dict(FAST, tokens=8 * 512, wandb="off", checkpoint_interval=1000)
    kept, temporary = tmp_path / "kept", tmp_path / "temporary"
    with pytest.raises(SystemExit) as stopped:
        train(TrainConfig(**config, out=str(kept)))
    saved = kept / "checkpoints" / "step-00000001.ckpt"
    assert stopped.value.code == 143 and saved.is_file()
    assert f"SIGTERM: saved {saved}; continue with --resume" in capsys.readouterr().err
    with pytest.raises(SystemExit) as stopped:
        train(TrainConfig(**config, out=str(temporary)), save_on_sigterm=False)
    assert stopped.value.code == 143 and latest_checkpoint(temporary / "checkpoints") is None
    assert "SIGTERM" not in capsys.readouterr().err


def test_a_parallel_layer_pattern_trains_and_its_summary_counts_the_models_parameters(tmp_path):
    from composer.config import ArchConfig
    from composer.model import build_model

    out = tmp_path / "parallel"
    assert main(["train", "--arch", "([AS]M)x2", "--preset", "tiny", "--seq-len", "64", "--batch-size", "8",
                 "--max-documents", "200", "--val-batches", "2", "--tokens", str(20 * 512), "--lr", "3e-3",
                 "--wandb", "off", "--log-interval", "1", "--out", str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    arch = json.loads((out / "config.json").read_text())["arch"]  # tiny with the tokenizer's vocabulary
    model = build_model(ArchConfig(**arch))
    assert summary["params"] == sum(p.numel() for p in model.parameters())
    assert summary["pattern"] == "[AS]M[AS]M" and math.isfinite(summary["val_loss"])
    losses = train_losses(out)
    assert sum(list(losses.values())[-3:]) < sum(list(losses.values())[:3])
