"""The equal-cost search's answer against every family that shipped for equal cost and ``answer-mlp@16``, by seed.

Why: ``composer search --equal-cost nemotron-h ...`` confirms its answer against one layout, the best known it
entered (Nemotron-H), while an equal-cost search has to beat the best of the shipped families and the hand-built
``answer-mlp@16`` (issue 68). ``benchmarks/equal_cost_families.py`` trained those under the same rule, the way the
search trains a finalist (rung 1 at two rates, rung 2 continued, seeds 1 and 2 from scratch), so the answer's
per-seed losses pair with theirs seed by seed without training anything again: provided both trained the same
thing. This script checks that before it pairs: the search's Nemotron-H losses must equal the families' at every
seed (to 1e-6), and the answer grown by ``equal_cost_families``'s rule must be the model the search trained;
otherwise it refuses in one line.

    python benchmarks/equal_cost_search.py --search runs/amsd-equal-cost \\
        --families benchmarks/results/equal_cost_families-2026-12-07.json \\
        --json benchmarks/results/equal_cost_search-DATE.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

_ROOT = Path(__file__).resolve().parent.parent
for _path in (_ROOT, _ROOT / "benchmarks"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from composer.files import atomic_write_json
from composer.statistics import format_interval, paired_difference

SAME_TRAINING = 1e-6  # the search and the families benchmark run the same arithmetic: equal to float print precision


def _json(path: Path) -> dict:
    if not path.is_file():
        raise SystemExit(f"equal_cost_search: {path} not found; give a finished search's --out and the families JSON")
    return json.loads(path.read_text())


def finalists(search: Path, best: dict) -> list[dict]:
    """Each finalist of the search's last rung: the model it trained, its losses by seed, its recall and cost."""
    recall = (best.get("min_recall") or {}).get("recall") or {}
    rows = []
    for row in _json(search / "leaderboard.json"):
        cost = row.get("cost") or {}
        measured = cost.get("measured") or {}
        decode = (measured.get("decode_ms_per_token") or {}).get("1", {}).get("1024") or {}
        rows.append({
            "pattern": row["pattern"], "known": row.get("known"), "trained_as": row["target_pattern"],
            "widths": row.get("target_widths") or best["equal_cost"]["target"],
            # at the target, the model trained and scored (the row's own counts are the 6-layer pattern's at the
            # search's widths)
            "non_embedding_params": cost["non_embedding_params"], "params": cost["params"], "lr": row.get("lr"),
            "losses": (row.get("evidence") or {}).get("scores"),
            "probe_recall": (recall.get(row["pattern"]) or {}).get("value"),
            "trained_recall": (row.get("trained_recall") or {}).get("value"),
            "eligible": row["pattern"] in (best.get("min_recall") or {}).get("eligible", []),
            # this CPU at the target, one thread, medians of the repeats: what the search's own cost table shows
            "measured_cpu": {"train_tokens_per_s": (measured.get("train_tokens_per_s") or {}).get("median"),
                             "decode_ms_b1_after_1024": decode.get("median"), "noisy": measured.get("noisy"),
                             "over_best_known": {key: value for key, value in (cost.get("vs_best_known") or {}).items()
                                                 if key in ("train_tokens_per_s", "decode_ms_per_token")}},
        })
    return rows


def answer_model(pattern: str, trained_as: str, widths: str) -> dict:
    """The answer grown by the families benchmark's rule: its deployed shape and its modeled cost on the CPU and on
    the H200 over Nemotron-H's own layout at the deployed size. Refuses if it is not the model the search trained."""
    from equal_cost_families import Arm, deployed_record, h200_ratios

    arm = Arm("search-answer", pattern, attention="keep")
    grown = arm.grown()
    if (grown.layout, grown.widths) != (trained_as, widths):
        raise SystemExit(f"equal_cost_search: {pattern} grows to {grown.layout} at {grown.widths} under the families' "
                         f"rule but the search trained {trained_as} at {widths}; the two rules differ, pair nothing")
    return {"layout": grown.layout, "widths": grown.widths, "d_model": grown.arch.d_model,
            "deployed": deployed_record(grown.cost), "h200": h200_ratios(arm)}


def more_seeds(work: Path) -> dict[str, dict]:
    """Seeds trained after the confirmation (``equal_cost_families.py --arm NAME --more-seeds N --work WORK``), by
    arm (``search-answer`` for the search's answer), with the answer's rate past the grid's edge where it was
    checked (``--edge``)."""
    found = {}
    for path in sorted(work.glob("*/family.json")):
        record = json.loads(path.read_text())
        extra = record["stages"].get("more_seeds") or {}
        if extra or record.get("edge"):
            found[path.parent.name] = {"losses": extra.get("losses", {}), "lr": extra.get("lr"),
                                       "minutes": round(extra.get("seconds", 0.0) / 60, 1), "edge": record.get("edge")}
    return found


