"""``composer report DIR``: a finished search's studies, rankings, answer and plots, read back from its --out."""

from __future__ import annotations

import argparse
from typing import Any

from composer.cli.format import print_json

DESCRIPTION = (
    "Print what a finished composer search wrote to its --out, without re-running it: the studies in its storage, "
    "each rung's ranking, the final leaderboard, the answer (new / known / tie with its interval and seeds, "
    "against the known layouts) and where its plots are. DIR may also hold several searches' --out directories. "
    "To browse the trials themselves, open the storage with optuna-dashboard (pip install optuna-dashboard; "
    "optuna-dashboard sqlite:///DIR/study.db), or list its studies with: optuna studies --storage "
    "sqlite:///DIR/study.db."
)


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("report", help="re-print a finished search's leaderboard and answer (no training)",
                                   description=DESCRIPTION)
    parser.add_argument("out", metavar="DIR", help="a composer search --out directory (or a folder of them)")
    parser.add_argument("--json", action="store_true", help="print the same as one JSON object")
    parser.set_defaults(handler=run)


def study_lines(search: dict[str, Any]) -> list[str]:
    studies = search["studies"]
    if studies is None:
        return [f"studies: in {search['storage']} (list them: optuna studies --storage {search['storage']})"]
    lines = [f"studies in {search['storage']}:"]
    for study in studies:
        trials = study["trials"]
        counts = ", ".join(f"{n} {state}" for state, n in trials.items()) or "no trials"
        lines.append(f"   {study['study']}  ({counts})")
    return lines


def rung_lines(search: dict[str, Any]) -> list[str]:
    """The rankings of the rungs below the one the answer comes from (that one is the leaderboard itself)."""
    from search.summary import format_table

    answered = (search["best"] or {}).get("study")
    rungs = search["rungs"] or []
    lines = []
    for rung, above in zip(rungs, [*rungs[1:], None]):
        if rung.get("study") == answered or not rung.get("leaderboard"):
            continue
        promoted = ", ".join((above or {}).get("promoted") or []) or "none"
        lines += [f"rung {rung['rung']}: {rung['candidates']} candidates at {rung['budget']}, study {rung['study']}; "
                  f"promoted: {promoted}", format_table(rung["leaderboard"]), ""]
    return lines


def report_text(search: dict[str, Any]) -> str:
    from search.results import summary_result
    from search.summary import summary_text

    config = search["config"]
    settings = ", ".join(f"{key} {config[key]}" for key in ("strategy", "evaluator", "budget", "widths", "target",
                                                            "attention_at_target") if config.get(key))
    if config.get("space", "layers") != "layers":  # --space mixers: its patterns are stacks of mixer slots
        settings += f", space {config['space']} (up to {config.get('layers')} mixers)"
    lines = [f"search {search['out']}: {settings}", *study_lines(search), ""]
    if not search["finished"]:
        lines.append("not finished: no best.json yet; re-run the search's command with this --out to resume it")
    elif not search["leaderboard"]:
        note = ((search["best"] or {}).get("vs_known") or {}).get("note") or "no pattern was scored"
        lines.append(f"no answer: {note} (failures.json lists the trials that failed)")
    else:
        lines += rung_lines(search)
        lines += [f"leaderboard of study {search['best'].get('study')}, the answer's ranking:",
                  summary_text(summary_result(search))]
    if search["failures"]:
        lines.append(f"{len(search['failures'])} trial(s) failed, pruned or skipped: failures.json")
    if search["plots"]:
        lines.append("plots: " + ", ".join(search["plots"]))
    lines.append(f"browse the trials: {search['dashboard']}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from search.results import find_searches, read_search

    searches = [read_search(path) for path in find_searches(args.out)]
    if args.json:
        print_json({"searches": searches})
        return 0
    print("\n\n".join(report_text(search) for search in searches))
    return 0
