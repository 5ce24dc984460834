"""How much of the constrained search's answer is depth: its pattern and Nemotron-H's, each at both depths.

Why: the constrained ``AMSD`` search's answer ``SADDDD`` beat Nemotron-H by -0.051 [-0.071, -0.031] at
``demo-4m`` (docs/reports/amsd-constrained-search-2026-11-28.md). Grown by depth at the target's widths it has 34
layers against Nemotron-H's 16, and at equal parameters a deeper, thinner model has a lower loss at small scale
whatever its mixers are (MobileLLM, arXiv 2402.14905). This script trains the 2x2 that tells the two apart, every
arm at ``demo-4m``'s non-embedding size (``scaling.extrapolate.grow_to_depth``: depth chosen, widths scaled):

* ``answer@34``: the answer at its own depth (``d_model`` 192, as the search trained it);
* ``answer@16``: the answer laid out at 16 layers, its one attention layer kept, wider;
* ``nemotron-h@16``: Nemotron-H's own layout at 16 layers, at the target's size (``d_model`` 176);
* ``nemotron-h@34``: Nemotron-H's own rule at 34 layers, thinner;
* ``answer-mlp@16``: the answer's mixers at 8 layers, an MLP after each (Nemotron-Flash's released form).

Beside them, ``nemotron-h@16-d192`` is the model the search compared with: 16 layers at ``d_model`` 192, 5.20M
non-embedding parameters against the answer's 4.46M (the family's depth was matched to the stacked 6-layer fit's
size, not the answer's). Its losses and the answer's at 34 layers are the search's, read from its raw JSON.

Every arm trains as the search trains a finalist (``benchmarks/search_answer_vs_family.train_stages``): the ``cpu``
ladder's rung 1 at two rates (the better one kept: each arm at its own rate), rung 2 continued to 500K tokens, and
seeds 1 and 2 from scratch at that rate; the losses pair seed by seed. ``--arm NAME`` trains one arm (two
processes train two arms at once, one thread each); a killed run keeps every finished stage. Without ``--arm`` it
prints what is trained: each arm's losses, the paired differences that split the search's gap into depth and
mixers, and ``--cost`` adds each arm's cost measured here (``composer.evaluation.bench_cost``) and modeled on
H200 at ``llama-3.2-1b`` (``composer.costmodel``; the arm's depth rule applied at 1B).

    python benchmarks/depth_control.py --arm answer@16 --threads 1      # one arm (repeat per arm)
    python benchmarks/depth_control.py --cost --json benchmarks/results/depth_control-DATE.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from pathlib import Path

_ROOT = Path(__file__).resolve().parent.parent
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

from composer.errors import ConfigError
from composer.files import atomic_write_json
from composer.statistics import format_interval, paired_difference

SEARCH_RESULTS = _ROOT / "benchmarks" / "results" / "amsd_constrained_search-2026-11-28.json"
TARGET, SCALE_TARGET = "demo-4m", "llama-3.2-1b"
ANSWER, FAMILY = "SADDDD", "nemotron-h"
SHALLOW, DEEP = 16, 34  # Nemotron-H's depth where the search compared it; the answer's own depth at demo-4m


@dataclasses.dataclass(frozen=True)
class Arm:
    """One model of the control: a pattern (or a family), how it grows to the target and to what depth."""

    name: str
    fit: str  # the pattern trained from (the search's 6-layer pattern, or a layout)
    family: str | None = None  # the published family ``fit`` stands for (its own layout at the depth)
    attention: str = "repeat"
    depth: int | None = None  # None: grown by depth at the target's widths
    recorded: str | None = None  # the search's leaderboard row whose losses this arm is (trained there, not here)
    confirm: bool = True  # False: the rungs only (seed 0), a check that the code trains as it did for the search

    def model(self, target: str = TARGET, depth: int | None = None) -> tuple[str, str]:
        """``(layout, widths)`` of this arm at ``target`` (``depth`` overrides the arm's, for another scale)."""
        from search.growth import grow

        grown = grow(self.fit, target, self.family, self.attention, self.depth if depth is None else depth)
        return grown.layout, grown.widths


def answer_with_mlp(depth: int) -> str:
    """The answer's mixers laid out at ``depth / 2`` layers (its attention kept) with an MLP after each mixer."""
    from composer.presets import get_preset
    from scaling.extrapolate import full_attention_layers, pattern_at_depth

    kept = full_attention_layers(get_preset(TARGET).arch.with_pattern(ANSWER))
    mixers = pattern_at_depth(ANSWER, depth // 2, "keep", kept)
    return "".join(f"{mixer}M" for mixer in mixers)


ARMS = {arm.name: arm for arm in (
    Arm("answer@34", ANSWER, attention="keep", recorded=ANSWER),
    Arm("answer@16", ANSWER, attention="keep", depth=SHALLOW),
    Arm("nemotron-h@16", "SMSAMS", family=FAMILY, depth=SHALLOW),
    Arm("nemotron-h@34", "SMSAMS", family=FAMILY, depth=DEEP),
    Arm("answer-mlp@16", answer_with_mlp(SHALLOW), depth=SHALLOW),
    Arm("nemotron-h@16-d192", "SMSAMS", family=FAMILY, recorded="SMSAMS"),
    # answer@34's seed 0 trained again by today's code: the recorded losses pair with the arms trained here only if
    # the code trains the search's model as it did then
    Arm("answer@34-rerun", ANSWER, attention="keep", confirm=False),
)}

# What each difference tells (answer side first): the 2x2's two mixer effects, two depth effects, and the gap the
# search reported, split two ways; the MLP variant against Nemotron-H at one depth and size.
DIFFERENCES = (
    ("search's gap (as it trained them)", "answer@34", "nemotron-h@16-d192"),
    ("mixers at 16 layers", "answer@16", "nemotron-h@16"),
    ("mixers at 34 layers", "answer@34", "nemotron-h@34"),
    ("depth 34 vs 16, the answer's mixers", "answer@34", "answer@16"),
    ("depth 34 vs 16, Nemotron-H's mixers", "nemotron-h@34", "nemotron-h@16"),
    ("gap at equal size (34-layer answer vs 16-layer Nemotron-H)", "answer@34", "nemotron-h@16"),
    ("Nemotron-H at d 192 vs at the target's size", "nemotron-h@16-d192", "nemotron-h@16"),
    ("answer's mixers + MLP vs Nemotron-H, 16 layers", "answer-mlp@16", "nemotron-h@16"),
    ("answer's mixers + MLP vs without, 16 layers", "answer-mlp@16", "answer@16"),
    ("today's code against the search's run, answer@34 seed 0", "answer@34-rerun", "answer@34"),
)


def control_config(precision: str = "fp32"):
    """The constrained search's settings (its raw JSON's ``config``) at ``precision``: fp32, as that search ran on a
    CPU without bf16, so the arms trained here pair with the losses recorded there."""
    from search.config import SearchConfig

    config = json.loads(SEARCH_RESULTS.read_text())["config"]
    config.update(precision=precision, out=None, workers=1, wandb="off")
    return SearchConfig(**config)


def recorded_losses(pattern: str) -> dict[str, float]:
    """Per-seed losses of ``pattern``'s row in the search's raw leaderboard (its last rung and confirmation)."""
    board = json.loads(SEARCH_RESULTS.read_text())["leaderboard"]
    row = next(row for row in board if row["pattern"] == pattern)
    return {seed: float(loss) for seed, loss in row["evidence"]["scores"].items()}


def train_arm(arm: Arm, work: Path, threads: int) -> dict:
    import torch
    from search_answer_vs_family import train_stages

    torch.set_num_threads(threads)
    if arm.recorded:
        raise ConfigError(f"{arm.name} is the search's own run (its losses are recorded): nothing to train")
    config = control_config()
    if not arm.confirm:
        config = dataclasses.replace(config, confirm_seeds=1)
    return train_stages(config, arm.name, arm.fit, work / arm.name,
                        known={arm.fit: arm.family} if arm.family else {}, attention=arm.attention, depth=arm.depth)


def edge_check(arm: Arm, work: Path, threads: int) -> dict:
    """Rung 1 of ``arm`` once more at the rate past the edge of the ladder's two (twice the higher where it chose
    the higher, half the lower where it chose the lower), seed 0: whether a rate outside the grid would have scored
    it better. Kept in its ``family.json`` as ``edge``; done once."""
    from search_answer_vs_family import rate_past_edge

    return rate_past_edge(control_config(), arm.fit, work / arm.name / "family.json", threads,
                          known={arm.fit: arm.family} if arm.family else {}, attention=arm.attention, depth=arm.depth)


def arm_losses(arm: Arm, work: Path) -> dict[str, float] | None:
    """The arm's per-seed losses (the last rung's at seed 0, the confirmation's seeds 1 and 2), or None before they
    exist."""
    if arm.recorded:
        return recorded_losses(arm.recorded)
    from search_answer_vs_family import stage_losses

    return stage_losses(work / arm.name / "family.json", control_config())


def arm_record(arm: Arm, work: Path) -> dict:
    """What the output says of an arm: its model at the target, size, cache, rate and losses."""
    from composer.accounting import analyze
    from composer.presets import get_preset

    layout, widths = arm.model()
    arch = get_preset(widths).arch.with_pattern(layout)
    stats = analyze(arch)
    path = work / arm.name / "family.json"
    saved = json.loads(path.read_text()) if path.is_file() else {}
    stages = saved.get("stages", {})
    rate = (stages.get("rung2") or stages.get("rung1") or {}).get("lr")
    if arm.recorded:
        rate = next(row["lr"] for row in json.loads(SEARCH_RESULTS.read_text())["leaderboard"]
                    if row["pattern"] == arm.recorded)
    return {"name": arm.name, "layout": layout, "widths": widths, "d_model": arch.d_model, "layers": arch.n_layers,
            "non_embedding_params": stats.non_embedding_params, "params": stats.params,
            "kv_cache_bytes_per_token": stats.kv_cache_bytes_per_token, "lr": rate,
            "losses": arm_losses(arm, work), "edge": saved.get("edge"), "source": "the search's run (2026-11-28)" if arm.recorded else
            "trained here", "stage_minutes": {k: round(v["seconds"] / 60, 1) for k, v in stages.items()}}


def measure_arm(arm: Arm, threads: int) -> dict:
    """One measurement of the arm's model at the target on this machine (``composer.evaluation.bench_cost``)."""
    from composer.evaluation.bench_cost import CostGrid, measure_cost
    from composer.presets import get_preset

    layout, widths = arm.model()
    return measure_cost(get_preset(widths).arch.with_pattern(layout), CostGrid(train_batch=16, seq_len=128,
                                                                               threads=threads))


def arm_cost(arm: Arm, threads: int) -> dict:
    """The arm's cost measured on this machine at the target and modeled on H200 at ``SCALE_TARGET`` (the arm's
    depth rule there: its own growth, or the family's depth at 1B where it stands at the family's depth).
    ``measured_rounds`` collects further rounds (``main``'s ``--cost-rounds``, the arms interleaved round by
    round), so a figure's round-to-round spread shows beside its repeats' (the same model measured twice in one
    round differed by ~10%); ``measured_cpu`` is the first round's."""
    from composer.costmodel import predict_decode, predict_train
    from composer.presets import get_preset
    from search.cost import serving_cost
    from search.growth import depth_at_target

    layout, widths = arm.model()
    arch = get_preset(widths).arch.with_pattern(layout)
    measured = measure_arm(arm, threads)
    depth_at_scale = None
    if arm.depth == SHALLOW:
        depth_at_scale = depth_at_target(FAMILY, SCALE_TARGET)
    elif arm.depth == DEEP:
        depth_at_scale = len(ARMS["answer@34"].model(SCALE_TARGET)[0])
    scaled_layout, scaled_widths = arm.model(SCALE_TARGET, depth_at_scale)
    scaled = get_preset(scaled_widths).arch.with_pattern(scaled_layout)
    return {"measured_cpu": measured, "measured_rounds": [measured],
            "h200_at_1b": {"layout_layers": scaled.n_layers, "d_model": scaled.d_model,
                           "train_tokens_per_s": predict_train(scaled, "h200").tokens_per_s,
                           "decode_ms_b1_4k": predict_decode(scaled, "h200", batch=1, context=4096).ms_per_token,
                           "serving": serving_cost(scaled)},
            "serving_at_target": serving_cost(arch)}


def differences(records: dict[str, dict]) -> list[dict]:
    rows = []
    for what, mine, theirs in DIFFERENCES:
        a, b = records[mine]["losses"], records[theirs]["losses"]
        if not a or not b:
            rows.append({"what": what, "a": mine, "b": theirs, "verdict": "not trained yet"})
            continue
        rows.append({"what": what, "a": mine, "b": theirs, **paired_difference(a, b)})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--arm", choices=[name for name, arm in ARMS.items() if not arm.recorded],
                        help="train this arm (its finished stages are kept; a rerun trains only what is missing)")
    parser.add_argument("--work", default="runs/depth-control", help="where the arms' runs go")
    parser.add_argument("--threads", type=int, default=max(1, (os.cpu_count() or 2) // 2),
                        help="torch threads (two arms at once on 2 cores: 1 each)")
    parser.add_argument("--cost", action="store_true", help="also measure each arm's cost here and model it on H200")
    parser.add_argument("--cost-rounds", type=int, default=1,
                        help="with --cost: measure each arm this many times, the arms interleaved round by round")
    parser.add_argument("--edge", action="store_true",
                        help="with --arm: train its rung 1 once more at the rate past the grid's edge it chose")
    parser.add_argument("--json", help="write the result here")
    args = parser.parse_args(argv)
    work = Path(args.work)
    try:
        if args.arm and args.edge:
            edge = edge_check(ARMS[args.arm], work, args.threads)
            print(f"{args.arm}: rung 1 at lr {edge['lr']:g} {edge['loss']:.4f} against {edge['chosen_loss']:.4f} at the "
                  f"chosen {edge['chosen_lr']:g}")
            return 0
        if args.arm:
            record = train_arm(ARMS[args.arm], work, args.threads)
            print(f"{args.arm}: {', '.join(record['stages'])} trained")
            return 0
        records = {name: arm_record(arm, work) for name, arm in ARMS.items()}
        if args.cost:
            for name, arm in ARMS.items():
                records[name]["cost"] = arm_cost(arm, args.threads)
            for _ in range(args.cost_rounds - 1):
                for name, arm in ARMS.items():
                    records[name]["cost"]["measured_rounds"].append(measure_arm(arm, args.threads))
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    for name, record in records.items():
        losses = record["losses"]
        shown = ", ".join(f"{loss:.4f}" for loss in losses.values()) if losses else "not trained yet"
        print(f"{name:20s} {record['layers']:3d} layers, d {record['d_model']:4d}, "
              f"{record['non_embedding_params'] / 1e6:.2f}M, lr {record['lr']}: {shown}")
    result = {"arms": records, "differences": differences(records)}
    for row in result["differences"]:
        if row.get("ci") is not None:
            print(f"{row['what']}: {row['a']} - {row['b']} = {row['mean']:+.4f} {format_interval(row['ci'])} "
                  f"(seeds {row['seeds']}): {row['verdict']}")
        elif row.get("mean") is not None:
            print(f"{row['what']}: {row['a']} - {row['b']} = {row['mean']:+.4f} (seed {', '.join(row['seeds'])}): "
                  f"{row['verdict']}")
        else:
            print(f"{row['what']}: {row['verdict']}")
    if args.json:
        atomic_write_json(Path(args.json), result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
