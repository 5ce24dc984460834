"""The families that shipped for equal cost, and the layouts that beat Nemotron-H, each grown to Nemotron-H's cost.

Why: an equal-cost search has to beat the best layout a user could copy at the same cost (issue 68). The floor is
the best of Nemotron-H, Nemotron-Flash (arXiv 2511.18890) and the 3 linear : 1 attention layout with an MLP after
each mixer (Kimi Linear's and Qwen3-Next's ratio), each in its own layout, at the widest widths within Nemotron-H's
cost (``scaling.equal_cost``). Beside them, the two layouts the project's earlier comparisons found level with or
ahead of Nemotron-H: the constrained equal-cost search's answer ``SMMMAD`` (one attention layer kept) and
``answer-mlp@16``, ``S(MD)x3 MAMDMSMDM`` (docs/reports/equal-cost-2026-11-29.md), grown the same way.

Cost is taken at the deployed size, ``llama-3.2-1b``, on the device whose cost model rests on fitted and measured
constants only: this CPU (``--cost-device cpu``; at 1B a decode step reads the weights, so it is memory bound, not
the per-op overhead a small model's is). The H200's decode constants are assumed, not measured (no GPU decode was
ever timed): a rule built on them would set the widths by an assumption, so its figures are reported beside each arm
(``h200``), not used to grow it. Decode at batch 1 and training are both held to Nemotron-H's, the binding one
winning; each deployed shape is scaled down to ``demo-4m`` as Nemotron-H's own layout is. Every arm trains as the
search trains a finalist (``benchmarks/search_answer_vs_family.train_stages``, the constrained search's settings in
fp32): the ``cpu`` ladder's rung 1 at its two rates (each arm at its own better rate), rung 2 continued to 500K
tokens, seeds 1 and 2 from scratch at that rate; losses pair seed by seed against Nemotron-H. ``--arm NAME`` trains
one arm (two processes train two arms at once, one thread each; a killed run keeps every finished stage). Without
``--arm`` it prints and (``--json``) writes what is trained, and ``--cost`` adds each arm's cost measured here at
``demo-4m`` (``composer.evaluation.bench_cost``, medians of its repeats) beside the modeled figures at the deployed
size.

    python benchmarks/equal_cost_families.py --arm nemotron-flash --threads 1     # one arm (repeat per arm)
    python benchmarks/equal_cost_families.py --cost --json benchmarks/results/equal_cost_families-DATE.json
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import sys
from pathlib import Path

_ROOT = Path(__file__).resolve().parent.parent
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))
if str(_ROOT / "benchmarks") not in sys.path:
    sys.path.insert(0, str(_ROOT / "benchmarks"))

from composer.errors import ConfigError  # noqa: E402
from composer.files import atomic_write_json  # noqa: E402
from composer.statistics import format_interval, paired_difference  # noqa: E402
from scaling.equal_cost import EqualCost  # noqa: E402

TARGET, DEPLOYED, DEVICE, REFERENCE = "demo-4m", "llama-3.2-1b", "cpu", "nemotron-h"
RULE = EqualCost(REFERENCE, DEPLOYED, DEVICE)
ANSWER_MLP = "SMDMDMDMAMDMSMDM"  # S(MD)x3 MAMDMSMDM: the constrained search's SADDDD mixers, an MLP after each


@dataclasses.dataclass(frozen=True)
class Arm:
    """One model: the pattern it grows from, the family it stands for (its own layout), its attention rule."""

    name: str
    fit: str
    family: str | None = None
    attention: str = "repeat"
    shipped: bool = False  # a family that shipped for equal cost: the floor is the best of these

    def grown(self):
        from search.growth import grow

        return grow(self.fit, TARGET, self.family, self.attention, equal_cost=RULE)


ARMS = {arm.name: arm for arm in (
    Arm("nemotron-h", "SMSAMS", "nemotron-h", shipped=True),
    Arm("nemotron-flash", "DMSMAM", "nemotron-flash", shipped=True),
    Arm("linear-3to1", "DMDMAM", "linear-3to1", shipped=True),
    Arm("smmmad", "SMMMAD", attention="keep"),
    Arm("answer-mlp", ANSWER_MLP, attention="keep"),
)}


def control_config():
    """The constrained search's settings in fp32 (benchmarks/depth_control.control_config), grown to equal cost."""
    from depth_control import control_config as constrained

    return dataclasses.replace(constrained(), equal_cost=REFERENCE, deployed_at=DEPLOYED, cost_device=DEVICE,
                               max_latency=None, min_throughput=None)


def train_arm(arm: Arm, work: Path, threads: int) -> dict:
    import torch
    from search_answer_vs_family import train_stages

    torch.set_num_threads(threads)
    return train_stages(control_config(), arm.name, arm.fit, work / arm.name,
                        known={arm.fit: arm.family} if arm.family else {}, attention=arm.attention,
                        equal_cost=RULE)


