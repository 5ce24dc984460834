"""Latency and throughput a candidate's model must meet before it trains: ``--max-latency``, ``--min-throughput``.

Why: a layout that wins on loss at equal parameters can still lose where users pay, in decode latency and
training throughput (the constrained ``AMSD`` search's 34-layer answer decoded at 0.24x Nemotron-H's tokens/s on
the CPU). The field's latency-aware searches rank on the loss-cost front (Nemotron-Flash, Jet-Nemotron); these
limits let a search answer *at equal cost*, as ``--max-kv`` lets it answer at equal cache.

Each figure belongs to the candidate's model at the target (``search.growth.Grown``, as ``--max-kv``'s cache):

* ``decode_ms``: one decode step at batch 1, milliseconds per token;
* ``train_tokens_per_s``: training tokens per second.

Where they come from (``--cost-device``):

* not given: **measured on the machine the search runs on** (``composer.evaluation.bench_cost``, the one timing
  harness of the search and the benchmarks; one thread, the model's random weights: speed does not depend on
  them), the way the search's models train and are served: in its precision (``resolved_precision``: bf16 autocast
  where it trains in bf16) and, under ``--compile``, with the decode step compiled. Decode at batch 1 at the
  search's one decode point (``CostGrid.decode_point``: the last rung's context times 8, within the model's length,
  where the finalists' cost table and the standing read it too), training at the last rung's batch and length;
  each figure the median of its repeats with their spread beside it, after one untimed warm-up call. A few
  seconds per model, once: figures are kept in ``--out/limit_cost.json`` under the machine's CPU or GPU name,
  threads, torch, precision and decode path (:func:`store_key`), appended under a file lock (workers share it), so
  a resumed search on the same machine reads them back and one on another machine measures again. Measured
  figures carry the machine's noise: a candidate within that noise of the limit may fall either side of it on a
  busy machine;
* ``cpu``, ``h100``, ``h200``: **modeled** (``composer.costmodel``, its constants' sources in its table): decode
  at the same decode point, training at the device's own shape; deterministic, and the only way to ask about a GPU
  from a CPU. The GPUs' decode constants are assumed, not fitted (docs/reports/layout-cost-cpu-2026-11-29.md).

A limit is a number (``5`` ms, ``2000`` tokens/s) or ``known``: as good as the best known layout. Which known
layout is best is decided by loss after the last rung, once per answer (``search.best_known``). Before
training, ``known`` holds a candidate to the known layout that scores best so far in its stage (the known layouts
are its first trials); where none has scored yet, to *some* known layout (the slowest decode and the lowest
throughput among those the search trains: one worse than all of them cannot match the best, whichever it is). After the last rung a finalist is eligible to be the answer
only when it is no worse than the best known layout itself (:func:`eligible_at_known_cost`). A known layout is
never held to a ``known`` limit.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from pathlib import Path
from typing import Any

from composer.errors import ConfigError
from composer.files import update_json

STORE = "limit_cost.json"
FIGURES = {"decode_ms": "decode ms per token at batch 1", "train_tokens_per_s": "training tokens/s"}
LIMITS = {  # figure -> the CostLimits field that limits it, its flag, and the most lenient of several figures
    "decode_ms": ("max_latency", "--max-latency", max),
    "train_tokens_per_s": ("min_throughput", "--min-throughput", min),
}
KNOWN = "known"


def parse_limit(value: Any, flag: str) -> str | float | None:
    """``known``, a positive number, or None; anything else one ``ConfigError`` naming the flag."""
    if value is None:
        return None
    if isinstance(value, str) and value.strip().lower() == KNOWN:
        return KNOWN
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = float("nan")
    if not number > 0 or number == float("inf"):
        unit = "ms per token" if flag == "--max-latency" else "tokens/s"
        raise ConfigError(f"{flag} must be 'known' or a positive number ({unit}), got {value!r}")
    return number


@dataclasses.dataclass(frozen=True)
class CostLimits:
    """A search's latency and throughput limits and the device their figures come from (None: measured here)."""

    max_latency: str | float | None = None
    min_throughput: str | float | None = None
    device: str | None = None

    @classmethod
    def of(cls, config) -> CostLimits:
        return cls(
            parse_limit(config.max_latency, "--max-latency"),
            parse_limit(config.min_throughput, "--min-throughput"),
            config.cost_device,
        )

    @property
    def active(self) -> bool:
        return self.max_latency is not None or self.min_throughput is not None

    @property
    def asks_known(self) -> bool:
        return KNOWN in (self.max_latency, self.min_throughput)

    def where(self) -> str:
        return f"modeled on {self.device}" if self.device else "measured here"


