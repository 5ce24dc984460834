"""The fault suite: bad inputs, kills, damaged files and concurrent writers, tried where users meet them, counted.

Four kinds of fault, each measured by running the real thing:

* **bad inputs**: every command line in ``BAD_INPUTS`` (a wrong flag value, a missing file, a pattern that does not
  parse, a model directory of the wrong kind, ...) runs through ``composer``'s CLI in this process. Clean means
  exit status 2 and exactly one line on stderr naming the problem, no traceback;
* **kills**, **damaged files** and **concurrent writers**: the tests that kill a real process with SIGKILL (or
  SIGTERM where a scheduler would) and run the same command again, damage a file and read it, or run two writers
  on one store. They run under pytest here, each counted as survived (passed) or not. What each one checks is in
  ``FAULT_TESTS``: the result equals an unkilled run's, and nothing finished is done again.

    python benchmarks/fault_suite.py                      # everything (~15 min on 2 cores): docs/faults.md's table
    python benchmarks/fault_suite.py --only bad-inputs    # the bad-input rows only (~1 min)
    python -m pytest -q -n 2 --junitxml=junit.xml && python benchmarks/fault_suite.py --junit junit.xml
                                                          # the test rows counted from a full suite run

Writes ``fault_suite.json`` / ``.md`` under ``--out`` (default ``runs/fault-suite``) and prints the table.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from xml.etree import ElementTree

from report import finish

ROOT = Path(__file__).resolve().parents[1]

# (where, argv); {tmp} is a scratch directory holding: model/ (a Composer model directory), run/ (a run directory
# with model/ inside), hf/ (a transformers-style directory without weights), empty/, and notes.txt
BAD_INPUTS: list[tuple[str, list[str]]] = [
    ("train", ["train", "--arch", "(AX)x2", "--preset", "tiny", "--out", "{tmp}/o"]),
    ("train", ["train", "--arch", "(AM)x2", "--preset", "nope", "--out", "{tmp}/o"]),
    ("train", ["train", "--arch", "(AM)x2", "--preset", "tiny", "--tokens", "10", "--out", "{tmp}/o"]),
    ("train", ["train", "--arch", "(AM)x2", "--preset", "tiny", "--lr", "-1"]),
    ("train", ["train", "--arch", "(AM)x2", "--preset", "tiny", "--parallelism", "deepspeed"]),
    ("train", ["train", "--arch", "(AM)x2", "--preset", "tiny", "--data", "{tmp}/missing.txt", "--out", "{tmp}/o"]),
    ("train", ["train", "--arch", "(AM)x2", "--preset", "tiny", "--tokenizer", "{tmp}/empty", "--out", "{tmp}/o"]),
    ("train", ["train", "--recipe", "{tmp}/missing.yaml"]),
    ("train", ["train", "--init-from", "{tmp}/empty", "--tokens", "8192", "--out", "{tmp}/o"]),
    ("train", ["train", "--init-from", "{tmp}/run", "--tokens", "8192", "--out", "{tmp}/o"]),
    ("search", ["search", "--primitives", "AQ", "--trials", "2"]),
    ("search", ["search", "--layers", "0"]),
    ("search", ["search", "--budget", "huge"]),
    ("search", ["search", "--sampler", "annealing"]),
    ("search", ["search", "--evaluator", "nope:make"]),
    ("search", ["search", "--storage", "notaurl"]),
    ("search", ["search", "--strategy", "successive-halving", "--evaluator", "mad"]),
    ("aggregate", ["aggregate", "{tmp}/empty"]),
    ("aggregate", ["aggregate", "{tmp}/notes.txt"]),
    ("extrapolate", ["extrapolate", "AQAM", "--target", "demo-4m"]),
    ("extrapolate", ["extrapolate", "AMAM", "--target", "nope"]),
    ("transfer", ["transfer", "--from-search", "{tmp}/empty"]),
    ("transfer", ["transfer", "--patterns", "AM,AX", "--out", "{tmp}/t"]),
    ("pipeline", ["pipeline", "--recipe", "{tmp}/missing.yaml"]),
    ("pipeline", ["pipeline", "--recipe", "{tmp}/notes.txt"]),
    ("info", ["info", "AXM"]),
    ("info", ["info", "AMAM", "--preset", "nope"]),
    ("info", ["info", "samba", "--format", "megatron"]),
    ("info", ["info", "[A]M"]),
    ("families", ["families", "--preset", "nope"]),
    ("import", ["import", "{tmp}/empty", "--out", "{tmp}/i"]),
    ("import", ["import", "{tmp}/hf", "--out", "{tmp}/i"]),
    ("import", ["import", "{tmp}/model", "--out", "{tmp}/i"]),
    ("hybridize", ["hybridize", "--init-from", "{tmp}/model", "--arch", "AM", "--out", "{tmp}/h"]),
    ("hybridize", ["hybridize", "--init-from", "{tmp}/empty", "--arch", "AMAM", "--out", "{tmp}/h"]),
    ("hybridize", ["hybridize", "--init-from", "{tmp}/model", "--arch", "AMAM", "--search-placement", "--out",
                   "{tmp}/h"]),
    ("generate", ["generate", "--model", "{tmp}/run", "--prompt", "hi"]),
    ("generate", ["generate", "--model", "{tmp}/empty", "--prompt", "hi"]),
    ("generate", ["generate", "--model", "{tmp}/model", "--prompt", "hi", "--temperature", "-1"]),
    ("eval", ["eval", "--model", "{tmp}/empty", "--tasks", "arc_easy"]),
    ("eval", ["eval", "--model", "{tmp}/model", "--tasks", "arc_easy", "--limit", "0"]),
    ("export", ["export", "--model", "{tmp}/empty", "--out", "{tmp}/e"]),
    ("export", ["export", "--model", "{tmp}/model", "--out", "{tmp}/e", "--format", "gguf"]),
    ("bench-inference", ["bench-inference", "AMAM", "--preset", "nope"]),
    ("bench-inference", ["bench-inference", "--preset", "tiny", "--batch-sizes", "0"]),
]

# (kind, pytest node id, what it checks)
FAULT_TESTS: list[tuple[str, str, str]] = [
    ("kill", "tests/search/test_resume.py::test_kill_9_at_random_moments_then_resume_loses_nothing_and_repeats_nothing",
     "search: 4 random kill -9, then the same command: no pattern scored twice, nothing left running"),
    ("kill", "tests/search/test_resume.py::test_an_enqueued_trial_killed_before_it_suggested_is_retried_with_its_pattern_and_attributes",
     "search: a known layout killed before it started is retried with its pattern"),
    ("kill", "tests/search/test_fidelity.py::test_a_search_killed_in_its_last_rung_resumes_without_retraining_a_finished_rung",
     "successive halving: kill -9 after rung 0, in the last rung; rung 0 not retrained, the same answer"),
    ("kill", "tests/composer/experiments/test_placement_search.py::test_hybridize_search_ranks_every_placement_and_distils_the_best",
     "hybridize --search: kill -9 in the supernet and in placement scoring; the same ranking, nothing rescored"),
    ("kill", "tests/composer/hybridize/test_student.py::test_a_killed_hybridize_resumes_and_keeps_the_frozen_weights",
     "hybridize: SIGTERM mid-distillation, --resume; frozen weights unchanged"),
    ("kill", "tests/composer/experiments/test_pipeline.py::test_cpu_demo_pipeline_runs_end_to_end_with_seeds_and_resumes",
     "pipeline: kill -9 in the learning-rate sweep; no finished point retrained, the same comparison"),
    ("kill", "tests/composer/experiments/test_transfer.py::test_transfer_trains_each_pattern_once_per_seed_and_resumes_after_a_kill",
     "transfer: killed, then resumed; each (pattern, seed) trained once"),
    ("kill", "tests/composer/training/test_train.py::test_sigterm_saves_the_step_just_finished_and_resume_completes",
     "train: SIGTERM saves a checkpoint, exits 143, --resume continues"),
    ("damaged", "tests/composer/cli/test_damaged_models.py",
     "truncated/garbage safetensors, configs without a field or not JSON, a missing shard, a broken tokenizer"),
    ("damaged", "tests/composer/training/test_train.py::test_resume_falls_back_past_a_corrupt_newest_checkpoint_and_keeps_it",
     "a corrupt newest checkpoint: resume falls back to the one before"),
    ("damaged", "tests/composer/test_files.py", "atomic writes: a killed writer leaves the old file or none"),
    ("concurrent", "tests/search/test_engine.py::test_two_workers_share_one_storage",
     "two search workers on one Optuna storage: no pattern evaluated twice"),
    ("concurrent", "tests/composer/training/test_runlock.py", "two runs on one --out: the second is refused with one line"),
]


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=["bad-inputs", "tests"], help="run one half of the suite")
    parser.add_argument("--out", default="runs/fault-suite", help="where fault_suite.json/.md go")
    parser.add_argument("--junit", type=Path, help="count the tests from this full-suite report (pytest "
                        "--junitxml=FILE) instead of running them again")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    return parser.parse_args(argv)


def scratch(tmp: Path) -> None:
    """The files the bad inputs point at: a tiny Composer model directory, a run directory around it, a
    transformers-looking directory without weights, an empty directory and a text file."""
    import torch

    from composer.interop.model_dir import export_weights
    from composer.model import build_model
    from composer.presets import resolve_architecture

    arch, _ = resolve_architecture("(AM)x2", "tiny", "tiny")
    torch.manual_seed(0)
    export_weights(build_model(arch).state_dict(), arch, tmp / "model")
    export_weights(build_model(arch).state_dict(), arch, tmp / "run" / "model")
    (tmp / "hf").mkdir()
    (tmp / "hf" / "config.json").write_text(json.dumps({"model_type": "llama", "hidden_size": 32}))
    (tmp / "empty").mkdir()
    (tmp / "notes.txt").write_text("not a recipe, a study or a leaderboard\n")


def try_bad_input(argv: list[str]) -> dict:
    """Run one command line in this process; clean = exit 2 and one error line, no traceback."""
    from composer.cli import main

    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = main(argv)
        except SystemExit as exit_:
            code = exit_.code
        except Exception as raised:  # noqa: BLE001 - a traceback is exactly what this counts
            code, err = "raised", io.StringIO(f"Traceback: {type(raised).__name__}: {raised}")
    text = err.getvalue()
    lines = [line for line in text.splitlines() if "error" in line.lower() or "Traceback" in line]
    clean = code == 2 and len(lines) == 1 and "Traceback" not in text
    return {"argv": argv, "exit": code, "clean": clean, "message": lines[0] if lines else text.strip()[-300:]}


def bad_inputs(echo=print) -> dict:
    with tempfile.TemporaryDirectory() as directory:
        tmp = Path(directory)
        scratch(tmp)
        os.environ.setdefault("WANDB_MODE", "disabled")
        results = []
        for where, argv in BAD_INPUTS:
            result = {"command": where, **try_bad_input([arg.replace("{tmp}", str(tmp)) for arg in argv])}
            result["argv"] = [arg.replace(str(tmp), "{tmp}") for arg in result["argv"]]
            result["message"] = result["message"].replace(str(tmp), "{tmp}")
            results.append(result)
            echo(f"   {'clean' if result['clean'] else 'NOT CLEAN'}  exit {result['exit']}  {' '.join(result['argv'])}")
    return {"tried": len(results), "clean": sum(r["clean"] for r in results), "cases": results}


def _matches(case: ElementTree.Element, node: str) -> bool:
    """Whether a JUnit ``testcase`` is (a parametrization of) the pytest node ``path[::name]``."""
    path, _, name = node.partition("::")
    module = path.removesuffix(".py").replace("/", ".")
    classname = case.get("classname", "")
    in_module = classname == module or classname.endswith("." + module.split(".")[-1])
    return in_module and (not name or case.get("name", "").split("[")[0] == name)


def _outcomes(cases) -> tuple[list[bool], float]:
    """(passed per case that ran, seconds) of JUnit ``testcase`` elements; skipped cases are left out."""
    run, seconds = [], 0.0
    for case in cases:
        tags = {child.tag for child in case}
        seconds += float(case.get("time", 0))
        if "skipped" not in tags:
            run.append("failure" not in tags and "error" not in tags)
    return run, seconds


def fault_tests(junit: Path | None = None, echo=print) -> list[dict]:
    """Every FAULT_TESTS entry, counted from JUnit XML (cases passed / run): ``junit``, the report of a full
    suite run (``pytest --junitxml``) when given, else each entry run under pytest here."""
    rows = []
    suite = list(ElementTree.parse(junit).getroot().iter("testcase")) if junit is not None else None
    for kind, node, what in FAULT_TESTS:
        if suite is not None:
            run, seconds = _outcomes([case for case in suite if _matches(case, node)])
        else:
            with tempfile.TemporaryDirectory() as directory:
                report = Path(directory) / "junit.xml"
                subprocess.run([sys.executable, "-m", "pytest", "-q", node, f"--junitxml={report}", "-p",
                                "no:cacheprovider"], cwd=ROOT, capture_output=True, text=True, check=False)
                run, seconds = _outcomes(ElementTree.parse(report).getroot().iter("testcase")
                                         if report.is_file() else [])
        row = {"kind": kind, "test": node, "checks": what, "cases": len(run), "survived": sum(run),
               "seconds": round(seconds, 1)}
        rows.append(row)
        echo(f"   {kind:10s} {row['survived']}/{row['cases']}  {seconds:5.0f}s  {what}")
    return rows


def summary_table(report: dict) -> str:
    lines = ["| fault | tried | clean / survived | anything lost or redone |", "|---|---|---|---|"]
    if "bad_inputs" in report:
        bad = report["bad_inputs"]
        commands = len({case["command"] for case in bad["cases"]})
        lines.append(f"| bad inputs ({commands} commands) | {bad['tried']} | {bad['clean']} | "
                     f"{'none' if bad['clean'] == bad['tried'] else 'see the cases below'} |")
    for kind, label in (("kill", "kills (kill -9 / SIGTERM, then the same command)"),
                        ("damaged", "damaged files"), ("concurrent", "concurrent writers")):
        rows = [row for row in report.get("tests", []) if row["kind"] == kind]
        if rows:
            cases, survived = sum(r["cases"] for r in rows), sum(r["survived"] for r in rows)
            lines.append(f"| {label} | {cases} | {survived} | {'none' if cases == survived else 'see below'} |")
    lines += ["", "| kind | test | cases | survived | s | what it checks |", "|---|---|---|---|---|---|"]
    for row in report.get("tests", []):
        lines.append(f"| {row['kind']} | `{row['test'].split('::')[-1]}` | {row['cases']} | {row['survived']} | "
                     f"{row['seconds']:.0f} | {row['checks']} |")
    unclean = [case for case in report.get("bad_inputs", {}).get("cases", []) if not case["clean"]]
    if unclean:
        lines += ["", "Bad inputs that were not one clean line:", ""]
        lines += [f"- `composer {' '.join(case['argv'])}`: exit {case['exit']}, {case['message']}" for case in unclean]
    return "\n".join(lines)


def main(argv=None) -> int:
    args = parse_args(argv)
    sys.path.insert(0, str(ROOT))
    report: dict = {"date": time.strftime("%Y-%m-%d"), "command": "python benchmarks/fault_suite.py"
                    + (f" --only {args.only}" if args.only else "")}
    if args.only in (None, "bad-inputs"):
        print(f"== bad inputs: {len(BAD_INPUTS)} command lines")
        report["bad_inputs"] = bad_inputs()
    if args.only in (None, "tests"):
        print(f"== kills, damaged files, concurrent writers: {len(FAULT_TESTS)} tests")
        report["tests"] = fault_tests(args.junit)
        if args.junit is not None:
            report["tests_from"] = f"the full suite's JUnit report ({args.junit.name})"
    return finish(args.out, "fault_suite", report, summary_table(report), as_json=args.json)


if __name__ == "__main__":
    sys.exit(main())
