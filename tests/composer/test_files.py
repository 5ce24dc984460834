"""Atomic writes: the file is whole or unchanged, and no temporary file is left behind."""

from __future__ import annotations

import csv
import json

import pytest

from composer.files import atomic_write_csv, atomic_write_json, atomic_write_text


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
