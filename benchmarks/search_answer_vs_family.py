"""A successive-halving search's answer against a published family its primitives cannot express, paired by seed.

Why: a search compares its answer with the known layouts its ``--primitives`` can write (an ``AMSD`` search meets
Nemotron-H, Llama and the 7:1 linear family), but not with Samba, whose sliding-window attention (``W``) is not
in ``AMSD``. A comparison trained apart (``composer pipeline``, its own rate sweep and schedule) does not pair
with the search's runs. This script trains the family the way the search trains a known layout, through the
search's own training call and settings (read from the search's ``config.json``):

- every rung at the target's size, in the family's own layout there (``search.growth.grow``): the
  ``cpu`` ladder's rung 1 (two rates, 125K tokens, the better rate's trunk kept) and rung 2 (that trunk continued
  to 500K tokens), at the search's seed;
- the confirmation's further seeds (``--confirm-seeds``: from scratch, at the rate the last rung scored it at,
  which is rung 1's choice, continued).

``--layout PATTERN --name NAME`` trains a layout of the target's size as given instead of a family (a what-if:
the answer with fewer attention layers at the target, say), through the same stages.

Its losses then pair seed by seed with the answer's (``details.losses`` in the search's ``leaderboard.json``, the
last rung's score at the search's seed and the confirmation's seeds), and the script prints ``answer - family``
with its paired t interval. Each finished stage is written to ``<work>/family.json`` as it ends, so a killed run
keeps what it trained and a rerun trains only what is missing (trunks in ``<work>/trunks``). ``--train-only``
trains the family while the search still runs (nothing of the family depends on the search's answer), so the
comparison waits on neither. Each stage keeps the trained models' recall where the budget measures it
(``recall``, ``trained_recall``: rung-cpu-2 does), and the output sets each side's serving cost at the target
(``cost``: cache per sequence at 4K and 32K) beside its losses.

    python benchmarks/search_answer_vs_family.py runs/sh-amsd-recall --family samba \\
        [--answer PATTERN] [--work runs/sh-amsd-recall/families/samba] [--json out.json]
    python benchmarks/search_answer_vs_family.py runs/sh-amsd-recall --layout SDDMDSSDDMASSDDMDSSDMDS \
        --name sddmas-one-attention --answer SMSAMS
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

_ROOT = Path(__file__).resolve().parent.parent
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

from composer.errors import ConfigError
from composer.files import atomic_write_json
from composer.statistics import format_interval, paired_difference


def search_config(out: Path):
    """The search's settings as it wrote them (``config.json``), so the family trains under the same ones."""
    from search.config import SearchConfig

    path = out / "config.json"
    if not path.is_file():
        raise ConfigError(f"{out} has no config.json: pass the --out of a composer search")
    config = SearchConfig(**json.loads(path.read_text()))
    if config.strategy != "successive-halving":
        raise ConfigError(f"{out} is a {config.strategy} search: only successive halving trains at its target")
    return config


def answer_row(out: Path, pattern: str | None) -> dict:
    """The answer's leaderboard row: ``pattern``, or the search's best new finalist (among those that meet
    --min-recall where it was given), with its per-seed losses."""
    best_path, board_path = out / "best.json", out / "leaderboard.json"
    if not best_path.is_file() or not board_path.is_file():
        raise ConfigError(f"{out} holds no finished search (best.json, leaderboard.json): let it finish first")
    best, board = json.loads(best_path.read_text()), json.loads(board_path.read_text())
    if pattern is None:
        pattern = ((best.get("vs_known") or {}).get("best_new") or {}).get("pattern")
        if pattern is None:
            raise ConfigError(f"{out}: the search has no new finalist to compare: pass --answer PATTERN")
    row = next((row for row in board if row["pattern"] == pattern), None)
    if row is None:
        raise ConfigError(f"{pattern} is not on {board_path}'s leaderboard (the last rung's)")
    return row


def answer_losses(row: dict, seed: int) -> dict[str, float]:
    """Per-seed losses of a last-rung row: the confirmation's where it ran, else the last rung's score alone."""
    scores = (row.get("evidence") or {}).get("scores") or (row.get("details") or {}).get("losses")
    return {str(s): float(v) for s, v in scores.items() if v is not None} if scores else {str(seed): float(row["score"])}


