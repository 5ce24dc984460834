"""Usage errors come from the command's own parser, in one line that names the command and where its options are
listed, exit 2 (issue 61): an unknown flag was reported by the top-level parser (``usage: composer ... COMMAND``),
and a mistyped number printed 18-38 usage lines before the error."""

from __future__ import annotations

import argparse

import pytest

from composer.cli import build_parser, main


def commands() -> dict[str, argparse.ArgumentParser]:
    subparsers = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(subparsers.choices)


def typed_flags() -> list[tuple[str, str]]:
    """(command, flag) for every option of every command that takes a number."""
    return [(name, action.option_strings[-1]) for name, parser in commands().items() for action in parser._actions
            if action.option_strings and action.type in (int, float) and action.help != argparse.SUPPRESS]


def one_line(capsys, code: int, command: str) -> str:
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert err.count("\n") == 0 and err.startswith(f"composer {command}: error: "), err
    assert f"composer {command} --help lists the options" in err, err
    return err


@pytest.mark.parametrize("command", sorted(commands()))
def test_an_unknown_flag_is_one_line_from_the_commands_parser(command, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as stopped:
        main([command, "--no-such-flag", "1"])
    err = one_line(capsys, stopped.value.code, command)
    assert "--no-such-flag" in err or "required" in err, err
    assert not list(tmp_path.iterdir()), "nothing was written"


@pytest.mark.parametrize("command, flag", typed_flags())
def test_a_mistyped_number_is_one_line_naming_the_flag(command, flag, capsys):
    with pytest.raises(SystemExit) as stopped:
        main([command, flag, "abc"])
    err = one_line(capsys, stopped.value.code, command)
    assert flag in err and "'abc'" in err, err


def test_typed_flags_are_found():
    assert ("train", "--tokens") in typed_flags() and ("search", "--trials") in typed_flags()
