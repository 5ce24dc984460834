"""Keep README.md runnable: its commands match CI and its examples run (litgpt's practice)."""

from __future__ import annotations

import json
import math
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

from tests.search.records import check_answer

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def fenced_blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", README, flags=re.S)


def test_ci_runs_the_readme_test_command():
    setup, test = (block.strip() for block in fenced_blocks("bash")[:2])
    ci_commands = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert test in ci_commands, f"README test command {test!r} is not what .ci/run runs"
    assert "torch==2.13.0" in setup, "the set-up command must install the CPU torch build first"


def test_readme_setup_runs_the_main_job(tmp_path):
    """The set-up command ends with the main job, `composer search` on its embedded default: successive halving
    (``strategy: auto`` with the lm evaluator), rungs of rising tokens with the finalists ranked at the target.

    The full default (the ``cpu`` ladder, about an hour on 2 cores) is too long for a test, so the test runs the
    same command with the smoke overrides (``--budget smoke --trials 3 --widths tiny``): the same code path end to
    end, every rung included, in a few minutes on 2 cores.
    """
    setup = fenced_blocks("bash")[0].strip()
    job = setup.split("&&")[-1].strip()
    assert shlex.split(job) == ["composer", "search"], "the set-up command must end with the main job"
    out = tmp_path / "search"
    argv = ["search", "--budget", "smoke", "--trials", "3", "--widths", "tiny", "--out", str(out)]
    env = {**os.environ, "WANDB_MODE": "offline"}
    result = subprocess.run(
        [sys.executable, "-m", "composer", *argv], capture_output=True, text=True, env=env, cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr[-3000:]
    rungs = json.loads((out / "rungs.json").read_text())
    assert [rung["budget"] for rung in rungs] == ["rung-smoke-0", "rung-smoke-1"], "the default is successive halving"
    assert rungs[0]["candidates"] == 3
    leaderboard = json.loads((out / "leaderboard.json").read_text())  # the last rung's ranking, at the target
    assert [row["rank"] for row in leaderboard] == list(range(1, len(leaderboard) + 1)) and len(leaderboard) >= 2
    assert len({row["pattern"] for row in leaderboard}) == len(leaderboard), "distinct patterns"
    scores = [row["score"] for row in leaderboard]  # validation losses, lowest first, below uniform guessing
    assert scores == sorted(scores) and all(0.0 < s < math.log(512) for s in scores)
    assert all(row["rung"] == 1 and row["lr"] in (1e-3, 3e-3) and row["params"] > 0 for row in leaderboard)
    assert any(row["known"] for row in leaderboard), "the best known layout always reaches the last rung"
    best = json.loads((out / "best.json").read_text())
    assert best["pattern"] == leaderboard[0]["pattern"] and best["answer"] == best["vs_known"]["answer"]
    check_answer(best["vs_known"])
    assert best["strategy"] == "successive-halving"
    for name in ("leaderboard.csv", "optimization_history.png", "score_vs_attention_share.png"):
        assert (out / name).stat().st_size > 0, name
    assert leaderboard[0]["pattern"] in result.stdout, "the leaderboard is printed"


def test_readme_console_example_is_current():
    block = fenced_blocks("console")[0]
    command, *expected = block.strip().splitlines()
    argv = shlex.split(command.removeprefix("$ "))[1:]
    result = subprocess.run([sys.executable, "-m", "composer", *argv], capture_output=True, text=True)
    assert result.stdout.strip().splitlines() == expected


def test_readme_python_example_runs():
    code = fenced_blocks("python")[0]
    namespace: dict = {}
    exec(compile(code, "README.md", "exec"), namespace)
    assert namespace["loss"].item() > 0


def test_readme_training_example_runs(tmp_path):
    """The first `composer train` line of README.md (the offline CPU example) runs as written."""
    block = next(b for b in fenced_blocks("bash") if b.lstrip().startswith("composer train"))
    command = block.strip().splitlines()[0].split("#")[0]
    argv = shlex.split(command)[1:]
    argv[argv.index("--out") + 1] = str(tmp_path / "run")
    env = {**os.environ, "COMPOSER_CACHE": str(tmp_path / "cache"), "WANDB_MODE": "offline"}
    result = subprocess.run(
        [sys.executable, "-m", "composer", *argv], capture_output=True, text=True, env=env, cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["val_loss"] > 0 and summary["tokens"] > 0 and summary["tokens_per_s"] > 0


def test_readme_generation_example_runs():
    code = next(block for block in fenced_blocks("python") if "model.generate" in block)
    namespace: dict = {}
    exec(compile(code, "README.md", "exec"), namespace)
    assert namespace["new"].shape == (2, 32) and namespace["more"].shape == (2, 16)
    assert namespace["cache"].pos == 16 + 32 + 16 - 1