def check_device(device: str | None) -> None:
    """``--cost-device`` names a device of the cost model's table, or is not given."""
    if device is None:
        return
    from composer.costmodel import load_table

    table = load_table()
    if device not in table.devices:
        raise ConfigError(
            f"--cost-device {device!r} is not in the cost model's table: one of "
            f"{', '.join(table.devices)}, or leave it out to measure on this machine"
        )
    table.device(device).warn_if_elsewhere()  # at the start, not among the trials' output


MEASUREMENTS = 3
"""A measured figure that decides something (a skip, or the best known layout's figure that others are held to)
rests on this many measurements, taken at different moments, the median over all their repeats counted: on 2 CPU
cores the best known layout measured once at the start of a search read 14.2 ms where three later measurements
read 5.7, and the limit it set let every candidate through. One slowed measurement of three moves the median of
their repeats little, where it alone would have set the limit."""


def store_key(arch, grid, here: dict[str, Any]) -> str:
    """The key of ``arch``'s figures in ``STORE``: the machine (``here``: ``bench_cost.machine``'s CPU model or GPU
    name, threads, torch and the clock it times on), the precision and decode path measured in, and the model and
    its training length. A figure measured under another key is never read: a search resumed on another machine,
    with other threads, another torch, clock, precision or ``--compile`` measures again."""
    path = "compiled" if grid.compile_decode else "eager"
    return (f"{here['device_name']}|{here['threads']} thread(s)|torch {here['torch']}|{here['clock']}|"
            f"{grid.precision or 'default'}|{path}|{arch.d_model}:{arch.pattern}:{grid.seq_len}")


class CostFigures:
    """Each model's figures on the limits' device. Modeled ones are computed; measured ones are kept in
    ``out/STORE``, up to :data:`MEASUREMENTS` per model under :func:`store_key` (entries of a store written before
    it was keyed by machine are never read: measured again), appended under a file lock so that workers sharing
    the ``--out`` keep each other's measurements, and read back by a resumed search on the same machine."""

    def __init__(self, limits: CostLimits, grid, out: str | Path | None = None) -> None:
        self.limits = limits
        self.grid = grid  # the measured figures' shape (search.cost.limits.limits_grid: the last rung's)
        self.path = Path(out) / STORE if out is not None else None
        self._memory: dict[str, list[dict[str, Any]]] = {}  # without an out: this process's measurements

    @functools.cached_property
    def here(self) -> dict[str, Any]:
        """The machine the figures are measured on (``composer.evaluation.bench_cost.machine``)."""
        import torch

        from composer.evaluation.bench_cost import machine

        return machine(torch.device("cuda" if torch.cuda.is_available() else "cpu"), self.grid)

    def _store(self) -> dict[str, Any]:
        if self.path is None:
            return self._memory
        if not self.path.is_file():
            return {}
        try:
            data = json.loads(self.path.read_text())
        except (OSError, json.JSONDecodeError):
            return {}
        return data if isinstance(data, dict) else {}

    def _kept(self, key: str, kept: Any = None) -> list[dict[str, Any]]:
        """``key``'s measurements (of the store, or ``kept``) that carry their repeats."""
        kept = (self._store().get(key) if kept is None else kept) or []
        return [m for m in (kept if isinstance(kept, list) else [kept]) if isinstance(m, dict) and "repeats" in m]

    def _add(self, key: str, measurement: dict[str, Any]) -> list[dict[str, Any]]:
        """``measurement`` appended to ``key``'s, read and written under the store's lock; returns them all."""
        if self.path is None:
            self._memory[key] = [*self._memory.get(key, []), measurement]
            return self._memory[key]

        def append(data: dict[str, Any]) -> dict[str, Any]:
            kept = data.get(key) if isinstance(data.get(key), list) else []
            return {**data, key: [*kept, measurement]}

        return update_json(self.path, append)[key]

    def of(self, arch, at_least: int = 1) -> dict[str, Any]:
        """``{"decode_ms", "train_tokens_per_s", "spread", "repeats", "source", "measurements"}`` of ``arch`` (a
        model at the target): measured until ``at_least`` measurements are kept, each figure the median over all
        their repeats, with its spread (``(max - min) / median``) beside it."""
        if self.limits.device is not None:
            return modeled(arch, self.limits.device, self.grid.decode_point(arch.max_seq_len))
        key = store_key(arch, self.grid, self.here)
        kept = self._kept(key)
        while len(kept) < min(at_least, MEASUREMENTS):
            kept = self._kept(key, self._add(key, measured(arch, self.grid)))
        return pooled(kept)


