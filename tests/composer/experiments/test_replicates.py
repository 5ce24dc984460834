"""Seeded training runs (composer/experiments/replicates.py): seed-major order, nothing finished trained twice, changed settings
refused, and the validation identity shared by a set of runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from composer.errors import ConfigError
from composer.experiments import replicates
from composer.experiments.replicates import parse_seeds, plan_replicates, run_replicates, shared_validation


def fake_train(calls: list):
    """Stands in for composer.training.run.train: writes what a finished run leaves behind."""

    def train(config, resume=False):
        out = Path(config.out)
        out.mkdir(parents=True, exist_ok=True)
        calls.append((config.arch, config.seed, resume))
        (out / "config.json").write_text(json.dumps({"train": config.to_dict()}))
        summary = {"pattern": config.arch, "val_loss": 3.0 + config.seed / 10, "tokens_per_s": 1000.0,
                   "val_fingerprint": "abc", "val_tokens": 128}
        (out / "summary.json").write_text(json.dumps(summary))
        return summary

    return train


@pytest.fixture
def calls(monkeypatch):
    made: list = []
    monkeypatch.setattr("composer.training.run.train", fake_train(made))
    return made


def test_runs_go_seed_major_and_finished_runs_are_never_trained_again(tmp_path, calls):
    models = {"composite": "AAMM", "llama": "AMAM"}
    base = {"tokens": 4096, "seq_len": 64}
    plan = plan_replicates(models, [0, 1], tmp_path, base, "tiny")
    assert [(r.name, r.seed) for r in plan] == [("composite", 0), ("llama", 0), ("composite", 1), ("llama", 1)]
    assert plan[3].out == tmp_path / "llama" / "seed-1" and plan[3].config.seed == 1
    lines: list[str] = []
    summaries = run_replicates(plan, echo=lines.append)
    assert calls == [("AAMM", 0, False), ("AMAM", 0, False), ("AAMM", 1, False), ("AMAM", 1, False)]
    assert summaries[("llama", 1)]["val_loss"] == pytest.approx(3.1)
    assert any("ETA" in line for line in lines), "progress shows an ETA once a run has finished"

    # a third seed trains only the new runs
    calls.clear()
    lines.clear()
    summaries = run_replicates(plan_replicates(models, [0, 1, 2], tmp_path, base, "tiny"), echo=lines.append)
    assert calls == [("AAMM", 2, False), ("AMAM", 2, False)] and len(summaries) == 6
    assert "4 of 6 runs already finished" in lines[0]


def test_an_interrupted_run_resumes_from_its_checkpoint(tmp_path, calls):
    plan = plan_replicates({"m": "AM"}, [0], tmp_path, {"tokens": 4096}, "tiny")
    (plan[0].out / "checkpoints").mkdir(parents=True)
    (plan[0].out / "checkpoints" / "step-00000002.ckpt").write_bytes(b"x")
    run_replicates(plan, echo=lambda line: None)
    assert calls == [("AM", 0, True)]


def test_a_run_finished_with_other_settings_is_refused_by_name(tmp_path, calls):
    run_replicates(plan_replicates({"m": "AM"}, [0], tmp_path, {"tokens": 4096, "lr": 1e-3}, "tiny"), echo=print)
    changed = plan_replicates({"m": "AM"}, [0], tmp_path, {"tokens": 8192, "lr": 1e-3, "wandb": "off"}, "tiny")
    with pytest.raises(ConfigError, match=r"seed-0 was trained with other settings: tokens=4096 \(now 8192\)"):
        run_replicates(changed, echo=print)
    other_arch = plan_replicates({"m": "AAMM"}, [0], tmp_path, {"tokens": 4096, "lr": 1e-3}, "tiny")
    with pytest.raises(ConfigError, match="arch='AM'"):
        replicates.finished_summary(other_arch[0])
    # settings that do not change the result (logging, W&B) are not a reason to retrain
    same = plan_replicates({"m": "AM"}, [0], tmp_path, {"tokens": 4096, "lr": 1e-3, "log_interval": 1}, "tiny")
    assert replicates.finished_summary(same[0])["pattern"] == "AM"


@pytest.mark.parametrize("given, seeds", [([0, 1, 2], [0, 1, 2]), ("0,1,2", [0, 1, 2]), (" 3 , 5", [3, 5]),
                                          (3, [0, 1, 2]), ("2", [0, 1]), ("5,", [5])])
def test_seeds_parse_from_recipes_and_flags(given, seeds):
    assert parse_seeds(given) == seeds


@pytest.mark.parametrize("given, message", [([], "non-empty"), ([1, 1], "distinct"), ("a,b", "comma-separated"),
                                            ([-1], "integers >= 0"), ([True], "integers >= 0"), (0, "at least 1")])
def test_bad_seeds_name_the_problem(given, message):
    with pytest.raises(ConfigError, match=message):
        parse_seeds(given)


def test_validation_identity_says_whether_runs_share_their_held_out_text():
    same = [{"val_fingerprint": "f", "val_tokens": 10}, {"val_fingerprint": "f", "val_tokens": 10}]
    assert shared_validation(same) == {"val_fingerprint": "f", "val_tokens": 10, "same": True}
    assert not shared_validation([*same, {"val_fingerprint": "g", "val_tokens": 10}])["same"]
    assert not shared_validation([{"val_loss": 1.0}])["same"], "runs from before fingerprints prove nothing"


def test_runs_trained_side_by_side_equal_runs_trained_one_after_another(tmp_path):
    """workers=2 trains in spawned processes (no monkeypatched train reaches them): real, tiny runs."""
    base = {"tokens": 2048, "seq_len": 64, "batch_size": 8, "max_documents": 40, "val_tokens": 1024,
            "precision": "32-true", "wandb": "off", "log_interval": 1}
    lines: list[str] = []
    together = run_replicates(plan_replicates({"a": "AM", "m": "MM"}, [0], tmp_path / "together", base, "tiny"),
                              echo=lines.append, workers=2)
    alone = run_replicates(plan_replicates({"a": "AM"}, [0], tmp_path / "alone", base, "tiny"), echo=print)
    assert set(together) == {("a", 0), ("m", 0)}
    assert together[("a", 0)]["val_loss"] == pytest.approx(alone[("a", 0)]["val_loss"], rel=1e-4)
    assert together[("m", 0)]["pattern"] == "MM"
    assert any("2 runs, 2 at a time" in line for line in lines)
    assert sum("== trained" in line for line in lines) == 2, "one progress line per finished run"
    # finished side-by-side runs are finished runs: nothing is trained again
    lines.clear()
    run_replicates(plan_replicates({"a": "AM", "m": "MM"}, [0], tmp_path / "together", base, "tiny"),
                   echo=lines.append, workers=2)
    assert "2 of 2 runs already finished" in lines[0] and not any("at a time" in line for line in lines)


@pytest.mark.parametrize("workers", [0, -1, 1.5, True])
def test_workers_must_be_a_positive_integer(tmp_path, workers):
    with pytest.raises(ConfigError, match="workers must be a positive integer"):
        run_replicates(plan_replicates({"m": "AM"}, [0], tmp_path, {"tokens": 4096}, "tiny"), workers=workers)
