"""Whether the equal-cost search's win holds as the model grows: its answer and the best shipped family at 4x the
target's parameters and 4x its tokens.

Why: issue 68 asks, once the search's answer beats the families that shipped for equal cost at ``demo-4m``, for the
answer and the best of those families at 4x the target's parameters and tokens, 2 seeds each, so that a reader can
tell a win that grows from one that belongs to a 4M-parameter model. Both are grown to Nemotron-H's cost exactly as
at the target (``equal_cost_families.RULE``: the widest shape within Nemotron-H's modeled cost at ``llama-3.2-1b``
on this CPU, scaled down in proportion), here to ``demo-4m:d384`` (twice the target's ``d_model``, so about 4x its
non-embedding parameters at the same depth), and each trains for 4x the confirmation's tokens (2M instead of
``rung-cpu-2``'s 500K) from scratch, on the confirmation's settings otherwise (sequence 128, batch 16, warmup-stable-
decay, the same held-out text for every seed and model), at the rate that model chose at the target. The rate is
not searched again at 4x: a wider model's best rate may be lower, and the record says so.

Each arm trains in its own process (one thread), its seeds in turn; a seed's loss is written to
``WORK/<arm>/scale_check.json`` as soon as it is trained, so a killed run keeps its finished seeds and a rerun
trains the rest. Without ``--arm`` it pairs the seeds both arms have and prints (``--json``: writes) the record.

    python benchmarks/equal_cost_scale_check.py --arm search-answer --search runs/amsd-equal-cost --families WORK
    python benchmarks/equal_cost_scale_check.py --arm nemotron-flash --families WORK
    python benchmarks/equal_cost_scale_check.py --families WORK --json benchmarks/results/equal_cost_scale_check-DATE.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

_ROOT = Path(__file__).resolve().parent.parent
for _path in (_ROOT, _ROOT / "benchmarks"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from composer.errors import ConfigError  # noqa: E402
from composer.files import atomic_write_json  # noqa: E402
from composer.statistics import paired_difference  # noqa: E402

SCALED_TARGET = "demo-4m:d384"  # twice demo-4m's d_model 192: about 4x the non-embedding parameters at equal depth
TOKEN_FACTOR = 4
SEEDS = (0, 1)
ARMS = ("search-answer", "nemotron-flash")  # the answer and the best shipped family at the target (5 seeds)
RECORD = "scale_check.json"


def scaled_budget():
    """``rung-cpu-2`` with 4x its tokens at ``SCALED_TARGET``, from scratch at one rate (set per arm)."""
    from search.lm.budgets import get_lm_budget

    base = get_lm_budget("rung-cpu-2")
    return dataclasses.replace(base, name=f"rung-cpu-2x{TOKEN_FACTOR}@{SCALED_TARGET}",
                               tokens=TOKEN_FACTOR * base.tokens, extrapolate_to=SCALED_TARGET, continues=False,
                               keeps_trunk=False, extend_edge=False, confirms=False, recall_sequences=0,
                               seed_noise=None, description=f"rung-cpu-2's settings at {SCALED_TARGET}, "
                               f"{TOKEN_FACTOR}x its tokens, from scratch at one rate")


def arm_of(name: str, families: Path, search: Path | None):
    """The arm (``equal_cost_families.Arm``) and the rate it chose at the target, from its record there."""
    import equal_cost_families as families_module

    if name == families_module.ANSWER:
        if search is None:
            raise ConfigError(f"--arm {name} needs --search (the finished equal-cost search's --out)")
        arm = families_module.answer_arm(search, families)
    else:
        arm = families_module.ARMS[name]
    path = families / arm.name / "family.json"
    if not path.is_file():
        raise ConfigError(f"{path} is missing: train the arm at the target first (benchmarks/equal_cost_families.py)")
    stages = json.loads(path.read_text())["stages"]
    rate = families_module.chosen_rate(stages)
    if rate is None:
        raise ConfigError(f"{path} records no chosen rate")
    return arm, rate


def train_arm(name: str, families: Path, search: Path | None, threads: int, budget=None, echo=print) -> dict:
    """Every seed of :data:`SEEDS` the arm's record lacks, each written as soon as it is trained."""
    import equal_cost_families as families_module
    import torch

    from search.evaluators import make_evaluator
    from search.growth import Growth

    torch.set_num_threads(threads)
    arm, rate = arm_of(name, families, search)
    budget = budget or scaled_budget()
    budget = dataclasses.replace(budget, lrs=(rate,))
    config = families_module.control_config()
    path = families / arm.name / RECORD
    record = json.loads(path.read_text()) if path.is_file() else {
        "arm": arm.name, "fit": arm.fit, "lr": rate, "budget": dataclasses.asdict(budget), "losses": {},
        "seconds": {}}
    growth = Growth(arm.attention, None, families_module.RULE)
    evaluator = make_evaluator("lm", budget, config.widths, config.data, config.tokenizer, config.precision,
                               config.compile, None, known={arm.fit: arm.family} if arm.family else {},
                               growth=growth)
    grown = evaluator.grown(arm.fit)
    from composer.accounting import analyze

    record["model"] = {"layout": grown.layout, "widths": grown.widths, "d_model": grown.arch.d_model,
                       "layers": grown.arch.n_layers,
                       "non_embedding_params": analyze(grown.arch).non_embedding_params}
    for seed in SEEDS:
        if str(seed) in record["losses"]:
            continue
        echo(f"{arm.name}: seed {seed} at lr {rate:g}, {grown.layout} at {grown.widths}, {budget.tokens:,} tokens ...")
        started = time.perf_counter()
        result = evaluator(arm.fit, seed, None)
        record["losses"][str(seed)] = float(result.score)
        record["seconds"][str(seed)] = time.perf_counter() - started
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_json(path, record)
        echo(f"{arm.name}: seed {seed} loss {result.score:.4f} ({record['seconds'][str(seed)] / 60:.1f} min)")
    return record


def summary(families: Path) -> dict:
    """Both arms' records and the answer against the family, paired by seed."""
    records = {}
    for name in ARMS:
        path = families / name / RECORD
        records[name] = json.loads(path.read_text()) if path.is_file() else None
    answer, family = (records[name] for name in ARMS)
    pair = None
    if answer and family and len(set(answer["losses"]) & set(family["losses"])) >= 2:
        pair = paired_difference(answer["losses"], family["losses"])
    return {"benchmark": "equal_cost_scale_check", "scaled_target": SCALED_TARGET, "token_factor": TOKEN_FACTOR,
            "arms": records, "answer_vs_family": pair}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--arm", choices=ARMS, help="train this arm's seeds (one process per arm)")
    parser.add_argument("--families", required=True, help="the --work of benchmarks/equal_cost_families.py")
    parser.add_argument("--search", help="with --arm search-answer: the finished equal-cost search's --out")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--json", help="write the summary here")
    args = parser.parse_args(argv)
    families = Path(args.families)
    try:
        if args.arm:
            train_arm(args.arm, families, Path(args.search) if args.search else None, args.threads)
            return 0
        result = summary(families)
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(json.dumps(result, indent=2))
    if args.json:
        atomic_write_json(Path(args.json), result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