def edge_check(arm: Arm, work: Path, threads: int) -> dict:
    """The arm's rung 1 at the rate past the grid's edge on the side it chose (``rate_past_edge``)."""
    from search_answer_vs_family import rate_past_edge

    return rate_past_edge(control_config(), arm.fit, work / arm.name / "family.json", threads,
                          known={arm.fit: arm.family} if arm.family else {}, attention=arm.attention,
                          equal_cost=RULE)


ANSWER = "search-answer"  # the equal-cost search's answer, for more seeds and its rate past the grid's edge


def answer_arm(search: Path, work: Path) -> Arm:
    """The equal-cost search's answer (``--search``) as an arm: its record in ``work/search-answer/family.json``
    written once from the search's own rungs (rung 1's rate and seed-0 loss, rung 2's, the confirmation's seeds),
    so more seeds and the edge check continue the runs the search made rather than training them again."""
    best = json.loads((search / "best.json").read_text())
    pattern = best["vs_known"]["recommended"]
    arm = Arm(ANSWER, pattern, attention="keep")
    path = work / ANSWER / "family.json"
    if path.is_file():
        if json.loads(path.read_text())["fit"] != pattern:
            raise ConfigError(f"{path} holds another answer than {search}'s {pattern}: pass another --work")
        return arm
    stages = {}
    for rung in json.loads((search / "rungs.json").read_text())[1:]:
        row = next(row for row in rung["leaderboard"] if row["pattern"] == pattern)
        stages[f"rung{rung['rung']}"] = {"budget": rung["budget"], "pattern": row["target_pattern"],
                                         "widths": row["target_widths"], "seed": 0, "score": row["score"],
                                         "lr": row["lr"], "losses": {"0": row["score"]}, "seconds": row["seconds"]}
    final = next(row for row in json.loads((search / "leaderboard.json").read_text()) if row["pattern"] == pattern)
    further = {seed: loss for seed, loss in final["evidence"]["scores"].items() if seed != "0"}
    stages["confirmation"] = {"lr": final["lr"], "losses": further, "from": str(search)}
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(path, {"family": ANSWER, "fit": pattern, "from_search": str(search), "stages": stages})
    return arm


def more_seeds(arm: Arm, work: Path, count: int, threads: int) -> dict:
    """``count`` seeds of the arm after its confirmation's, from scratch at its chosen rate
    (``search_answer_vs_family.train_more_seeds``)."""
    from search_answer_vs_family import train_more_seeds

    return train_more_seeds(control_config(), arm.fit, work / arm.name / "family.json", count, threads,
                            known={arm.fit: arm.family} if arm.family else {}, attention=arm.attention,
                            equal_cost=RULE)


def arm_losses(arm: Arm, work: Path) -> dict[str, float] | None:
    """The arm's per-seed losses (the last rung's seed 0, the confirmation's seeds 1 and 2), or None before."""
    from search_answer_vs_family import stage_losses

    return stage_losses(work / arm.name / "family.json", control_config())


def deployed_record(record: dict) -> dict:
    """A grown model's shape at the deployed size (``Grown.cost``) and its modeled cost over the reference's there."""
    return {"layers": len(record["deployed_pattern"]), "d_model": record["deployed_d_model"],
            "pattern": record["deployed_pattern"],
            "ratio": {figure: record["costs"][figure] / record["budget"][figure] for figure in record["figures"]},
            "binding": record["binding"]}


def chosen_rate(stages: dict) -> float | None:
    """The rate an arm's rungs chose (its last rung's, rung 2 continuing rung 1's), None before it trained."""
    return (stages.get("rung2") or stages.get("rung1") or {}).get("lr")


def arm_record(arm: Arm, work: Path) -> dict:
    """An arm's model at the target and deployed, its modeled cost against Nemotron-H's, its rate and losses."""
    from composer.accounting import analyze

    grown = arm.grown()
    stats = analyze(grown.arch)
    path = work / arm.name / "family.json"
    stages = json.loads(path.read_text()).get("stages", {}) if path.is_file() else {}
    record = grown.cost
    return {"name": arm.name, "shipped": arm.shipped, "layout": grown.layout, "widths": grown.widths,
            "d_model": grown.arch.d_model, "layers": grown.arch.n_layers, "how": grown.how,
            "non_embedding_params": stats.non_embedding_params, "params": stats.params,
            "kv_cache_bytes_per_token": stats.kv_cache_bytes_per_token,
            "deployed": deployed_record(record),
            "lr": chosen_rate(stages), "losses": arm_losses(arm, work),
            "stage_minutes": {k: round(v["seconds"] / 60, 1) for k, v in stages.items()},
            "edge": json.loads(path.read_text()).get("edge") if path.is_file() else None,
            "h200": h200_ratios(arm),
            "trained_recall": {k: v.get("trained_recall") for k, v in stages.items() if v.get("trained_recall")}}


def arm_cost(arm: Arm, threads: int) -> dict:
    """The arm's model at the target measured on this machine (``composer.evaluation.bench_cost``)."""
    from composer.evaluation.bench_cost import CostGrid, measure_cost

    return measure_cost(arm.grown().arch, CostGrid(train_batch=16, seq_len=128, threads=threads))


