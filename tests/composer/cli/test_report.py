"""``composer report DIR`` (issue 49): a finished search's studies, rankings, answer and plots, read back from its
--out without re-running it, in the time the interpreter takes to start."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

from composer.cli import build_parser, main


def test_report_prints_the_studies_rankings_answer_and_plots(finished_search, capsys):
    assert main(["report", str(finished_search)]) == 0
    text = capsys.readouterr().out
    best = json.loads((finished_search / "best.json").read_text())
    rungs = json.loads((finished_search / "rungs.json").read_text())
    for rung in rungs:  # every study of the storage, each rung's ranking
        assert rung["study"] in text
        assert all(row["pattern"] in text for row in rung["leaderboard"])
    assert f"rung 0: {rungs[0]['candidates']} candidates at rung-smoke-0" in text
    assert "promoted: " + ", ".join(rungs[1]["promoted"]) in text
    assert f"leaderboard of study {best['study']}, the answer's ranking:" in text
    assert f"answer: {best['vs_known']['verdict']}" in text and best["answer"] == "new"
    assert f"recommended {best['recommended']}" in text and "over seed(s) 0, 1, 2" in text
    assert "confirmation (3 seeds each" in text
    plots = sorted(finished_search.glob("*.png"))
    assert plots and "plots: " + ", ".join(map(str, plots)) in text
    assert f"optuna-dashboard sqlite:///{finished_search.resolve() / 'study.db'}" in text
    assert "attention_at_target keep" in text


def test_report_json_counts_what_the_storage_holds(finished_search, capsys):
    """The JSON report's studies and trial counts are those Optuna itself reads from the search's storage (not
    the files the report read), its answer the one the text report prints, its plots those on disk."""
    import optuna

    assert main(["report", str(finished_search), "--json"]) == 0
    [search] = json.loads(capsys.readouterr().out)["searches"]
    storage = f"sqlite:///{finished_search.resolve() / 'study.db'}"
    assert search["storage"] == storage and search["finished"]
    counted = {}
    for summary in optuna.get_all_study_summaries(storage):
        trials = optuna.load_study(study_name=summary.study_name, storage=storage).trials
        counted[summary.study_name] = {state.name.lower(): sum(t.state == state for t in trials)
                                       for state in {t.state for t in trials}}
    assert {study["study"]: study["trials"] for study in search["studies"]} == counted
    assert {rung["study"] for rung in search["rungs"]} <= set(counted)
    assert search["best"]["study"] in counted and search["best"]["recommended"] == search["leaderboard"][0]["pattern"]
    assert search["plots"] == [str(path) for path in sorted(finished_search.glob("*.png"))] != []
    assert search["config"]["attention_at_target"] == "keep"
    assert main(["report", str(finished_search)]) == 0
    assert f"recommended {search['best']['recommended']}" in capsys.readouterr().out


def test_a_folder_of_searches_reports_each(finished_search, tmp_path, capsys):
    runs = tmp_path / "runs"
    for name in ("first", "second"):
        shutil.copytree(finished_search, runs / name)
    (runs / "notes").mkdir()  # not a search: left out
    assert main(["report", str(runs), "--json"]) == 0
    outs = [search["out"] for search in json.loads(capsys.readouterr().out)["searches"]]
    assert outs == [str(runs / "first"), str(runs / "second")]


def test_an_unfinished_search_says_so(finished_search, tmp_path, capsys):
    out = tmp_path / "running"
    out.mkdir()
    shutil.copy(finished_search / "config.json", out / "config.json")
    shutil.copy(finished_search / "study.db", out / "study.db")
    assert main(["report", str(out)]) == 0
    text = capsys.readouterr().out
    assert "not finished: no best.json yet" in text and "-rung1" in text  # its studies are listed all the same


def test_not_a_search_is_one_line_exit_2(tmp_path, capsys):
    (tmp_path / "config.json").write_text(json.dumps({"train": {}, "arch": {}}))  # a composer train --out
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("not a search")
    for target, problem in ((tmp_path, "is a composer train run's --out"),
                            (tmp_path / "other", "is not the output of a composer search"),
                            (tmp_path / "missing", "does not exist"),
                            (tmp_path / "config.json", "is a file")):
        assert main(["report", str(target)]) == 2
        err = capsys.readouterr().err
        assert problem in err and "--out" in err and err.strip().count("\n") == 0, err


def test_help_points_at_optuna_dashboard():
    parser = build_parser()
    report = parser._subparsers._group_actions[0].choices["report"]
    assert "optuna-dashboard" in report.format_help()


def test_report_imports_no_training_machinery(finished_search):
    """What keeps it within seconds: it loads neither Lightning (the training engine: 5 s of start-up on 2 busy
    cores, which every composer command paid through the search's imports) nor the training run."""
    code = ("import sys, io, contextlib\nfrom composer.cli import main\n"
            f"with contextlib.redirect_stdout(io.StringIO()): main(['report', {str(finished_search)!r}])\n"
            "print(sorted(m for m in ('lightning', 'composer.training.run') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().splitlines()[-1] == "[]"
