"""A search's answer against published families trained earlier under the same protocol, paired seed by seed.

Why: training Llama, Samba and Nemotron-H at the target (3 seeds, a swept rate each) costs about an hour of these
CPU cores, and their runs are deterministic given seed, rate, tokens and validation tokens. So a new answer is
trained alone (a pipeline with ``baselines: []``) and paired with the stored runs. That is only honest when the
protocol is the same: the script refuses a comparison whose validation tokens (fingerprint), token budget, seeds
or rate sweep differ, naming the mismatch.

    python3 benchmarks/answer_vs_published.py runs/default-answer/comparison.json \\
        [--families benchmarks/results/halving_answer_vs_published-2026-11-26.json] [--label default-search] \\
        [--out benchmarks/results/default_answer_vs_published.json]

Prints one row per stored model: the answer's loss minus that model's, per seed and as a mean with its paired
Student-t interval and a verdict (``within noise`` when the interval contains 0).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

_ROOT = Path(__file__).resolve().parent.parent
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

from composer.statistics import format_interval, paired_difference  # noqa: E402

DEFAULT_FAMILIES = _ROOT / "benchmarks" / "results" / "halving_answer_vs_published-2026-11-26.json"
# Budget fields two comparisons must share for their runs to pair (tokens may differ by a partial last batch: no)
PROTOCOL_FIELDS = ("tokens",)


class ProtocolMismatch(ValueError):
    """The two comparisons were not trained the same way: pairing their seeds would mislead."""


def _comparison(data: dict) -> dict:
    """A pipeline's comparison.json, or a results file that holds one under ``comparison``."""
    return data.get("comparison", data)


def _models(comparison: dict) -> dict[str, dict]:
    return {row["model"]: row for row in comparison["models"]}


def check_protocol(new: dict, stored: dict) -> None:
    """Raise :class:`ProtocolMismatch` naming the first difference that makes per-seed pairing invalid."""
    a, b = new.get("validation", {}), stored.get("validation", {})
    if a.get("val_fingerprint") != b.get("val_fingerprint") or a.get("val_tokens") != b.get("val_tokens"):
        raise ProtocolMismatch(
            f"validation tokens differ ({a.get('val_fingerprint')} x {a.get('val_tokens')} vs "
            f"{b.get('val_fingerprint')} x {b.get('val_tokens')}): train with the stored recipe's train block")
    if new.get("lr_sweep") != stored.get("lr_sweep"):
        raise ProtocolMismatch(f"rate sweeps differ ({new.get('lr_sweep')} vs {stored.get('lr_sweep')})")
    if not set(new.get("seeds", [])) & set(stored.get("seeds", [])):
        raise ProtocolMismatch(f"no common seeds ({new.get('seeds')} vs {stored.get('seeds')})")
    budgets = {row["model"]: tuple(row.get(f) for f in PROTOCOL_FIELDS) for row in stored["models"]}
    for row in new["models"]:
        mine = tuple(row.get(f) for f in PROTOCOL_FIELDS)
        for name, theirs in budgets.items():
            if mine != theirs:
                raise ProtocolMismatch(f"{row['model']} trained {dict(zip(PROTOCOL_FIELDS, mine, strict=True))}, "
                                       f"{name} {dict(zip(PROTOCOL_FIELDS, theirs, strict=True))}")


def pair(new: dict, stored: dict, label: str = "answer", model: str = "composite",
         confidence: float = 0.95) -> dict:
    """The new comparison's ``model`` paired per seed with every model of the stored comparison."""
    new, stored = _comparison(new), _comparison(stored)
    check_protocol(new, stored)
    answer = _models(new).get(model)
    if answer is None:
        raise ProtocolMismatch(f"no model {model!r} in the new comparison (has: {', '.join(_models(new))})")
    mine = {int(s): v for s, v in answer["val_losses"].items()}
    rows = []
    for name, row in _models(stored).items():
        theirs = {int(s): v for s, v in row["val_losses"].items()}
        diff = paired_difference(mine, theirs, confidence)
        if name == model:  # the stored comparison's own answer (e.g. the successive-halving search's)
            name = f"stored {model}"
        rows.append({"model": name, "pattern": row["pattern"], "val_loss": row["val_loss"],
                     "chosen_lr": row.get("chosen_lr"), "diff": diff})
    rows.sort(key=lambda r: r["val_loss"])
    return {
        "answer": {"label": label, "pattern": answer["pattern"], "val_losses": mine, "val_loss": answer["val_loss"],
                   "val_loss_std": answer.get("val_loss_std"), "chosen_lr": answer.get("chosen_lr"),
                   "lr_sweep": answer.get("lr_sweep"), "params": answer.get("params"),
                   "kv_cache_bytes_per_token": answer.get("kv_cache_bytes_per_token")},
        "validation": new["validation"], "seeds": new["seeds"], "confidence": confidence, "against": rows,
    }


def format_table(report: dict) -> str:
    answer = report["answer"]
    lines = [f"{answer['label']}: {answer['pattern']}: val loss {answer['val_loss']:.4f} "
             f"(lr {answer['chosen_lr']}, seeds {report['seeds']})",
             f"{'model':<18} {'pattern':<22} {'val loss':>9} {'answer - model (paired)':>24} {'95% CI':>20}  verdict"]
    for row in report["against"]:
        d = row["diff"]
        mean = "—" if d["mean"] is None else f"{d['mean']:+.4f}"
        lines.append(f"{row['model']:<18} {row['pattern']:<22} {row['val_loss']:>9.4f} {mean:>24} "
                     f"{format_interval(d['ci']):>20}  {d['verdict']}")
    return "\n".join(lines)


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("comparison", help="the new answer's comparison.json (composer pipeline)")
    p.add_argument("--families", default=str(DEFAULT_FAMILIES), help="stored comparison to pair with")
    p.add_argument("--label", default="answer", help="what the answer is, for the table")
    p.add_argument("--model", default="composite", help="the new comparison's row to pair (default: composite)")
    p.add_argument("--out", help="write the report as JSON here")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        new = json.loads(Path(args.comparison).read_text())
        stored = json.loads(Path(args.families).read_text())
        report = pair(new, stored, args.label, args.model)
    except (OSError, json.JSONDecodeError, KeyError, ProtocolMismatch) as err:
        print(f"answer_vs_published: {err}", file=sys.stderr)
        return 2
    report["files"] = {"comparison": args.comparison, "families": args.families}
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    print(format_table(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
