"""What a calibration result records about itself: where it is written (``benchmarks/results``), the command
that wrote it, and paths as the repository sees them, so that a results file or the table names its source in a
form that reads the same on every clone.
"""

from __future__ import annotations

import datetime
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]  # the repository: composer/costmodel/calibration/ is three below
RESULTS = ROOT / "benchmarks" / "results"


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def today() -> str:
    return datetime.date.today().isoformat()


def shown(path: Path | str) -> str:
    """``path`` relative to the repository when inside it (what a results file or the table records)."""
    path = Path(path).resolve()
    return os.path.relpath(path, ROOT) if path.is_relative_to(ROOT) else str(path)


def command_line(argv: list[str] | None) -> str:
    return "python benchmarks/cost_model.py " + " ".join(sys.argv[1:] if argv is None else argv)
