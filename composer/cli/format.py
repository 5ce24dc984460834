"""Small helpers shared by the subcommands' human-readable output."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from composer.errors import ConfigError


def human(n: float, unit: str = "") -> str:
    """``1235814400`` -> ``"1.24B"``; ``4096`` bytes -> ``"4.0 KiB"`` when ``unit == "B"``."""
    if unit == "B":
        from composer.accounting import format_bytes

        return format_bytes(n)
    for suffix, scale in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:.2f}{suffix}"
    return f"{n:g}"


def print_json(data: Any) -> None:
    json.dump(data, sys.stdout, indent=2)
    sys.stdout.write("\n")


def print_rows(rows: list[tuple[str, str]]) -> None:
    width = max(len(label) for label, _ in rows)
    for label, value in rows:
        print(f"{label:<{width}}  {value}")


def print_table(header: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows)]
    for row in [header, *rows]:
        print("  ".join(str(cell).ljust(w) for cell, w in zip(row, widths)).rstrip())


def is_main_process() -> bool:
    """False in the extra processes a multi-device run starts (Lightning's launcher sets their ``RANK`` /
    ``LOCAL_RANK``): only the main process prints a command's result."""
    import os

    return int(os.environ.get("RANK", os.environ.get("LOCAL_RANK", "0")) or 0) == 0


class RenamedFlag(argparse.Action):
    """An old flag spelling kept for a while (issue 49): sets the new flag's ``dest`` and prints a one-line notice
    ("--strategy is now --parallelism; the old spelling will go"). Add it with ``help=argparse.SUPPRESS``; ``new``
    names the new flag where it is not its ``dest`` (search's ``--preset`` sets the field ``widths``)."""

    def __init__(self, option_strings, dest, new: str | None = None, **kwargs):
        super().__init__(option_strings, dest, **kwargs)
        self.new = new or dest

    def __call__(self, parser, namespace, values, option_string=None):
        from composer.training.config import renamed_notice

        renamed_notice(option_string.lstrip("-"), self.new, flag=True)
        setattr(namespace, self.dest, self.const if self.nargs == 0 else values)  # nargs 0: a switch's old name
        # refuse_two_spellings reads these once the command line is parsed: the new spelling may come later
        given = getattr(namespace, "_renamed_flags", [])
        setattr(namespace, "_renamed_flags", [*given, (option_string, "--" + self.new.replace("_", "-"))])


def old_spelling(parser: argparse.ArgumentParser, old: str, new: argparse.Action) -> argparse.Action:
    """Keep ``old`` working as a hidden :class:`RenamedFlag` of the flag ``new`` (the action ``add_argument``
    returned), with its type and choices: one name per meaning (docs/usage/vocabulary.md) without breaking a
    command line or script written with the old name."""
    switch = {"nargs": 0, "const": new.const} if new.nargs == 0 else {"type": new.type, "choices": new.choices}
    return parser.add_argument(old, dest=new.dest, new=new.option_strings[0].lstrip("-"), action=RenamedFlag,
                               default=argparse.SUPPRESS, help=argparse.SUPPRESS, **switch)


def _values_given(argv: Sequence[str], flag: str) -> list[str]:
    """The values ``flag`` was given on ``argv`` (``--flag V`` or ``--flag=V``), as typed."""
    found = []
    for i, token in enumerate(argv):
        if token == flag and i + 1 < len(argv):
            found.append(argv[i + 1])
        elif token.startswith(flag + "="):
            found.append(token.split("=", 1)[1])
    return found


def refuse_two_spellings(args: argparse.Namespace, argv: Sequence[str]) -> None:
    """An old spelling (:class:`RenamedFlag`) and the new one given different values: a usage error naming both.
    Why: argparse keeps whichever came last, so ``--preset tiny --widths demo-4m`` silently trained at demo-4m (issue
    60); a recipe holding both spellings is refused already, and the command line now is too."""
    for old, new in getattr(args, "_renamed_flags", ()):
        given = {flag: _values_given(argv, flag) for flag in (old, new)}
        if given[new] and len(set(given[old] + given[new])) > 1:
            shown = " and ".join(f"{flag} {value}" for flag, values in given.items() for value in values)
            raise ConfigError(f"{shown} set one option ({old} is the old spelling of {new}) to different values: "
                              f"give {new} once")


def resolve_spec(spec: str, preset: str | None, default_preset: str, notes: list[str] | None = None):
    """:func:`composer.presets.resolve_architecture` for a command's SPEC and ``--preset``, printing on stderr the
    preset it used where the command chose it (a pattern or family without ``--preset``; issue 49), or adding the
    line to ``notes`` for a command that prints it once its other checks passed (so a refusal stays one line)."""
    from composer.presets import PRESETS, default_preset_note, resolve_architecture

    arch, widths = resolve_architecture(spec, preset, default_preset)
    if preset is None and spec not in PRESETS:
        note = default_preset_note(widths, f"the widths of {spec}")
        if notes is None:
            print(note, file=sys.stderr)
        else:
            notes.append(note)
    return arch, widths