def pooled(kept: list[dict[str, Any]]) -> dict[str, Any]:
    """The figures of several measurements of one model: each the median over all their repeats, the spread and
    the repeats counted beside it, the source saying so."""
    import statistics

    said: dict[str, Any] = {"spread": {}, "repeats": {}}
    for name in FIGURES:
        values = [value for measurement in kept for value in measurement["repeats"][name]]
        median = statistics.median(values)
        said[name] = median
        said["spread"][name] = (max(values) - min(values)) / median if median else 0.0
        said["repeats"][name] = len(values)
    said["measurements"] = len(kept)
    said["source"] = (f"{kept[0]['source']}; the median of {said['repeats']['decode_ms']} decode repeats over "
                      f"{len(kept)} measurement(s), spread {said['spread']['decode_ms']:.0%}")
    return said


def modeled(arch, device: str, context: int | None = None) -> dict[str, Any]:
    """The cost model's figures on ``device``, decode after ``context`` tokens (the search's decode point, where a
    search asks; else ``composer.costmodel.DECODE_POINT``), within the model's length."""
    from composer.costmodel import DECODE_POINT, decode_point, predict_decode, predict_train

    context = decode_point(arch.max_seq_len, DECODE_POINT if context is None else context)
    return {
        "decode_ms": predict_decode(arch, device, context=context).ms_per_token,
        "train_tokens_per_s": predict_train(arch, device).tokens_per_s,
        "source": f"cost model, {device}, decode after {context:,} tokens",
    }


def measured(arch, grid) -> dict[str, Any]:
    """Decode at batch 1 at the grid's decode point and training tokens/s, on this machine (the grid's threads,
    precision and decode path): each the median of its repeats, the repeats kept (:func:`pooled` joins
    measurements)."""
    from composer.evaluation.bench_cost import measure_cost

    small = dataclasses.replace(grid, large_batch=1, prefill_repeats=1, short_decode=False)
    record = measure_cost(arch, small)
    context = str(small.decode_point(arch.max_seq_len))
    decode, train = record["decode_ms_per_token"]["1"][context], record["train_tokens_per_s"]
    return {
        "decode_ms": decode["median"],
        "train_tokens_per_s": train["median"],
        "repeats": {"decode_ms": decode["values"], "train_tokens_per_s": train["values"]},
        "source": f"measured on {record.get('device_name') or record['device']}, {record['threads']} thread(s), "
        f"torch {record['torch']}, training {record['train_dtype']}, decode {record['decode_path']} at batch 1 "
        f"after {int(context):,} tokens, {record['warmup']}",
    }


def resolved(limits: CostLimits, known: dict[str, dict[str, Any]],
             why: str = "the most lenient known layout before the rungs tell which is best"
             ) -> dict[str, tuple[float, str]]:
    """Each limit as ``(value, what it is)``; ``known`` (a known layout's name -> its figures) sets a ``known``
    limit: the most lenient of them, ``why`` saying which one it is (the module docstring). A ``known`` limit
    without known layouts is left out: a later stage trains promotions, each checked at the first
    (``check_known_limits`` refuses a search without known layouts)."""
    said: dict[str, tuple[float, str]] = {}
    for figure, (field, _, pick) in LIMITS.items():
        limit = getattr(limits, field)
        if limit is None:
            continue
        if limit != KNOWN:
            said[figure] = (float(limit), f"{limit:g}")
            continue
        if not known:  # a stage of promotions (known layouts are not entered again): they passed at the first
            continue
        name = pick(known, key=lambda n: known[n][figure])
        said[figure] = (known[name][figure], f"known: no worse than {name}'s {known[name][figure]:,.4g}, {why}")
    return said


def check_known_limits(config) -> None:
    """Refuse ``known`` limits in a search that enters no known layout (``--no-known``): nothing to compare with."""
    if CostLimits.of(config).asks_known and not config.known:
        raise ConfigError(
            "--max-latency/--min-throughput known compare with the known layouts, which --no-known "
            "leaves out: give a number, or drop --no-known"
        )


