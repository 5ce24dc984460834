from __future__ import annotations

import json

import optuna
import pytest
from optuna.trial import TrialState, create_trial

from composer.cli import build_parser, main

ROWS = [("AAMMMM", 0.95), ("AAMMAM", 0.93), ("AMAMMM", 0.92), ("AAAMMM", 0.91), ("MAMMAM", 0.70),
        ("AMMAAM", 0.68), ("MMAAMM", 0.50), ("MMMAAA", 0.48), ("MMMMAA", 0.20), ("MAMAMA", 0.05)]


@pytest.fixture
def search_dir(tmp_path):
    """A search output directory as `composer search` leaves it (leaderboard and best.json; no study.db)."""
    out = tmp_path / "search"
    out.mkdir()
    rows = [{"rank": i + 1, "pattern": p, "score": s, "trial": 10 + i} for i, (p, s) in enumerate(ROWS)]
    (out / "leaderboard.json").write_text(json.dumps(rows))
    (out / "best.json").write_text(json.dumps({**rows[0], "study": "toy", "direction": "maximize"}))
    return out


def run_json(capsys, *argv):
    assert main(["aggregate", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_human_output_prints_the_pattern_and_its_members(search_dir, capsys):
    assert main(["aggregate", "--out", str(search_dir)]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split() == ["aggregated", "AAMMMM", "(AA4M)"]
    assert "N_0 vote over the top cluster: 4 of 10 scored patterns" in out
    assert "tie broken by layer 2: mean score" in out  # M (0.95, 0.93) against A (0.92, 0.91)
    table = out[out.index("#  member"):].splitlines()
    assert [line.split()[1] for line in table[1:5]] == ["AAMMMM", "AAMMAM", "AMAMMM", "AAAMMM"]
    assert table[2].split()[-1] == "11"  # trial numbers of each member
    assert f"wrote {search_dir / 'aggregate.json'}" in out


def test_json_is_one_object_and_matches_aggregate_json(search_dir, capsys):
    data = run_json(capsys, str(search_dir / "leaderboard.json"), "--c", "all", "--clusters", "3")
    assert data["pattern"] == "AAMMMM" and data["c"] == "all" and data["k"] == 3
    assert data["written"] == str(search_dir / "aggregate.json")
    saved = json.loads((search_dir / "aggregate.json").read_text())
    assert saved == {key: value for key, value in data.items() if key != "written"}
    assert {"members", "clusters", "top_cluster", "layers", "best", "score", "source"} <= set(data)


def test_storage_and_study_write_to_out(tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'db' / 'study.db'}"
    (tmp_path / "db").mkdir()
    study = optuna.create_study(storage=url, study_name="s", direction="minimize")
    for pattern, loss in [("AM", 2.7), ("MA", 2.72), ("MM", 3.5)]:
        study.add_trial(create_trial(value=loss, user_attrs={"pattern": pattern}))
    optuna.create_study(storage=url, study_name="other")
    data = run_json(capsys, "--storage", url, "--study", "s", "--clusters", "2", "--out", str(tmp_path / "agg"))
    assert data["direction"] == "minimize" and [m["pattern"] for m in data["members"]] == ["AM", "MA"]
    assert (tmp_path / "agg" / "aggregate.json").exists()


def empty_study(tmp_path):
    url = f"sqlite:///{tmp_path / 'study.db'}"
    optuna.create_study(storage=url, study_name="empty")
    return url


def failed_study(tmp_path):
    url = f"sqlite:///{tmp_path / 'study.db'}"
    study = optuna.create_study(storage=url, study_name="failed", direction="maximize")
    study.add_trial(create_trial(state=TrialState.FAIL, user_attrs={"pattern": "AM", "fail_reason": "boom"}))
    study.add_trial(create_trial(value=0.5, user_attrs={"pattern": "MA", "skip_reason": "too big"}))
    return url


@pytest.mark.parametrize(
    "make, argv, message",
    [
        (None, ["{tmp}/missing"], "no such file or directory"),
        (None, ["--out", "{tmp}"], "holds no search results"),
        (empty_study, ["{source}"], "study 'empty' in sqlite:///"),
        (failed_study, ["{source}"], "no completed, scored trials (2 trial(s): {'failed': 1, 'skipped': 1})"),
        (None, ["{tmp}", "--c", "x"], "--c must be a non-negative integer or 'all'"),
        (None, ["{tmp}", "--storage", "sqlite:///x.db"], "either SOURCE or --storage"),
        (empty_study, ["{source}", "--clusters", "0"], "--clusters (k) must be a positive integer"),
    ],
)
def test_errors_are_one_line_exit_2(tmp_path, capsys, make, argv, message):
    source = make(tmp_path) if make else ""
    argv = [arg.format(tmp=tmp_path, source=source) for arg in argv]
    assert main(["aggregate", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err
    assert not (tmp_path / "aggregate.json").exists()


def test_default_source_is_the_search_default_out(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["aggregate"]) == 2
    assert "no such file or directory: runs/search" in capsys.readouterr().err


def test_help_lists_aggregate():
    assert "aggregate" in build_parser().format_help()