def h200_ratios(arm: Arm) -> dict:
    """The arm's deployed shape (at ``llama-3.2-1b``, grown on this CPU's cost) on the H200, modeled, over Nemotron-H's
    own layout there: decode ms per token at batch 1 after 4,096 tokens and training seconds per token. Rests on the
    H200's assumed decode constants (``scaling.equal_cost.assumed_constants`` names them)."""
    from composer.presets import get_preset
    from scaling.equal_cost import assumed_constants, budget_of, costs_of

    on_h200 = dataclasses.replace(RULE, device="h200")
    record = arm.grown().cost
    deployed = get_preset(DEPLOYED).arch
    from composer.widths import scale_widths

    arch = scale_widths(deployed, record["deployed_d_model"]).with_pattern(record["deployed_pattern"])
    mine, theirs = costs_of(arch, on_h200), budget_of(on_h200, DEPLOYED)
    return {"ratio": {figure: mine[figure] / theirs[figure] for figure in mine}, "figures": mine,
            "assumed_constants": assumed_constants(on_h200, arch)}


def differences(records: dict[str, dict]) -> list[dict]:
    """Every arm against Nemotron-H, paired by seed."""
    rows = []
    reference = records[REFERENCE]["losses"]
    for name, record in records.items():
        if name == REFERENCE:
            continue
        if not record["losses"] or not reference:
            rows.append({"a": name, "b": REFERENCE, "verdict": "not trained yet"})
            continue
        rows.append({"a": name, "b": REFERENCE, **paired_difference(record["losses"], reference)})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--arm", choices=[*ARMS, ANSWER],
                        help=f"train this arm (its stages are kept in --work); {ANSWER}: --search's answer")
    parser.add_argument("--search", help=f"with --arm {ANSWER}: the --out of the finished equal-cost search")
    parser.add_argument("--more-seeds", type=int, metavar="N",
                        help="with --arm: N seeds after its confirmation's, from scratch at its chosen rate")
    parser.add_argument("--work", default="runs/equal-cost-families", help="where the arms' runs go")
    parser.add_argument("--threads", type=int, default=max(1, (os.cpu_count() or 2) // 2),
                        help="torch threads (default: half the cores, so two arms train at once)")
    parser.add_argument("--edge", action="store_true", help="with --arm: its rung 1 at the rate past the grid's edge")
    parser.add_argument("--cost", action="store_true", help="also measure each arm's model here at the target")
    parser.add_argument("--json", help="write the result here")
    args = parser.parse_args(argv)
    work = Path(args.work)
    if args.arm == ANSWER and not args.search:
        parser.error(f"--arm {ANSWER} needs --search DIR, the equal-cost search's --out")
    if args.arm == ANSWER and not (args.edge or args.more_seeds):
        parser.error(f"--arm {ANSWER} trains only --edge or --more-seeds N: the search trained its stages")
    if args.more_seeds is not None and (not args.arm or args.more_seeds < 1):
        parser.error("--more-seeds N needs --arm and N >= 1")
    if args.arm:
        try:
            arm = answer_arm(Path(args.search), work) if args.arm == ANSWER else ARMS[args.arm]
            if args.more_seeds:
                more_seeds(arm, work, args.more_seeds, args.threads)
            else:
                (edge_check if args.edge else train_arm)(arm, work, args.threads)
        except ConfigError as error:
            print(f"equal_cost_families: {error}", file=sys.stderr)
            return 2
        return 0
    records = {name: arm_record(arm, work) for name, arm in ARMS.items()}
    if args.cost:
        for name, arm in ARMS.items():
            records[name]["measured_cpu"] = arm_cost(arm, args.threads)
    from composer.costmodel import TABLE_PATH
    from scaling.equal_cost import describe

    result = {"rule": describe(RULE, TARGET), "arms": records, "differences": differences(records),
              "cost_table": hashlib.sha256(Path(TABLE_PATH).read_bytes()).hexdigest()[:12],
              "seeds": "seed 0 at the last rung, seeds 1 and 2 from scratch at its rate; paired 95% t intervals"}
    for name, record in records.items():
        deployed = record["deployed"]
        ratios = ", ".join(f"{figure} {value:.3f}x" for figure, value in deployed["ratio"].items())
        losses = record["losses"] or {}
        mean = sum(losses.values()) / len(losses) if losses else float("nan")
        print(f"{name:15} {record['layers']:>3} layers d{record['d_model']:<4} {record['non_embedding_params']:>10,} "
              f"non-emb  deployed {deployed['layers']} layers d{deployed['d_model']} ({ratios})  lr {record['lr']}  "
              f"loss {mean:.4f} over {len(losses)} seed(s)")
    for row in result["differences"]:
        if "mean" in row:
            print(f"{row['a']} - {row['b']}: {row['mean']:+.4f} {format_interval(row['ci'])} ({row['verdict']})")
        else:
            print(f"{row['a']} - {row['b']}: {row['verdict']}")
    if args.json:
        atomic_write_json(args.json, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
