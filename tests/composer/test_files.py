"""Atomic writes: the file is whole or unchanged, and no temporary file is left behind."""

from __future__ import annotations

import csv
import json

import pytest

from composer.files import atomic_write_csv, atomic_write_json, atomic_write_text, write_outputs


def test_writes_replace_the_file_and_leave_no_temporary(tmp_path):
    path = tmp_path / "summary.json"
    atomic_write_json(path, {"val_loss": 2.5})
    atomic_write_json(path, {"val_loss": 2.0})
    assert json.loads(path.read_text()) == {"val_loss": 2.0}
    atomic_write_csv(tmp_path / "t.csv", [{"a": 1, "b": 2, "extra": 3}], ["a", "b"])
    assert list(csv.DictReader(open(tmp_path / "t.csv"))) == [{"a": "1", "b": "2"}]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["summary.json", "t.csv"]


def test_a_failed_write_keeps_the_previous_file(tmp_path):
    path = tmp_path / "best.json"
    atomic_write_text(path, "previous")
    with pytest.raises(TypeError):
        atomic_write_json(path, {"not serialisable": object()})
    assert path.read_text() == "previous"
    assert [p.name for p in tmp_path.iterdir()] == ["best.json"]


def test_write_outputs_writes_each_form_given_and_only_those(tmp_path):
    report = {"rows": [{"name": "a", "loss": 1.5}, {"name": "b", "loss": 2.0}]}
    drawn = []
    write_outputs(tmp_path, "result", report, rows=(report["rows"], ["name", "loss"]), table="| a | 1.5 |",
                  plot=lambda data, path: drawn.append((data, path)))
    assert json.loads((tmp_path / "result.json").read_text()) == report
    assert (tmp_path / "result.csv").read_text().splitlines() == ["name,loss", "a,1.5", "b,2.0"]
    assert (tmp_path / "result.md").read_text() == "| a | 1.5 |\n"
    assert drawn == [(report, tmp_path / "result.png")]

    write_outputs(tmp_path, "bare", report)
    assert (tmp_path / "bare.json").exists()
    assert not any((tmp_path / f"bare.{ext}").exists() for ext in ("csv", "md", "png"))


def test_update_json_changes_the_object_under_its_lock_and_starts_over_a_damaged_file(tmp_path):
    from composer.files import update_json

    path = tmp_path / "limit_cost.json"
    assert update_json(path, lambda data: {**data, "a": 1}) == {"a": 1}
    assert update_json(path, lambda data: {**data, "b": 2}) == {"a": 1, "b": 2}
    path.write_text("{half")
    assert update_json(path, lambda data: {**data, "c": 3}) == {"c": 3}
    assert json.loads(path.read_text()) == {"c": 3}
    assert sorted(p.name for p in tmp_path.iterdir()) == [".limit_cost.json.lock", "limit_cost.json"]
