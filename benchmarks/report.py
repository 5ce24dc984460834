"""The tail every benchmark ends with: its report written in every form under ``--out``, then printed.

A benchmark script imports it as ``from report import finish`` (Python puts the script's folder first on
``sys.path``; tests/benchmarks' ``load_benchmark`` does the same).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from composer.files import make_output_dir, write_outputs


def finish(
    out: str | Path,
    stem: str,
    report: Any,
    table: str,
    *,
    as_json: bool = False,
    plot: Callable[[Any, Path], Any] | None = None,
    rows: tuple[list[dict[str, Any]], Sequence[str]] | None = None,
) -> int:
    """Write ``stem.json``, ``stem.md`` (``table``) and, given them, ``stem.png`` (``plot``) and ``stem.csv``
    (``rows``) under ``out`` (``composer.files.write_outputs``); print the table, or the report as one JSON object
    with ``as_json`` (``--json``); say on stderr where the files are. Returns 0, the script's exit status."""
    out = make_output_dir(out)
    write_outputs(out, stem, report, table=table, rows=rows, plot=plot)
    print(json.dumps(report, indent=2) if as_json else table)
    forms = ["json", "md"] + (["csv"] if rows is not None else []) + (["png"] if plot is not None else [])
    print(f"\n{stem}.{{{','.join(forms)}}} in {out}", file=sys.stderr)
    return 0