def last_rung_name(config) -> str:
    """The stage name of the ladder's last rung, whose rate and seed-0 loss the confirmation pairs with."""
    from search.fidelity import get_ladder

    return f"rung{len(get_ladder(config.budget).rungs) - 1}"


def family_fit(config, family: str) -> str:
    """The family at the search's depth: the pattern whose stack sets the size the family is compared at."""
    from search.known import family_at_depth

    return family_at_depth(family, config.layers).pattern


def serving_cost_at_target(widths: str, trained: str) -> dict:
    """The analytic serving cost of the model trained at the target (at preset ``widths``), as the search costs its
    trials (``search.cost.serving_cost``), so the family's cache at 32K sits beside the answer's ``cost``."""
    from composer.presets import get_preset
    from search.cost import serving_cost

    return serving_cost(get_preset(widths).arch.with_pattern(trained))


def stage_losses(path: Path, config) -> dict[str, float] | None:
    """Per-seed losses of a model trained by :func:`train_stages` (its ``family.json`` at ``path``): the last rung's
    at seed 0 and the confirmation's further seeds; None before the last rung exists."""
    if not path.is_file():
        return None
    stages, last = json.loads(path.read_text())["stages"], last_rung_name(config)
    if last not in stages:
        return None
    losses = dict(stages[last]["losses"])
    for stage in ("confirmation", MORE_SEEDS):
        losses.update(stages.get(stage, {}).get("losses", {}))
    return losses


MORE_SEEDS = "more_seeds"  # the stage of seeds trained after the confirmation, where its interval left a tie


def train_more_seeds(config, fit: str, path: Path, count: int, threads: int, *, known: dict[str, str] | None = None,
                     attention: str = "repeat", depth: int | None = None, equal_cost=None, echo=print) -> dict:
    """``count`` further seeds of ``fit`` after those its record (``path``, a ``family.json``) holds, each from
    scratch at the rate its last rung chose, on the confirmation's budget: more evidence where three seeds left an
    interval across 0. Validation is the same held-out text for every seed. Kept in the record as stage
    ``more_seeds``, written after each seed, so a killed run keeps its finished seeds and a rerun trains the rest."""
    import torch

    from search.evaluators import make_evaluator
    from search.fidelity import get_ladder
    from search.growth import Growth
    from search.lm import confirm_budget
    from search.strategies.successive_halving import rung_config

    torch.set_num_threads(threads)
    record = json.loads(path.read_text())
    last = last_rung_name(config)
    if last not in record["stages"]:
        raise ConfigError(f"{path} has no {last}: train the model's rungs first")
    lr = record["stages"][last]["lr"]
    budget = confirm_budget(rung_config(config, len(get_ladder(config.budget).rungs) - 1).budget, 1)
    stage = record["stages"].setdefault(MORE_SEEDS, {"budget": budget, "lr": lr, "losses": {}, "seconds": 0.0})
    evaluator = make_evaluator("lm", budget, config.widths, config.data, config.tokenizer, config.precision,
                               config.compile, None, known=known or {}, chosen_rates={fit: lr},
                               growth=Growth(attention, depth, equal_cost))
    while len(stage["losses"]) < count:
        seed = max(int(seed) for seed in stage_losses(path, config)) + 1  # the file holds every seed so far
        echo(f"{record['family']} {MORE_SEEDS}: seed {seed} at lr {lr} ({budget}) ...")
        started = time.perf_counter()
        result = evaluator(fit, seed, None)
        seconds = time.perf_counter() - started
        losses = {str(k): v for k, v in ((result.details or {}).get("losses") or {seed: result.score}).items()}
        stage["losses"][str(seed)] = float(losses[str(seed)])
        stage["seconds"] += seconds
        atomic_write_json(path, record)
        echo(f"{record['family']} {MORE_SEEDS}: seed {seed} loss {stage['losses'][str(seed)]:.4f} "
             f"({seconds / 60:.1f} min)")
    return stage


