"""Which patterns a finished search's last promotion would send on under other rules, without training.

The ``cpu`` ladder promotes to its last rung the best 3 of rung 1 by forecast at the target's tokens, then up to
3 more whose forecast could still be the best at ``z`` = 1 (``search.fidelity.promote``, ``could_be_best``), and
the best known layout. Each of those finalists costs the last rung a run or two of 500K tokens, about a third of
the default search's wall time in all: is the "could still be best" allowance buying anything? This resumes the
search in ``--search`` (every trial is stored, so nothing trains), records the rows and arguments of its last
promotion, and re-applies ``promote`` with the contenders' ``z`` at 0.5 and 0 (none), saying which patterns each
rule sends on and whether the search's best new pattern at the last rung is among them.

    python benchmarks/promotion_rules.py --search runs/default --json benchmarks/results/promotion_rules-DATE.json
    python benchmarks/promotion_rules.py --search runs/smoke --flags "--budget smoke --trials 3 --preset tiny"

``--flags``: the search's own flags besides ``--out``, exactly as it ran; other flags are another search, which
would start training in that directory.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import shlex
import sys
from pathlib import Path

_ROOT = Path(__file__).resolve().parent.parent
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

RULES = {"as searched": None, "contenders at z=0.5": 0.5, "no contenders (z=0)": 0.0}


def last_promotion(search: str, flags: list[str] = ()) -> tuple[list[dict], tuple, dict, list[dict]]:
    """The rows, arguments and result of the last ``promote`` a resumed run of ``search`` (``composer search
    --out search *flags``) makes."""
    import search.strategies.successive_halving as halving
    from composer.cli import main

    seen = []
    real = halving.promote

    def spy(rows, *args, **kwargs):
        chosen = real(rows, *args, **kwargs)
        seen.append((rows, args, kwargs, list(chosen)))  # the search sorts its list in place afterwards
        return chosen

    halving.promote = spy
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            code = main(["search", "--out", search, *flags])
    finally:
        halving.promote = real
    if code != 0 or not seen:
        raise SystemExit(f"promotion_rules: resuming {search} gave exit {code} and {len(seen)} promotion(s); "
                         "give a finished successive-halving search's --out")
    return seen[-1]


def under_rules(rows: list[dict], args: tuple, kwargs: dict) -> dict[str, list[str]]:
    """The patterns ``promote`` sends on under each of :data:`RULES` (None: the arguments the search used)."""
    from search.fidelity import promote

    return {name: [row["pattern"] for row in promote(rows, *args, **(kwargs if z is None else {**kwargs, "z": z}))]
            for name, z in RULES.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--search", required=True, help="a finished successive-halving search's --out")
    parser.add_argument("--flags", default="", help="the search's flags besides --out, as it ran (default none)")
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args(argv)
    rows, promote_args, kwargs, chosen = last_promotion(args.search, shlex.split(args.flags))
    rungs = json.loads((Path(args.search) / "rungs.json").read_text())
    last = rungs[-1]["leaderboard"]
    best_new = next((row["pattern"] for row in last if not row.get("known")), None)
    rules = under_rules(rows, promote_args, kwargs)
    result = {
        "benchmark": "promotion_rules", "command": " ".join(sys.argv), "search": args.search, "flags": args.flags,
        "rows": [{k: row.get(k) for k in ("pattern", "score", "lr", "known")} for row in rows],
        "promoted": [{"pattern": row["pattern"], "forecast": row.get("forecast")} for row in chosen],
        "last_rung": [{k: row.get(k) for k in ("pattern", "score", "lr", "known")} for row in last],
        "best_new_at_last_rung": best_new, "rules": rules,
        "keeps_best_new": {name: best_new in patterns for name, patterns in rules.items()},
    }
    for name, patterns in rules.items():
        print(f"{name}: {len(patterns)} -> {', '.join(patterns)}"
              f"{'' if best_new in patterns else f'  (leaves out {best_new}, the best new pattern at the last rung)'}")
    if args.json:
        from composer.files import atomic_write_json

        atomic_write_json(Path(args.json), result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
