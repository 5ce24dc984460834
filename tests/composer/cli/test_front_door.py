"""The front door (issue 69): a first ``composer train --from-search`` prints its own lines, not Lightning's device
lines, a W&B deprecation warning and W&B's 25-line summary; it says where its offline W&B run is; its figures are in
one human format; its parameter count states why it differs from ``composer info``'s (the embedding padded to the
tokenizer); and the model it writes is readable by others (0644 under the usual umask), as any file is."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from composer.cli import main

TWO_STEPS = ["--seq-len", "64", "--batch-size", "8", "--max-documents", "200", "--val-batches", "2",
             "--val-tokens", "1024", "--tokens", str(2 * 512), "--precision", "32-true"]
BOILERPLATE = ("GPU available", "TPU available", "Trainer.fit", "Automatic Mixed Precision", "was configured so",
               "wandb:", "anonymous")


@pytest.fixture
def fresh_terminal(tmp_path, monkeypatch):
    """No setting that would change what W&B or Lightning print; offline, with the usual umask."""
    monkeypatch.setenv("COMPOSER_CACHE", str(tmp_path / "cache"))
    for name in ("WANDB_SILENT", "COMPOSER_VERBOSE", "WANDB_API_KEY", "WANDB_MODE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    umask = os.umask(0o022)
    yield tmp_path
    os.umask(umask)


def test_a_two_step_train_from_search_prints_its_own_lines_and_where_its_wandb_run_is(finished_search,
                                                                                      fresh_terminal, capfd, caplog):
    code = main(["train", "--from-search", str(finished_search), "--target", "tiny", "--out", "run", *TWO_STEPS,
                 "--wandb", "offline"])
    out, err = capfd.readouterr()
    assert code == 0, err
    # Lightning writes to its own logger, which pytest's root handler takes over from the terminal: its records
    # are what would have been printed
    for line in BOILERPLATE:
        assert line not in out + err + caplog.text, f"{line!r} reached the terminal:\n{err}\n{caplog.text}\n{out}"
    rows = dict(re.match(r"(\S+(?: run)?)\s+(.*)", line).groups() for line in out.splitlines())
    # where the offline W&B run is, and that it is there
    folder = Path(rows["W&B run"].split()[0])  # "W&B run  run/wandb/offline-run-... (offline; `wandb sync ...`)"
    assert folder.parent == Path("run") / "wandb" and folder.name.startswith("offline-run-") and folder.is_dir()
    assert f"`wandb sync {folder}` uploads it" in rows["W&B run"]
    # one format: counts with thousands separators, rates in whole tokens, losses to 4 decimals
    assert re.fullmatch(r"1\d\d,\d{3} \(.*\)", rows["params"]), rows["params"]
    assert re.fullmatch(r"[\d,]+", rows["tokens_per_s"]) and re.fullmatch(r"\d+\.\d{4}", rows["val_loss"])
    assert rows["tokens"] == "1,024"
    # one parameter count, with its reason: train's exceeds info's by the padded embedding rows exactly
    summary = json.loads((Path("run") / "summary.json").read_text())
    assert main(["info", summary["pattern"], "--preset", "tiny", "--json"]) == 0
    info = json.loads(capfd.readouterr().out)
    padded = summary["vocab_size"] - info["arch"]["vocab_size"]
    assert padded > 0 and summary["params"] - info["params"] == padded * info["arch"]["d_model"]
    assert (f"embedding {summary['vocab_size']} rows = the tokenizer's {summary['tokenizer_vocab_size']} ids padded "
            "to a multiple of 64, where composer info counts the preset's vocabulary") in rows["params"]
    assert (Path("run") / "model" / "model.safetensors").stat().st_mode & 0o777 == 0o644


def test_lightning_and_wandb_speak_when_asked(monkeypatch):
    """COMPOSER_VERBOSE=1 lets Lightning's start-up lines and W&B's own output through; WANDB_SILENT decides W&B's
    where it is set."""
    import logging

    from composer.training.config import wandb_settings
    from composer.training.run import quiet_lightning

    monkeypatch.delenv("WANDB_SILENT", raising=False)
    monkeypatch.delenv("COMPOSER_VERBOSE", raising=False)
    quiet_lightning()
    assert logging.getLogger("lightning.pytorch").level == logging.WARNING and wandb_settings().silent
    monkeypatch.setenv("COMPOSER_VERBOSE", "1")
    quiet_lightning()
    assert logging.getLogger("lightning.pytorch").level == logging.INFO and not wandb_settings().silent
    monkeypatch.setenv("COMPOSER_VERBOSE", "0")
    monkeypatch.setenv("WANDB_SILENT", "false")
    assert not wandb_settings().silent


def test_a_search_says_where_its_offline_wandb_runs_are(tmp_path):
    from search.config import SearchConfig
    from search.tracking import runs_line

    for name in ("offline-run-20260101_000000-a", "offline-run-20260101_000001-b"):
        (tmp_path / "wandb" / name).mkdir(parents=True)
    said = runs_line(SearchConfig(out=str(tmp_path), wandb="offline"))
    assert said == (f"W&B: 2 offline runs in {tmp_path / 'wandb'} (`wandb sync {tmp_path / 'wandb'}/offline-run-*` "
                    "uploads them)")
    assert runs_line(SearchConfig(out=str(tmp_path), wandb="off")) is None