def rate_past_edge(config, fit: str, path: Path, threads: int, *, known: dict[str, str] | None = None,
                   attention: str = "repeat", depth: int | None = None, equal_cost=None) -> dict:
    """Rung 1 of ``fit`` once more at the rate past the edge of the ladder's two (twice the higher where it chose
    the higher, half the lower where it chose the lower), seed 0: whether a rate outside the grid would have scored
    it better, so that each model's rate is shown to be its own good one. Kept in ``path`` (its ``family.json``) as
    ``edge``; done once."""
    import dataclasses

    import torch

    from search.evaluators import make_evaluator
    from search.growth import Growth
    from search.lm import get_lm_budget
    from search.strategies.successive_halving import rung_config

    torch.set_num_threads(threads)
    record = json.loads(path.read_text())
    if "edge" in record:
        return record["edge"]
    rung = get_lm_budget(rung_config(config, 1).budget)
    chosen = record["stages"]["rung1"]["lr"]
    past = 2 * chosen if chosen == max(rung.lrs) else chosen / 2
    budget = dataclasses.replace(rung, name=f"{rung.name}-edge", lrs=(past,), keeps_trunk=False, extend_edge=False)
    evaluator = make_evaluator("lm", budget, config.widths, config.data, config.tokenizer, config.precision,
                               config.compile, None, known=known or {},
                               growth=Growth(attention, depth, equal_cost))
    result = evaluator(fit, config.seed, None)
    record["edge"] = {"lr": past, "loss": result.score, "chosen_lr": chosen,
                      "chosen_loss": record["stages"]["rung1"]["losses"][str(config.seed)],
                      "budget": rung.name, "seed": config.seed}
    atomic_write_json(path, record)
    return record["edge"]


def train_family(config, family: str, work: Path, echo=print, layout: str | None = None) -> dict:
    """The family (or ``layout``, named ``family``) through the search's rungs at the target's size and its
    confirmation, a record per stage in ``work/family.json`` (kept across runs: a stage already there is not
    trained again)."""
    fit = layout or family_fit(config, family)
    return train_stages(config, family, fit, work, known={} if layout else {fit: family}, expect=layout, echo=echo)


def train_stages(config, name: str, fit: str, work: Path, *, known: dict[str, str] | None = None,
                 attention: str = "repeat", depth: int | None = None, expect: str | None = None,
                 echo=print, equal_cost=None) -> dict:
    """``fit`` (a pattern of the search's depth, or a layout) trained as the search trains a finalist: its rungs at
    the target's size and its confirmation, a record per stage in ``work/family.json`` (kept across runs: a stage
    already there is not trained again). ``known``: ``fit`` -> the family it stands for; ``attention`` and
    ``depth``: how ``fit`` grows to the target (``search.growth.grow``); ``expect``: the layout ``fit``
    must become there (a layout of the target's size, trained as given); ``equal_cost``: grown to that
    ``scaling.equal_cost.EqualCost`` instead of the target's size."""
    from search.evaluators import make_evaluator
    from search.fidelity import get_ladder
    from search.growth import Growth
    from search.lm import confirm_budget, get_lm_budget
    from search.strategies.successive_halving import last_rung_seeds, rung_config

    record_path = work / "family.json"
    record = json.loads(record_path.read_text()) if record_path.is_file() else {}
    if record and (record.get("family"), record.get("fit")) != (name, fit):
        raise ConfigError(f"{record_path} holds {record.get('family')}: pass another --work")
    record.update(family=name, fit=fit, stages=record.get("stages", {}))
    work.mkdir(parents=True, exist_ok=True)
    rungs = len(get_ladder(config.budget).rungs)
    stages = []
    for index in range(rungs):
        rung = rung_config(config, index)
        if get_lm_budget(rung.budget).extrapolate_to is not None:  # the rungs that train at the target's size
            stages.append((f"rung{index}", rung.budget, config.seed))
    if config.confirm_seeds > 1:
        last, trained = rung_config(config, rungs - 1), last_rung_seeds(config)  # its seeds follow the rung's
        stages.append(("confirmation", confirm_budget(last.budget, config.confirm_seeds - trained),
                       config.seed + trained))
    for stage, budget, seed in stages:
        if stage in record["stages"]:
            echo(f"{name} {stage}: done before ({record['stages'][stage]['losses']})")
            continue
        chosen = record["stages"].get(last_rung_name(config), {}).get("lr")  # the confirmation's rate
        evaluator = make_evaluator("lm", budget, config.widths, config.data, config.tokenizer, config.precision,
                                   config.compile, str(work / "trunks"), known=known or {},
                                   chosen_rates={fit: chosen} if chosen else None,
                                   growth=Growth(attention, depth, equal_cost))
        grown = evaluator.grown(fit)
        trained, widths = (fit, config.widths) if grown is None else (grown.layout, grown.widths)
        if expect and trained != expect:
            raise ConfigError(f"--layout {expect} grows to {trained} at {config.report_target}: give a layout of the "
                              "target's size")
        record["cost"] = serving_cost_at_target(widths, trained)
        record["widths"] = widths
        echo(f"{name} {stage}: {trained} at {widths}, {budget}, seed {seed} ...")
        started = time.perf_counter()
        result = evaluator(fit, seed, None)
        details = result.details or {}
        losses = {str(k): float(v) for k, v in (details.get("losses") or {seed: result.score}).items()}
        record["stages"][stage] = {"budget": budget, "pattern": trained, "widths": widths, "seed": seed,
                                   "score": result.score, "lr": details.get("lr"), "losses": losses,
                                   "seconds": time.perf_counter() - started,
                                   # each seed's trained-model recall where the budget measures it (rung-cpu-2 does)
                                   **{key: details[key] for key in ("recall", "trained_recall") if key in details}}
        atomic_write_json(record_path, record)
        echo(f"{name} {stage}: loss {result.score:.4f} at lr {details.get('lr')} "
             f"({record['stages'][stage]['seconds'] / 60:.1f} min)")
    return record


