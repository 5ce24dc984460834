"""The parser of every ``composer`` command: usage errors in one line, flags spelt out in full, and each option
recorded as it was given, so that one option given two values on a command line is refused, not settled by position.

Why (issue 69): argparse accepts any unambiguous prefix of a flag, so ``--wid demo-4m`` reached the hidden old
spelling ``--widths`` without either spelling being typed, and the refusal of an old and a new spelling given
different values, which scanned the command line for exact tokens, let ``composer search --preset tiny --wid
demo-4m`` train at demo-4m; that scan also read the token after a switch as its value. And argparse keeps the last
of a repeated flag without a word (``--preset tiny --preset demo-4m``). Here abbreviations are off on every parser,
every option the parser takes is recorded on the namespace (its action, the spelling typed, the value it set) and
:func:`refuse_conflicts` reads that record, not the command line."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from composer.cli.format import RenamedFlag
from composer.errors import ConfigError

GIVEN = "_given_options"  # the namespace attribute holding the record (a subcommand's namespace is copied whole)
# actions that gather every occurrence (--include-path A --include-path B): repeating them is their use
GATHERING = (argparse._AppendAction, argparse._AppendConstAction, argparse._CountAction)
_RECORDING: dict[type, type] = {}  # an action class -> its recording subclass


@dataclass(frozen=True)
class Given:
    """One option as the parser took it: ``flag`` as typed, ``value`` what it set (a switch's constant included)."""

    action: argparse.Action
    flag: str
    value: Any

    def __str__(self) -> str:
        if self.action.nargs == 0:
            return self.flag
        value = " ".join(map(str, self.value)) if isinstance(self.value, list) else self.value
        return f"{self.flag} {value}"


def _recording(cls: type[argparse.Action]) -> type[argparse.Action]:
    """``cls`` with a ``__call__`` that records what it set; the subclass keeps ``isinstance`` checks true."""
    if cls not in _RECORDING:
        def __call__(self, parser, namespace, values, option_string=None):
            cls.__call__(self, parser, namespace, values, option_string)
            if option_string is not None and self.dest != argparse.SUPPRESS:
                record = getattr(namespace, GIVEN, [])
                setattr(namespace, GIVEN, [*record, Given(self, option_string, getattr(namespace, self.dest, None))])

        _RECORDING[cls] = type(cls.__name__, (cls,), {"__call__": __call__, "__module__": cls.__module__,
                                                 "__doc__": cls.__doc__, "recording": True})
    return _RECORDING[cls]


class CommandParser(argparse.ArgumentParser):
    """A command's parser: no abbreviated flags; usage errors in one line that names the command and where its
    options are listed, exit 2 (issue 61: argparse printed 18-38 usage lines first, and an unknown flag was reported
    by the top-level parser, naming no command); every option it takes recorded (:data:`GIVEN`).

    ``hints`` maps a flag the command does not have to a line that says what to do instead (``search --resume``)."""

    def __init__(self, *args, **kwargs):
        kwargs["allow_abbrev"] = False  # --wid is not --widths, on every command and subcommand
        super().__init__(*args, **kwargs)
        self.hints: dict[str, str] = {}

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} ({self.prog} --help lists the options)\n")

    def parse_known_args(self, args=None, namespace=None):
        # every option records itself, however it was added (a group's, a custom action class, a BooleanOptional)
        for action in self._actions:
            if action.option_strings and not getattr(action, "recording", False):
                action.__class__ = _recording(type(action))
        return super().parse_known_args(args, namespace)

    def refuse_unknown(self, unknown: Sequence[str]) -> None:
        """Exit 2 on words the command does not take, saying what to do where the first unknown flag has a hint or
        begins the command's own flags (an abbreviation, which no command accepts)."""
        flag = next((word.split("=", 1)[0] for word in unknown if word.startswith("--")), None)
        hint = self.hints.get(flag) or self._spelt_out(flag)
        self.error(f"unrecognized arguments: {' '.join(unknown)}" + (f"; {hint}" if hint else ""))

    def _spelt_out(self, flag: str | None) -> str | None:
        """``did you mean --depth-at-target or --deployed-at?`` for ``--dep``: the flags it begins, an old spelling
        named by its new flag."""
        if not flag or flag == "--":
            return None
        names = {}
        for action in self._actions:
            for option in action.option_strings:
                if option.startswith(flag) and option.startswith("--"):
                    if isinstance(action, RenamedFlag):
                        names["--" + action.new.replace("_", "-")] = None
                    elif action.help != argparse.SUPPRESS:
                        names[option] = None
        return f"flags are spelt out in full: did you mean {' or '.join(names)}?" if names else None


def refuse_conflicts(args: argparse.Namespace) -> None:
    """One option given two different values on the command line (a flag repeated, or an old spelling
    (:class:`~composer.cli.format.RenamedFlag`) beside the new one): a usage error naming both. The same value twice
    is one option, and a recipe holding both spellings is refused by its config."""
    by_option: dict[str, list[Given]] = {}
    for given in getattr(args, GIVEN, ()):
        if not isinstance(given.action, GATHERING):
            by_option.setdefault(given.action.dest, []).append(given)
    for options in by_option.values():
        if all(given.value == options[0].value for given in options):
            continue
        shown = " and ".join(map(str, options))
        old = next((given for given in options if isinstance(given.action, RenamedFlag)), None)
        if old is not None:
            new = "--" + old.action.new.replace("_", "-")
            raise ConfigError(f"{shown} set one option ({old.flag} is the old spelling of {new}) to different "
                              f"values: give {new} once")
        if len({given.flag for given in options}) == 1:
            raise ConfigError(f"{shown}: {options[0].flag} given twice with different values; give it once")
        raise ConfigError(f"{shown} set one option to different values: give one of them")


def given_options(args: argparse.Namespace) -> set[str]:
    """The options (destinations) the command line set, whatever their value: a recipe fills the others."""
    return {given.action.dest for given in getattr(args, GIVEN, ())}


def announce_old_spellings(args: argparse.Namespace) -> None:
    """The notice of each old spelling given ("--strategy is now --parallelism; the old spelling will go"), once the
    command line is accepted: a refused one is one line, not a notice and the error."""
    from composer.training.config import renamed_notice

    for given in getattr(args, GIVEN, ()):
        if isinstance(given.action, RenamedFlag):
            renamed_notice(given.flag.lstrip("-"), given.action.new, flag=True)


def seed_number(text: str) -> int:
    """``--seed`` on every command: an integer from 0 to ``LARGEST_SEED``, the range numpy's and Lightning's seeding
    take (a search given -1 died in a numpy traceback; generate and bench-inference took it)."""
    from composer.training.config import LARGEST_SEED, is_seed

    try:
        value = int(text)
    except ValueError:
        value = None
    if not is_seed(value):
        raise argparse.ArgumentTypeError(f"must be an integer from 0 to {LARGEST_SEED}, got {text!r}")
    return value


def layers_or_family(text: str) -> str:
    """``--depth-at-target``: a number of layers, 1 or more, or a family's name (checked where the depth is taken,
    ``search.growth.depth_at_target``); 0 or a negative number is refused here, naming the flag."""
    if text.strip().lstrip("+-").isdigit() and int(text) < 1:
        raise argparse.ArgumentTypeError(f"must be a number of layers, 1 or more (e.g. 16), or a family's name (e.g. "
                                         f"nemotron-h), got {text!r}")
    return text
