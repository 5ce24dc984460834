"""Small helpers shared by the subcommands' human-readable output."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any


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
    """An old flag spelling kept for a while (issue 49): sets the new flag's ``dest``; once the command line is
    accepted a one-line notice follows ("--strategy is now --parallelism; the old spelling will go",
    ``composer.cli.parsing.announce_old_spellings``), and beside the new spelling with another value it is refused
    (``refuse_conflicts``). Add it with ``help=argparse.SUPPRESS``; ``new`` names the new flag where it is not its
    ``dest`` (search's ``--preset`` sets the field ``widths``)."""

    def __init__(self, option_strings, dest, new: str | None = None, **kwargs):
        super().__init__(option_strings, dest, **kwargs)
        self.new = new or dest

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, self.const if self.nargs == 0 else values)  # nargs 0: a switch's old name


def old_spelling(parser: argparse.ArgumentParser, old: str, new: argparse.Action) -> argparse.Action:
    """Keep ``old`` working as a hidden :class:`RenamedFlag` of the flag ``new`` (the action ``add_argument``
    returned), with its type and choices: one name per meaning (docs/usage/vocabulary.md) without breaking a
    command line or script written with the old name."""
    switch = {"nargs": 0, "const": new.const} if new.nargs == 0 else {"type": new.type, "choices": new.choices}
    return parser.add_argument(old, dest=new.dest, new=new.option_strings[0].lstrip("-"), action=RenamedFlag,
                               default=argparse.SUPPRESS, help=argparse.SUPPRESS, **switch)


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
