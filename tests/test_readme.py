"""Keep README.md and its usage guides (docs/usage/*.md) runnable, litgpt's practice: a user copies a command from
them, so every command in a fenced bash block is checked.

- Commands that run on a CPU in seconds run as written (the Python and console examples, ``composer report``, a
  tiny ``composer train``, ``composer search --plan``); the main job runs with the smoke overrides its README
  documents (``SMOKE``), since the default search takes about 25 minutes.
- Every other ``composer`` command (GPU, multi-host, network-only, or long) is parsed by the CLI's own parser, so a
  renamed or removed flag, a choice no longer offered, an old spelling that prints its rename notice, or a recipe
  that is gone breaks the test; ``pip`` names extras that exist; any other program must be one this test knows.
- No figure in README disagrees with its measured source: the default search's time appears once and is the
  latest timed report's (``benchmarks/results/default_search_timed-*.json``).
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.search.records import check_answer

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
GUIDES = sorted((ROOT / "docs" / "usage").glob("*.md"))
DOCS = [README, *GUIDES]
# the main job's documented overrides for a test: the smoke ladder, 3 trials, the tiny preset (README: "the smoke
# check"); the rest of the command line is the default's
SMOKE = ["--budget", "smoke", "--trials", "3", "--preset", "tiny"]
# programs a block may call besides composer, and how each is checked (test_every_command_is_checked)
OTHER_PROGRAMS = ("pip", "python3", "bash")
# a subprocess finds this checkout's composer whatever its working directory
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
       "WANDB_MODE": "offline", "WANDB_SILENT": "true"}


def fenced_blocks(path: Path, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", path.read_text(), flags=re.S)


def commands(block: str) -> list[list[str]]:
    """The commands of a bash block as argv lists: continuation lines joined, comments dropped, ``&&`` split."""
    found = []
    for line in block.replace("\\\n", " ").splitlines():
        command: list[str] = []
        for word in shlex.split(line, comments=True):
            if word == "&&":
                found.append(command)
                command = []
            else:
                command.append(word)
        if command:
            found.append(command)
    return found


def all_commands() -> list[tuple[str, list[str]]]:
    return [(path.relative_to(ROOT).as_posix(), argv) for path in DOCS
            for block in fenced_blocks(path, "bash") for argv in commands(block)]


def readme_commands(subcommand: str) -> list[list[str]]:
    """README's ``composer SUBCOMMAND ...`` commands, as the argv after ``composer``."""
    return [argv[1:] for block in fenced_blocks(README, "bash") for argv in commands(block)
            if argv[:2] == ["composer", subcommand]]


def run_cli(argv: list[str], cwd: Path, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "composer", *argv], capture_output=True, text=True, env=ENV,
                          cwd=cwd, timeout=timeout)


def run_here(argv: list[str], cwd: Path, monkeypatch, capsys, **env: str) -> tuple[int, str, str]:
    """``composer ARGV`` through its entry point in this process, from ``cwd``, with ENV's W&B settings and ``env``:
    (exit status, stdout, stderr). The commands that train run here: a process each would only import torch and
    Lightning again (~10 s apiece on 2 busy cores)."""
    from composer.cli import main

    monkeypatch.chdir(cwd)
    for name, value in {"WANDB_MODE": ENV["WANDB_MODE"], "WANDB_SILENT": ENV["WANDB_SILENT"], **env}.items():
        monkeypatch.setenv(name, value)
    capsys.readouterr()
    code = main(argv)
    said = capsys.readouterr()
    return code, said.out, said.err