def family_losses(record: dict, last_rung: str) -> dict[str, float]:
    """The family's per-seed losses: the last rung's at the search's seed, the confirmation's further seeds."""
    losses = dict(record["stages"][last_rung]["losses"])
    losses.update(record["stages"].get("confirmation", {}).get("losses", {}))
    return losses


def compare(out: Path, family: str, answer: str | None, work: Path, echo=print, layout: str | None = None) -> dict:
    config = search_config(out)
    row = answer_row(out, answer)
    record = train_family(config, family, work, echo, layout)
    last_rung = last_rung_name(config)
    mine, theirs = answer_losses(row, config.seed), family_losses(record, last_rung)
    paired = paired_difference(mine, theirs)
    from search.growth import Grown

    return {"search": str(out), "answer": {"pattern": row["pattern"], "target_pattern": Grown.layout_in(row),
                                           "losses": mine, "lr": row.get("lr"), "cost": row.get("cost"),
                                           "recall": (row.get("details") or {}).get("trained_recall")},
            "family": {"name": family, "fit": record["fit"], "target_pattern": record["stages"][last_rung]["pattern"],
                       "losses": theirs, "stages": record["stages"], "cost": record.get("cost")},
            "answer_minus_family": paired}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("search", help="a successive-halving search's --out")
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--family", help="a published family (composer families), e.g. samba")
    which.add_argument("--layout", help="a layout of the target's size, trained as given (name it with --name)")
    parser.add_argument("--name", help="what --layout is called in the output")
    parser.add_argument("--answer", help="the pattern to compare (default: the search's best new finalist)")
    parser.add_argument("--work", help="where the family's runs go (default: <search>/families/<family>)")
    parser.add_argument("--json", help="write the comparison here")
    parser.add_argument("--train-only", action="store_true",
                        help="train the family's stages and stop: the search may still be running (its answer is "
                             "read by a later run without this flag, which trains nothing again)")
    args = parser.parse_args(argv)
    from composer.layouts import FAMILIES

    try:
        if args.layout:
            from composer.pattern import parse_pattern

            parse_pattern(args.layout)
            if not args.name:
                raise ConfigError("--layout needs --name: what the output calls it")
        elif args.family not in FAMILIES:
            raise ConfigError(f"unknown family {args.family!r}: one of {', '.join(FAMILIES)}")
        name = args.name if args.layout else args.family
        out = Path(args.search)
        work = Path(args.work) if args.work else out / "families" / name
        if args.train_only:
            record = train_family(search_config(out), name, work, layout=args.layout)
            print(f"{name}: {', '.join(record['stages'])} trained; compare once the search has finished")
            return 0
        result = compare(out, name, args.answer, work, layout=args.layout)
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    paired = result["answer_minus_family"]
    print(f"{result['answer']['pattern']} - {name} ({result['family']['target_pattern']}): "
          f"seeds {paired['seeds']}, differences {[round(d, 4) for d in paired['differences']]}")
    if paired["ci"] is not None:
        print(f"  mean {paired['mean']:+.4f}, 95% {format_interval(paired['ci'])}: {paired['verdict']}")
    else:
        print(f"  {paired['verdict']}")
    if args.json:
        atomic_write_json(Path(args.json), result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