def violation(figures: dict[str, Any], limits: dict[str, tuple[float, str]]) -> str | None:
    """Why a model's figures break a limit (one line), or None."""
    for figure, (value, what) in limits.items():
        mine, (_, flag, lenient) = figures[figure], LIMITS[figure]
        if (mine > value) if lenient is max else (mine < value):  # above a maximum, below a minimum
            return f"{FIGURES[figure]} {mine:,.4g} ({figures['source']}) is {'over' if lenient is max else 'under'} " \
                   f"{flag} {what}"
    return None


def meets_known(figures: dict[str, Any], best_known: dict[str, Any], limits: CostLimits) -> bool:
    """After the last rung: a finalist may be the answer under a ``known`` limit only at no more decode latency /
    no less throughput than the best known layout's own figures (numeric limits were applied before training)."""
    held_to = {figure: entry for figure, entry in resolved(limits, {"the best known layout": best_known}).items()
               if getattr(limits, LIMITS[figure][0]) == KNOWN}
    return violation(figures, held_to) is None


def limits_grid(config):
    """The measured figures' shape: the last rung's batch and length for an ``lm`` ladder (what its finalists'
    cost table measures), the budget's own for one ``lm`` budget, else 16 x 128; timed in the precision the search
    trains in (``resolved_precision``) and with the decode step compiled under ``--compile``, the path its models
    train and are served in. A stage of the ladder (its budget a rung's, ``rung-cpu-0``, or a confirmation's)
    measures on the same shape as the others."""
    return dataclasses.replace(_limits_shape(config), compile_decode=bool(config.compile),
                               precision=config.resolved_precision)


def _limits_shape(config):
    from composer.evaluation.bench_cost import CostGrid
    from search.cost.measured import cost_grid
    from search.fidelity import get_ladder, rung_budget

    if config.evaluator == "lm":
        from search.lm import BudgetName

        budget = BudgetName.parse(config.budget).base
        ladder_name = budget.split("-")[1] if budget.startswith("rung-") else budget
        try:
            ladder = get_ladder(ladder_name)
            return cost_grid(rung_budget(ladder, len(ladder.rungs) - 1, config.target))
        except (ConfigError, IndexError):
            pass
        try:
            return cost_grid(budget)
        except ConfigError:
            pass
    return CostGrid(train_batch=16, seq_len=128)


def limit_check(config):
    """A search's check of a model at the target against its cost limits, or None when it sets none:
    ``check(arch, best_known=None, is_known=False) -> (reason, figures)``, reason None when it passes.

    ``best_known``: ``(name, arch)`` of the best-scoring known layout the stage has scored so far
    (:func:`best_known_so_far`); a ``known`` limit holds a candidate to its figures. Before any known layout has
    scored (they are the first trials, but a second worker may start a candidate beside them) it holds it to the
    most lenient known layout (the module docstring), resolved once from the known layouts the search's space can
    express. A known layout is never held to a ``known`` limit: it is what the limit is measured against. Measured
    figures that decide (a skip, the reference's) rest on :data:`MEASUREMENTS` measurements."""
    limits = CostLimits.of(config)
    if not limits.active:
        return None
    figures = CostFigures(limits, limits_grid(config), config.out)

    @functools.cache
    def most_lenient() -> dict[str, tuple[float, str]]:  # resolved on the first check that needs it
        return resolved(limits, known_figures(config, figures) if limits.asks_known else {})

    def held_to(best_known) -> dict[str, tuple[float, str]]:
        if best_known is None:
            return most_lenient()
        name, known_arch = best_known
        return resolved(limits, {name: figures.of(known_arch, at_least=MEASUREMENTS)}, "the best known layout so far")

    def check(arch, best_known: tuple[str, Any] | None = None,
              is_known: bool = False) -> tuple[str | None, dict[str, Any]]:
        limits_now = held_to(best_known)
        if is_known:  # the reference itself: only numeric limits apply
            limits_now = {figure: entry for figure, entry in limits_now.items()
                          if getattr(limits, LIMITS[figure][0]) != KNOWN}
        mine = figures.of(arch)
        if violation(mine, limits_now) is not None:  # a skip rests on more than one measurement
            mine = figures.of(arch, at_least=MEASUREMENTS)
        return violation(mine, limits_now), mine

    return check


