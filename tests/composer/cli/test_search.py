"""``composer search``'s command line: what its help says a bare search does, and bad input as one line, exit 2."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

from composer.cli import build_parser
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
         "--widths", "tiny", "--wandb", "off", "--out", str(out)],
        capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"}, timeout=300,
    )
    assert result.returncode == 2, result.stderr[-3000:]
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert lines[0].startswith("composer search: error: ") and str(missing) in lines[0]
    assert "pass an existing file" in lines[0]  # the fix
    assert not (out / "study.db").exists(), "no trial may start"
