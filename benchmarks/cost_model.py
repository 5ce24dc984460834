"""Fit and validate the cost model: ``python benchmarks/cost_model.py fit|validate|loo [--help]``.

The entry point only. The calibration is ``composer/costmodel/calibration/``, a room of its own beside the cost
model, which never imports it: ``cli.py`` lists the commands (and benchmarks/README.md), ``cpu_fit.py``,
``validate.py`` and ``leave_one_out.py`` say what each measures.
"""

from __future__ import annotations

import sys
from pathlib import Path

# Plain script, not a package: make the repository root importable when run as ``python benchmarks/...``.
_ROOT = Path(__file__).resolve().parent.parent
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

from composer.costmodel.calibration.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