def extended(answer: dict, families: dict, more: dict[str, dict]) -> list[dict]:
    """The answer against every family that has more seeds, over every seed both sides have."""
    mine = {**answer["losses"], **more.get("search-answer", {}).get("losses", {})}
    rows = []
    for name, arm in families["arms"].items():
        theirs = {**arm["losses"], **more.get(name, {}).get("losses", {})}
        if len(theirs) == len(arm["losses"]):
            continue  # no more seeds of it: its row above stands
        seeds = sorted(set(mine) & set(theirs), key=int)
        rows.append({"a": "search answer " + answer["pattern"], "b": name, "seeds": seeds,
                     **paired_difference({s: mine[s] for s in seeds}, {s: theirs[s] for s in seeds})})
    return rows


def compare(search: Path, families_path: Path, more_work: Path | None = None) -> dict:
    best, families = _json(search / "best.json"), _json(families_path)
    rows = finalists(search, best)
    by_pattern = {row["pattern"]: row for row in rows}
    answer = by_pattern[best["vs_known"]["recommended"]]
    reference = by_pattern[best["best_known"]["pattern"]]
    theirs = families["arms"][best["best_known"]["name"]]["losses"]
    drift = {seed: abs(reference["losses"][seed] - theirs[seed]) for seed in theirs}
    if set(reference["losses"]) != set(theirs) or max(drift.values()) > SAME_TRAINING:
        raise SystemExit(f"equal_cost_search: the search's {best['best_known']['name']} losses {reference['losses']} "
                         f"differ from the families' {theirs}; they did not train the same, pair nothing")
    differences = [{"a": "search answer " + answer["pattern"], "b": name,
                    **paired_difference(answer["losses"], arm["losses"])}
                   for name, arm in families["arms"].items()]
    more = more_seeds(more_work) if more_work else {}
    return {**({"more_seeds": {"by_arm": more, "differences": extended(answer, families, more),
                               "seeds": "the seeds above and further seeds from scratch at each model's chosen rate "
                                        "(equal_cost_families.py --more-seeds); paired 95% t intervals"}}
               if more else {}),
            "search": {"command": search_command(search), "answer": answer["pattern"],
                       "verdict": best["vs_known"]["verdict"], "held_out": best["vs_known"]["held_out"],
                       "at_equal_cost_measured_at_target": best["vs_known"].get("at_equal_cost"),
                       "min_recall": {k: v for k, v in best["min_recall"].items() if k != "recall"},
                       "rule": best["equal_cost"],
                       "rungs": [{k: r[k] for k in ("rung", "budget", "candidates", "wall_seconds")}
                                 for r in best["rungs"]],
                       "finalists": rows},
            "answer_model": answer_model(answer["pattern"], answer["trained_as"], answer["widths"]),
            "same_training": {"reference": best["best_known"]["name"], "max_abs_difference": max(drift.values())},
            "differences": differences,
            "seeds": "seed 0 at the last rung (the seed the search chose on), seeds 1 and 2 from scratch at the "
                     "chosen rate; paired 95% t intervals over the 3 seeds"}


def search_command(search: Path) -> str:
    config = _json(search / "config.json")
    return (f"composer search --primitives {config['primitives']} --attention-at-target {config['attention_at_target']}"
            f" --max-kv {config['max_kv']} --min-recall {config['min_recall']} --confirm-seeds "
            f"{config['confirm_seeds']} --precision {config['precision']} --workers {config['workers']} --wandb off "
            f"--equal-cost {config['equal_cost']} --deployed-at {config['deployed_at']} --cost-device "
            f"{config['cost_device']} --out runs/amsd-equal-cost")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--search", required=True, help="the --out of a finished equal-cost search")
    parser.add_argument("--families", default=str(_ROOT / "benchmarks/results/equal_cost_families-2026-12-07.json"),
                        help="benchmarks/equal_cost_families.py's JSON, trained under the same rule")
    parser.add_argument("--more-seeds", metavar="WORK",
                        help="equal_cost_families.py's --work, where --more-seeds and --edge runs of the answer "
                             "(--arm search-answer) and the families are kept: pair over every seed too")
    parser.add_argument("--json", help="write the result here")
    args = parser.parse_args(argv)
    result = compare(Path(args.search), Path(args.families), Path(args.more_seeds) if args.more_seeds else None)
    print(result["search"]["verdict"])
    held = result["search"]["held_out"]
    print(f"held-out seeds {held['seeds']}: {held['difference']:+.4f} {format_interval(held['ci'])} ({held['answer']})")
    for row in result["differences"]:
        print(f"{row['a']} - {row['b']}: {row['mean']:+.4f} {format_interval(row['ci'])} ({row['verdict']})")
    for row in result.get("more_seeds", {}).get("differences", []):
        print(f"{row['a']} - {row['b']} over seeds {','.join(row['seeds'])}: {row['mean']:+.4f} "
              f"{format_interval(row['ci'])} ({row['verdict']})")
    edge = result.get("more_seeds", {}).get("by_arm", {}).get("search-answer", {}).get("edge")
    if edge:
        print(f"answer's rung 1 at lr {edge['lr']:g} (past the grid): {edge['loss']:.4f} against {edge['chosen_loss']:.4f}"
              f" at its chosen {edge['chosen_lr']:g}")
    model = result["answer_model"]
    print(f"answer at the target {model['layout']} ({model['widths']}); deployed {model['deployed']['layers']} layers "
          f"d{model['deployed']['d_model']}: cpu model {model['deployed']['ratio']}, h200 model {model['h200']['ratio']}")
    if args.json:
        atomic_write_json(args.json, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