def value_of(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


def parse(argv: list[str]):
    """``composer ARGV`` through the CLI's own parser, as the command would parse it: the namespace, or the reason
    it was refused (argparse's usage error, or an old spelling's rename notice on stderr)."""
    from composer.cli import build_parser
    from composer.cli.parsing import announce_old_spellings, refuse_conflicts
    from composer.errors import ConfigError
    from composer.training import config as train_config

    train_config._noticed.clear()  # a rename notice is printed once per process
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            args = build_parser().parse_args(argv)
            refuse_conflicts(args)  # one option given two values
        except SystemExit:
            return None, err.getvalue().strip().splitlines()[-1]
        except ConfigError as refused:
            return None, str(refused)
        announce_old_spellings(args)  # once the command line is accepted, as composer does
    return args, err.getvalue().strip()


# -- the two commands ----------------------------------------------------------------------------------------------

def test_ci_runs_the_readme_test_command():
    setup, test = (block.strip() for block in fenced_blocks(README, "bash")[:2])
    ci_commands = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert test in ci_commands, f"README test command {test!r} is not what .ci/run runs"
    assert "torch==2.13.0" in setup, "the set-up command must install the CPU torch build first"


def test_readme_smoke_check_main_job_sample_and_report(tmp_path, monkeypatch, capsys):
    """README's smoke check, run as written (its ``--out`` under a temporary directory): the main job with the
    documented overrides, the same code path end to end, every rung included, in a few minutes on 2 cores. Its
    output is then read three ways: the main job's files, README's sample summary, and ``composer report``. One
    test, so that pytest-xdist's workers do not each run the search. Both commands run in this process
    (``run_here``)."""
    [argv] = [argv for argv in readme_commands("search") if argv[1:len(SMOKE) + 1] == SMOKE]
    out = tmp_path / value_of(argv, "--out")
    code, stdout, stderr = run_here(argv, tmp_path, monkeypatch, capsys)
    assert code == 0, stderr[-3000:]
    check_main_job(argv, out, stdout)
    check_sample(stdout)
    check_report(argv, out, monkeypatch, capsys)


def check_main_job(argv: list[str], out: Path, stdout: str) -> None:
    """The set-up command ends with the main job, ``composer search`` on its embedded default: successive halving
    (``strategy: auto`` with the lm evaluator), rungs of rising tokens with the finalists ranked at the target.
    README's smoke check is that command with the documented overrides (``SMOKE``) and an ``--out``."""
    setup = fenced_blocks(README, "bash")[0]
    assert commands(setup)[-1] == ["composer", "search"], "the set-up command must end with the main job"
    assert argv == ["search", *SMOKE, "--out", value_of(argv, "--out")], "the smoke check: main job + SMOKE + --out"
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
    check_answer(best["vs_known"], leaderboard)
    assert best["strategy"] == "successive-halving"
    for name in ("leaderboard.csv", "optimization_history.png", "score_vs_attention_share.png"):
        assert (out / name).stat().st_size > 0, name
    assert leaderboard[0]["pattern"] in stdout, "the leaderboard is printed"


def check_sample(stdout: str) -> None:
    """README's sample summary has the form the smoke check prints today: its leaderboard header verbatim, and each
    of its labelled lines (``rungs:``, the answer's, ``best score ...``) among the labels of the printed lines."""
    [sample] = fenced_blocks(README, "text")
    header, *lines = [line for line in sample.splitlines() if line.strip()]
    assert header in stdout.splitlines(), f"the leaderboard header changed: {header!r}"
    label = re.compile(r"([a-z][a-z ]*?)(?::| \(| [A-Z]{2,})")
    printed = {match.group(1) for line in stdout.splitlines() if (match := label.match(line))}
    labelled = [match.group(1) for line in lines if (match := label.match(line))]
    assert "best score" in labelled, "the sample shows the answer's lines"
    missing = [name for name in labelled if name not in printed]
    assert not missing, f"the smoke check prints no line starting {missing}"


def check_report(search_argv: list[str], out: Path, monkeypatch, capsys) -> None:
    """``composer report DIR`` on the smoke check's ``--out`` re-prints its answer and recommendation, without
    training."""
    [argv] = readme_commands("report")
    assert argv[-1] == value_of(search_argv, "--out"), "README reports the search it ran"
    code, stdout, stderr = run_here([*argv[:-1], str(out)], out.parent, monkeypatch, capsys)
    assert code == 0, stderr[-3000:]
    best = json.loads((out / "best.json").read_text())
    assert best["vs_known"]["recommended"] in stdout and best["answer"] in stdout, stdout


# -- every other command -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("source, argv", all_commands(), ids=lambda v: " ".join(v) if isinstance(v, list) else v)
def test_every_command_is_checked(source, argv):
    program, *rest = argv
    assert program in ("composer", *OTHER_PROGRAMS), f"{source}: no check for {program!r}; add one to this test"
    for word in rest:  # the repository's own files a command names (recipes, scripts) exist
        path = word.split("=")[-1]
        if path.startswith(("recipes/", "benchmarks/", "docs/")):
            assert (ROOT / path).exists(), f"{source}: {' '.join(argv)} names {path}, which is gone"
    if program == "composer":
        args, refused = parse(rest)
        assert args is not None and not refused, f"{source}: composer {' '.join(rest)}: {refused}"
    elif program == "pip":
        assert rest[0] == "install", argv
        extras = re.findall(r"\[([a-z,]+)\]", " ".join(rest))
        offered = re.search(r"\[project\.optional-dependencies\](.*?)\n\[", (ROOT / "pyproject.toml").read_text(),
                            flags=re.S).group(1)
        for extra in ",".join(extras).split(",") if extras else []:
            assert re.search(rf"^{extra} = ", offered, flags=re.M), f"{source}: no extra {extra!r} in pyproject.toml"
    elif program == "python3":
        assert rest[:2] == ["-m", "pytest"] and source == "README.md", f"{source}: {argv}"
    else:
        assert program == "bash" and rest[0].startswith("benchmarks/"), f"{source}: {argv}"


def test_every_train_example_names_its_out():
    """``composer train`` refuses to start without --out (a run directory is required), which the parse check above
    cannot see (argparse does not require it): every train command in README.md and docs/ names one, or a --recipe
    that may (issue 69: docs/search.md's ``train --from-search`` example had none)."""
    pages = [README, *sorted((ROOT / "docs").rglob("*.md"))]
    missing = [f"{page.relative_to(ROOT)}: {' '.join(argv)}" for page in pages
               for block in fenced_blocks(page, "bash") for argv in commands(block)
               if argv[:2] == ["composer", "train"] and not {"--out", "--recipe", "--help", "-h"} & set(argv)]
    assert not missing, missing


def test_a_renamed_flag_is_refused():
    """The parse check catches what it is for: an unknown flag, a retired choice, an old spelling's notice."""
    assert parse(["search", "--no-such-flag", "1"])[0] is None
    assert parse(["train", "--parallelism", "zero3"])[0] is None
    args, notice = parse(["train", "--strategy", "fsdp", "--out", "x"])
    assert args is not None and "--strategy is now --parallelism" in notice


def test_plan_commands_run(tmp_path):
    """``composer search ... --plan`` trains and writes nothing, so README's plans of the GPU searches run as
    written (on this machine's CPU: the device differs, the rungs and runs do not)."""
    plans = [argv for argv in readme_commands("search") if "--plan" in argv]
    assert len(plans) == 2, "README shows the plan of the 1-node and of the multi-host search"
    for argv in plans:
        argv = [str(ROOT / word) if word.startswith("recipes/") else word for word in argv]
        result = run_cli(argv, tmp_path, timeout=120)
        assert result.returncode == 0, (argv, result.stderr[-2000:])
        assert " is now " not in result.stderr, f"the recipe uses an old spelling: {result.stderr}"
        assert "nothing trains" in result.stdout and "total:" in result.stdout, result.stdout[-2000:]
        assert "rung-gpu-2" in result.stdout, "the GPU recipes search on the gpu ladder"
    assert not any(tmp_path.iterdir()), "a plan writes nothing"


def test_python_examples_run():
    """Every Python block of README and the guides runs; the README's and the generation example's results hold."""
    for path in DOCS:
        for code in fenced_blocks(path, "python"):
            namespace: dict = {}
            exec(compile(code, str(path.relative_to(ROOT)), "exec"), namespace)
            if "model.generate" in code:
                assert namespace["new"].shape == (2, 32) and namespace["more"].shape == (2, 16)
                assert namespace["cache"].pos == 16 + 32 + 16 - 1
            if "out.loss" in code:
                assert namespace["loss"].item() > 0


def test_console_examples_are_current():
    """A console block is a command and its output: the output is what the command prints today."""
    blocks = [block for path in DOCS for block in fenced_blocks(path, "console")]
    assert blocks
    for block in blocks:
        command, *expected = block.strip().splitlines()
        argv = shlex.split(command.removeprefix("$ "))[1:]
        result = run_cli(argv, ROOT, timeout=120)
        assert result.stdout.strip().splitlines() == expected


def test_training_example_runs(tmp_path, monkeypatch, capsys):
    """The training guide's first ``composer train`` line (the offline CPU example) runs as written (``run_here``)."""
    guide = ROOT / "docs" / "usage" / "training.md"
    argv = next(argv for block in fenced_blocks(guide, "bash") for argv in commands(block)
                if argv[:2] == ["composer", "train"])[1:]
    argv[argv.index("--out") + 1] = str(tmp_path / "run")
    code, _, stderr = run_here(argv, tmp_path, monkeypatch, capsys, COMPOSER_CACHE=str(tmp_path / "cache"))
    assert code == 0, stderr[-3000:]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["val_loss"] > 0 and summary["tokens"] > 0 and summary["tokens_per_s"] > 0


# -- the text itself -----------------------------------------------------------------------------------------------

DURATION = re.compile(r"\d+(?:\.\d+)? ?h(?:ours?)? \d+ min|\d+ min \d+ s|\d+(?:\.\d+)? (?:min(?:utes)?|hours?|h)\b")


def test_one_figure_per_fact():
    """README gives the default search's time once, and it is the latest timed report's (its raw JSON's wall time);
    every duration README gives is said the same way by the page it links in that paragraph, so a re-timed run
    cannot leave an old figure behind (README once said 24 min 37 s and 1 h 02 min for the same search)."""
    latest = sorted((ROOT / "benchmarks" / "results").glob("default_search_timed-*.json"))[-1]
    minutes, seconds = divmod(round(json.loads(latest.read_text())["wall_seconds"]), 60)
    figure = f"{minutes} min {seconds} s"
    text = re.sub(r"```.*?```", "", README.read_text(), flags=re.S)  # a sample's own times are not claims
    assert figure in text, f"README does not give the timed default search's {figure} ({latest.name})"
    for paragraph in text.split("\n\n"):
        for found in DURATION.findall(paragraph):
            links = re.findall(r"\]\(([^)#]+)", paragraph)
            assert links, f"README's {found!r} links no page that says it"
            assert found in (ROOT / links[0]).read_text(), f"README says {found!r}, {links[0]} does not"
    assert len(DURATION.findall(text)) == len(set(DURATION.findall(text))), "a duration is given twice"