def best_known_so_far(history, direction: str, target: str) -> tuple[str, Any] | None:
    """``(name, arch)`` of the best-scoring finished known layout of a stage's ``history`` (Optuna trials): its
    model at ``target`` as the trial stored it (``search.growth.Grown.stored_in``), or None."""
    from search.growth import Grown

    scored = [trial for trial in history if trial.user_attrs.get("known")
              and Grown.stored_in(trial.user_attrs, target) is not None
              and trial.values and not any(key in trial.user_attrs for key in ("cached_from", "skip_reason",
                                                                                 "pruned_at", "fail_reason"))
              and getattr(trial.state, "name", "COMPLETE") == "COMPLETE"]
    if not scored:
        return None
    best = (max if direction == "maximize" else min)(scored, key=lambda trial: trial.values[0])
    return best.user_attrs["known"], Grown.stored_in(best.user_attrs, target).arch


def known_figures(config, figures: CostFigures) -> dict[str, dict[str, Any]]:
    """The figures of every known layout the search trains (``search.known.known_layouts``), at the target."""
    if not config.known:
        return {}
    from composer.pattern import layers
    from scaling.extrapolate import OffTarget
    from search.known import known_layouts
    from search.spaces import build_space

    space = build_space(config.space, config.layers, config.primitives)  # the layouts the first stage can enter
    offered = layers(config.primitives) if config.primitives else []
    layouts, _ = known_layouts(space.known_depth, offered, config.equal_cost is not None)
    growth = config.growth
    said = {}
    for layout in layouts:
        if space.inexpressible(layout.pattern):  # --space mixers: never trained, so it sets no limit
            continue
        try:
            said[layout.name] = figures.of(growth.grow(layout.pattern, config.report_target, layout.name).arch)
        except OffTarget:  # not within the growth's tolerance (too deep for --equal-cost): skipped, it sets no limit
            continue
    return said


def eligible_at_known_cost(
    rows: list[dict[str, Any]], eligible: list[dict[str, Any]] | None, limits: CostLimits,
    known: dict[str, Any] | None = None,
) -> tuple[list[dict[str, Any]] | None, dict[str, Any] | None]:
    """After the last rung, under a ``known`` limit: the rows the answer may come from (of ``eligible``, or of every
    row) whose figures are no worse than the best known layout's (``known``: its row, ``search.best_known``'s, which
    is computed here by the same rule where it is not given; ``rows`` ranked best first), each row marked
    ``meets_cost_limits``; and what the summary says. ``(eligible, None)`` unchanged where no ``known`` limit is
    set; ``eligible`` unchanged, with the reason, where there is no best known layout or it has no figures (no other
    known layout stands in for it: the verdict compares with this one)."""
    from search.best_known import best_known

    if not limits.asks_known:
        return eligible, None
    known = known if known is not None else best_known(rows, eligible)
    if known is None:
        return eligible, {"why": "no known layout among the rows the answer may come from: the known limits could "
                                 "not be checked after the rungs"}
    if not known.get("limit_cost"):
        return eligible, {"best_known": {"name": known["known"], "pattern": known["pattern"]},
                          "why": f"the best known layout, {known['known']} {known['pattern']}, has no cost figures: "
                                 "the known limits could not be checked after the rungs"}
    for row in rows:
        figures = row.get("limit_cost")
        row["meets_cost_limits"] = bool(row.get("known")) or (
            figures is not None and meets_known(figures, known["limit_cost"], limits)
        )
    pool = eligible if eligible is not None else rows
    kept = [row for row in pool if row["meets_cost_limits"]]
    said = {
        "best_known": {"name": known["known"], "pattern": known["pattern"], **known["limit_cost"]},
        "limits": {
            "max_latency": limits.max_latency,
            "min_throughput": limits.min_throughput,
            "where": limits.where(),
        },
        "why": (
            f"known: no worse than the best known layout, {known['known']} ({known['limit_cost']['source']})"
        ),
        "eligible": [row["pattern"] for row in kept],
    }
    return kept, said


__all__ = [
    "CostFigures",
    "CostLimits",
    "FIGURES",
    "MEASUREMENTS",
    "KNOWN",
    "LIMITS",
    "STORE",
    "check_device",
    "check_known_limits",
    "eligible_at_known_cost",
    "known_figures",
    "limit_check",
    "limits_grid",
    "measured",
    "meets_known",
    "modeled",
    "parse_limit",
    "pooled",
    "resolved",
    "store_key",
    "violation",
]
