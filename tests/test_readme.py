"""Keep README.md runnable: its commands match CI and its examples run (litgpt's practice)."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def fenced_blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", README, flags=re.S)


def test_ci_runs_the_readme_test_command():
    setup, test = (block.strip() for block in fenced_blocks("bash")[:2])
    ci_commands = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert test in ci_commands, f"README test command {test!r} is not what .ci/run runs"
    assert "torch==2.13.0" in setup, "the set-up command must install the CPU torch build first"


def test_readme_setup_runs_the_main_job():
    setup = fenced_blocks("bash")[0].strip()
    job = setup.split("&&")[-1].strip()
    assert job.startswith("composer ")
    argv = shlex.split(job)[1:]
    result = subprocess.run([sys.executable, "-m", "composer", *argv], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


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
