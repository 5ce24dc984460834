"""How the docs-figure tests read a report and its JSON (issue 29): the docs' headline figures, recomputed from
the results JSON each doc cites.

Every figure those tests check is read out of a report's Markdown (``docs/reports/<study>.md``: a table row or a
sentence found by a stable anchor: :func:`section`, :func:`table`, :func:`find`) and compared, at the precision
the doc prints (:func:`agree`), with the same figure taken from ``benchmarks/results/*.json``: recomputed with
the project's own statistics (``composer.statistics``, with the bootstrap seed and replicate count the benchmark
used: ``N_BOOT``, ``BOOT_SEED``) where the doc derives it, read where the JSON stores it. Where both exist the
test also checks that the recomputation reproduces the stored value (:func:`reproduced`). So a figure edited in
a doc, or a JSON re-measured without its doc, turns that report's test red.

One test module per report, or per family of reports, sits beside this one; no training and no torch: numpy
and scipy over a few JSON files (well under a second of bootstrap in all).
"""

from __future__ import annotations

import functools
import json
import math
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"

# The bootstrap every benchmark and `composer transfer` ran: composer.statistics's defaults, 10,000 replicates
# at seed 0 (composer/transfer.py's TransferConfig.n_boot, benchmarks/hybridize_evidence.py's n_boot=10_000).
N_BOOT, BOOT_SEED = 10_000, 0

# A printed number: optional sign, thousands separated by commas or not, optional decimals. "0, 12" is two
# numbers, "1,024" one.
NUMBER = r"[+-]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?"
NUM = f"({NUMBER})"


@functools.cache
def doc(name: str) -> str:
    return (ROOT / "docs" / name).read_text()


@functools.cache
def results(name: str) -> dict:
    return json.loads((RESULTS / name).read_text())


def section(text: str, heading: str) -> str:
    """The text of the Markdown section whose heading line starts with ``heading``, up to the next heading of
    the same or a higher level (a ``# comment`` in a fenced code block is not a heading)."""
    lines, fenced, start, level = text.splitlines(keepends=True), False, None, 0
    for i, line in enumerate(lines):
        if line.startswith("```"):
            fenced = not fenced
            continue
        hashes = len(line) - len(line.lstrip("#"))
        if fenced or not hashes or line[hashes:hashes + 1] != " ":
            continue
        if start is None and line[hashes + 1:].startswith(heading):
            start, level = i, hashes
        elif start is not None and hashes <= level:
            return "".join(lines[start:i])
    assert start is not None, f"heading {heading!r} not found"
    return "".join(lines[start:])


def table(text: str, header: str) -> list[list[str]]:
    """The body rows (cells, stripped) of the Markdown table whose header line starts with ``header``."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith(header)), None)
    assert start is not None, f"table with header {header!r} not found"
    rows = []
    for line in lines[start + 2:]:  # skip the header and its |---| line
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    assert rows, f"table {header!r} has no rows"
    return rows


def plain(cell: str) -> str:
    """A cell without Markdown emphasis or code spans' backticks."""
    return cell.replace("**", "").replace("`", "").strip()


def numbers(cell: str) -> list[str]:
    """The numbers printed in a cell, as printed; code spans (layouts such as ``(AM)x9``) are skipped."""
    return re.findall(NUMBER, re.sub(r"`[^`]*`", "", cell.replace("**", "")))


def find(text: str, pattern: str) -> re.Match:
    """The first match of ``pattern`` in ``text``, where a space in ``pattern`` matches any run of whitespace
    (prose is wrapped); use ``NUM`` for a printed number."""
    match = re.search(pattern.replace("\\ ", " ").replace(" ", r"\s+"), text)
    assert match, f"anchor {pattern!r} not found in the doc"
    return match


def agree(printed: str, value: float, what: str) -> None:
    """``printed`` (a doc figure) is ``value`` (from the JSON) rounded to the decimals the doc shows."""
    text = printed.replace(",", "").replace("**", "").strip()
    decimals = len(text.split(".")[1]) if "." in text else 0
    shown = f"{value:.{decimals}f}"
    assert float(text) == float(shown), f"{what}: the doc prints {printed}, the JSON gives {value!r} ({shown})"


def agree_all(printed: list[str], values: list[float], what: str) -> None:
    assert len(printed) == len(values), f"{what}: the doc prints {printed}, the JSON has {len(values)} values"
    for text, value in zip(printed, values, strict=True):
        agree(text, value, what)


def reproduced(stored, recomputed, what: str) -> None:
    """A value the JSON stores equals its recomputation from the JSON's raw values (numbers or lists of them)."""
    pairs = zip(stored, recomputed, strict=True) if isinstance(stored, list) else [(stored, recomputed)]
    assert all(math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12) for a, b in pairs), \
        f"{what}: the JSON stores {stored!r}, its own raw values give {recomputed!r}"


def per_seed(losses: dict, seeds) -> dict[int, float]:
    return {int(s): losses[str(s)] for s in seeds}


def agree_interval(cell: str, value: float, ci: list[float], what: str) -> None:
    """A cell printed as ``+0.107 [+0.081, +0.132]``: the figure and its interval, each as the doc rounds it."""
    agree_all(numbers(cell), [value, *ci], what)
