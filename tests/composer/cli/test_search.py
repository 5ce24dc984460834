"""``composer search``'s command line: what its help says a bare search does, and bad input as one line, exit 2."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

import pytest

from composer.cli import build_parser, main
from search.config import SearchConfig
from search.fidelity import LADDERS


def _search_parser() -> argparse.ArgumentParser:
    subcommands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return subcommands.choices["search"]


def test_the_help_describes_the_search_a_bare_command_runs():
    """Issue 34: the help described the one-shot search at 400K tokens that successive halving replaced."""
    config = SearchConfig()
    assert config.strategy == "successive-halving"  # what `strategy: auto` makes of the defaults
    text = _search_parser().description
    assert "400K" not in text
    assert f"successive halving on the {config.budget} ladder" in text and LADDERS[config.budget].description in text
    assert f"{config.trials} candidates, {config.layers}-layer" in text


def test_the_target_help_gives_each_strategys_own_default():
    """Issue 34: ``--target`` said ``default llama-3.2-1b`` unconditionally; under successive halving (the default)
    it is the ladder's last rung's preset. Each default must sit in the clause of its strategy."""
    help_text = next(a.help for a in _search_parser()._actions if a.dest == "target")
    clauses = help_text.split(";")
    for strategy in ("successive-halving", "one-shot"):
        default = SearchConfig(strategy=strategy).report_target
        naming = [clause for clause in clauses if default in clause]
        assert naming and all(strategy in clause for clause in naming), (strategy, default, help_text)


def test_a_missing_data_file_is_one_line_and_exit_2_before_any_candidate_trains(tmp_path):
    """Issue 34: every candidate trained into the same DataError and the search ended in a RuntimeError traceback
    (exit 1); a missing --data path is bad input like any other."""
    missing = tmp_path / "nonexistent.jsonl"
    out = tmp_path / "search"
    result = subprocess.run(
        [sys.executable, "-m", "composer", "search", "--data", str(missing), "--budget", "smoke", "--trials", "2",
         "--preset", "tiny", "--wandb", "off", "--out", str(out)],
        capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"}, timeout=300,
    )
    assert result.returncode == 2, result.stderr[-3000:]
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert lines[0].startswith("composer search: error: ") and str(missing) in lines[0]
    assert "pass an existing file" in lines[0]  # the fix
    assert not (out / "study.db").exists(), "no trial may start"


SMOKE = ["--budget", "smoke", "--trials", "3", "--preset", "tiny", "--wandb", "off"]


@pytest.mark.parametrize("argv, said", [
    (["--wandb", "nope"], "--wandb must be one of auto, online, offline, off, got 'nope'"),
    (["--preset", "nope"], "--preset: unknown preset 'nope'; choose one of: "),
    (["--layers", "0"], "layers must be a positive integer, got 0"),
    (["--min-share", "A=2"], "min_share of A must be between 0 and 1, got 2.0"),
    (["--max-params", "-5"], "--max-params is the most non-embedding parameters"),
    (["--max-params", "1000"], "--max-params 1,000 admits none of the 64 patterns: the smallest, AAAAAA, has "
                               "74,176 non-embedding parameters at tiny; raise --max-params to at least 74,176"),
    (["--max-kv", "1KB@32K", "--primitives", "A"], "--max-kv 1KB@32K admits none of the 1 patterns: the least, "
                                                   "AAAAAA, holds "),
    (["--max-kv", "10M@32K"], "--max-kv: the size '10M' is not a number with a unit: sizes take B, KB/MB/GB"),
    (["--text-field", "body"], "--text-field names the column of --data's records that holds the text"),
])
def test_bad_input_is_one_line_and_exit_2_before_anything_is_printed_or_written(tmp_path, capsys, argv, said):
    """Issue 47: --wandb nope trained until W&B refused it (traceback, exit 1), --widths nope failed after the
    header, --layers 0 and --min-share A=2 left a config.json in --out, --max-params -5 skipped every candidate
    without end: each is now one line, exit 2, with nothing in --out."""
    out = tmp_path / "search"
    # SMOKE less the flags the case gives: one flag given two values is refused before its value is read (issue 69)
    smoke = [word for flag, value in zip(SMOKE[::2], SMOKE[1::2]) if flag not in argv for word in (flag, value)]
    assert main(["search", *smoke, "--out", str(out), *argv]) == 2
    captured = capsys.readouterr()
    assert not captured.out and captured.err.count("\n") == 1, captured.err
    assert captured.err.startswith(f"composer search: error: {said}"), captured.err
    assert not out.exists()


def test_data_without_its_text_field_is_one_line_before_anything_trains(tmp_path, capsys):
    """Issue 47: JSON lines without a ``text`` field failed every candidate, then a RuntimeError traceback (exit
    1). The first record is read when the search starts: one line naming the fields it has and --text-field."""
    notes = tmp_path / "notes.jsonl"
    notes.write_text("".join(json.dumps({"body": f"note {i}: the quick brown fox."}) + "\n" for i in range(20)))
    out = tmp_path / "search"
    assert main(["search", *SMOKE, "--data", str(notes), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("composer search: error: text field 'text' not found in ")
    assert "available fields: body; set text_field (--text-field)" in err and not out.exists()
    from search.evaluators import make_evaluator  # with the field named, the evaluator takes it to every run

    evaluator = make_evaluator("lm", "smoke", "tiny", str(notes), text_field="body")
    assert evaluator.train_config("AMAM", 1e-3, 0, str(tmp_path / "run")).text_field == "body"


def test_ctrl_c_is_one_line_and_exit_130(monkeypatch, capsys):
    """Issue 47: Ctrl-C while a search started a W&B run printed 50 lines of wandb.init's traceback."""
    import search.run

    def interrupted(*_, **__):
        raise KeyboardInterrupt

    monkeypatch.setattr(search.run, "run_search", interrupted)
    assert main(["search", *SMOKE]) == 130
    assert capsys.readouterr().err == "composer search: interrupted\n"


def test_the_sampler_help_says_which_sampler_two_objectives_get_under_each_strategy():
    """Issue 61, item 4: --sampler's help said nsga2 is the default with 2+ objectives; under successive halving
    (the default strategy) the rungs rank by the score alone and the sampler stays gp."""
    [sampler] = [a for a in _search_parser()._actions if "--sampler" in a.option_strings]
    assert SearchConfig(objectives=["score", "kv"], strategy="successive-halving").sampler_name == "gp"
    assert SearchConfig(objectives=["score", "kv"], strategy="one-shot").sampler_name == "nsga2"
    assert "except under successive-halving" in sampler.help and "gp there" in sampler.help
