"""The data preflight runs once per process for the same data (issue 69): a search trains each candidate through
``composer train``, whose preflight reloaded the tokenizer and tokenised a small local source again for every run."""

from __future__ import annotations

import pytest

from composer.data import checks
from composer.data.errors import DataError


def counting_loads(monkeypatch) -> list[str | None]:
    loads = []
    real = checks.load_tokenizer

    def load(name=None):
        loads.append(name)
        return real(name)

    monkeypatch.setattr(checks, "load_tokenizer", load)
    return loads


def test_a_passed_check_is_not_repeated_until_its_data_changes(tmp_path, monkeypatch):
    data = tmp_path / "small.txt"
    data.write_text("one short document\n\nand another one")
    loads = counting_loads(monkeypatch)
    tokenized = []
    real_count = checks.check_enough_text
    monkeypatch.setattr(checks, "check_enough_text", lambda *args, **kw: (tokenized.append(1), real_count(*args, **kw)))
    for _ in range(3):  # a search's runs, each through composer train's preflight
        checks.check_data(str(data), "text", "bytes", seq_len=8)
    assert (len(loads), len(tokenized)) == (1, 1)
    checks.check_data(str(data), "text", "bytes", seq_len=16)  # another question of the same data: asked
    assert (len(loads), len(tokenized)) == (2, 2)
    data.write_text("short")  # the file changed: checked again, and now it is too small
    with pytest.raises(DataError, match="fewer than one sequence"):
        checks.check_data(str(data), "text", "bytes", seq_len=8)
    assert len(tokenized) == 3


def test_a_failed_check_is_not_remembered(tmp_path, monkeypatch):
    data = tmp_path / "tiny.txt"
    data.write_text("ab")
    loads = counting_loads(monkeypatch)
    for _ in range(2):
        with pytest.raises(DataError):
            checks.check_data(str(data), "text", "bytes", seq_len=64)
    assert len(loads) == 2
