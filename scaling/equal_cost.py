"""Growth to equal cost: every model at a target as wide as a reference family's cost allows.

Why: growth to equal *parameters* (``scaling.extrapolate``) compares models that cost different amounts to run. A
search that grows every candidate to the target's parameter count and then drops the ones slower than the best
known layout (``--max-latency known``) never makes a better-but-slower mixer cheaper; it drops it, and the models
it finally compares differ in size (the constrained search's ``SMMMAD`` at 4.69M non-embedding parameters against
Nemotron-H's 5.20M, issue 68). The field's answer is Nemotron-Flash's (arXiv 2511.18890): each candidate gets the
largest hidden size whose latency on the deployment device fits the budget, so loss alone ranks candidates at equal
cost. This module is that rule.

The rule (:class:`EqualCost`):

* the **budget** is the cost of the reference family (``nemotron-h`` by default) in its own layout at the deployed
  preset ``P`` (default: the target), at ``P``'s widths: :func:`reference_model`;
* a model's **layout** at ``P`` is what the growth rule gives (``search.growth``: by depth at ``P``'s widths, a
  family in its own layout, or the depth asked); its ``d_model`` is then the largest multiple of the width quantum
  (every width scaled with it, ``composer.widths``) whose cost is no more than the budget in every figure asked
  (the binding one wins): :func:`widest_within`. The reference itself is the budget, unchanged;
* a figure is ``decode`` (milliseconds per token at batch 1 after ``composer.costmodel.DECODE_POINT`` tokens,
  within the model's length: what a user waits
  for) or ``train`` (seconds per training token at the device's training shape: what pretraining pays), both from
  the cost model (``composer.costmodel``) on a named device. Predicted, not measured: growth must be deterministic,
  so that the search, ``train --from-search``, ``extrapolate`` and ``info`` build the same model from the same
  words, on any machine. How far the prediction is from a measurement is the cost model's validation
  (docs/reports), and the search's cost table measures its finalists again on the machine it runs on;
* with ``P`` larger than the target ``T``, each model's deployed shape is **scaled down to** ``T`` the way the
  reference's is (:func:`scaled_to`): its depth by ``n(R_T) / n(R_P)`` and its ``d_model`` by ``d(T) / d(P)``
  (``R_X`` the reference's own layout at ``X``), so a proxy at ``T`` trains the models that would be deployed.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

from composer.accounting import non_embedding_params
from composer.config import ArchConfig
from composer.errors import ConfigError
from composer.layouts import FAMILIES, matched_depth, nearest_layout
from composer.pattern import compact_pattern, layers, parse_pattern
from composer.presets import PRESETS, get_preset, scaled_name
from composer.widths import scale_widths, width_quantum
from scaling.extrapolate import Extrapolation, OffTarget

FIGURES = ("decode", "train")
FIGURE_NAMES = {"decode": "decode ms per token at batch 1", "train": "training seconds per token"}
FIGURE_CHOICES = {"both": FIGURES, "decode": ("decode",), "train": ("train",)}
WIDTH_RANGE = 8  # d_model is looked for from one quantum up to this many times the deployed preset's
COST_TOLERANCE = 0.10
"""How far under the reference's cost a model grown to equal cost may land, in its binding figure (never over it):
its widths move in quanta, so it is the widest whose cost is within the budget, and the next quantum up is over
it. Every layout of the project's equal-cost runs lands within 9% (most within 4%); one further under (a width
step that jumps past the budget, or a layout still under it at the widest width looked at) is refused
(:class:`~scaling.extrapolate.OffTarget`), not compared "at equal cost"."""


class OverBudget(OffTarget):
    """A layout that costs more than the reference even at the narrowest width: too deep for the budget. A search
    records it as a skipped candidate with this reason; a command that grows one pattern prints it as its error."""


@dataclasses.dataclass(frozen=True)
class EqualCost:
    """Growth to equal cost (module docstring): the ``reference`` family whose cost is the budget, the preset it
    is ``deployed`` at (None: the target of each growth), the cost model's ``device``, and the ``figures`` held
    equal (``decode``, ``train`` or both)."""

    reference: str = "nemotron-h"
    deployed: str | None = None
    device: str = "cpu"
    figures: tuple[str, ...] = FIGURES

    def __post_init__(self) -> None:
        if self.reference not in FAMILIES:
            raise ConfigError(f"--equal-cost {self.reference!r} is not a published family: one of "
                              f"{', '.join(FAMILIES)} (composer families lists them)")
        if self.deployed is not None and self.deployed not in PRESETS:
            raise ConfigError(f"--deployed-at {self.deployed!r} is not a preset: one of {', '.join(PRESETS)}")
        from composer.costmodel import load_table

        table = load_table()
        if self.device not in table.devices:
            raise ConfigError(f"--cost-device {self.device!r} is not in the cost model's table: one of "
                              f"{', '.join(table.devices)}")
        table.device(self.device).warn_if_elsewhere()  # another processor's constants: said once
        if not self.figures or set(self.figures) - set(FIGURES):
            raise ConfigError(f"--equal-cost-figure must be one of {', '.join(FIGURE_CHOICES)}, got "
                              f"{','.join(self.figures)!r}")

    @classmethod
    def of(cls, reference: str | None, deployed: str | None = None, device: str | None = None,
           figure: str | None = None) -> EqualCost | None:
        """From the commands' flags (``--equal-cost``, ``--deployed-at``, ``--cost-device``,
        ``--equal-cost-figure``); None without ``--equal-cost``. ``--deployed-at`` or ``--equal-cost-figure``
        without it is a usage error: they say where and on what the cost is held equal."""
        if reference is None:
            if deployed is not None or (figure is not None and figure != "both"):
                raise ConfigError("--deployed-at and --equal-cost-figure say where and on what --equal-cost holds "
                                  "the cost equal: give --equal-cost FAMILY (e.g. --equal-cost nemotron-h), or drop "
                                  "them")
            return None
        figure = figure or "both"
        if figure not in FIGURE_CHOICES:
            raise ConfigError(f"--equal-cost-figure must be one of {', '.join(FIGURE_CHOICES)}, got {figure!r}")
        return cls(reference, deployed, device or "cpu", FIGURE_CHOICES[figure])

    @property
    def device_named(self) -> str:
        """The device as the printouts name it: a CPU entry with the processor it was fitted on, ``cpu (AMD EPYC)``
        (composer.costmodel.processor), a GPU's as it is."""
        from composer.costmodel import load_table

        processor = load_table().device(self.device).processor
        return f"{self.device} ({processor})" if processor else self.device

    def deployed_at(self, target: str) -> str:
        return self.deployed or target

    @property
    def figure_name(self) -> str:
        return next(name for name, figures in FIGURE_CHOICES.items() if figures == self.figures)

    def words(self) -> str:
        """The flags that give this rule, as a command line would (one name each: the vocabulary's)."""
        said = f"--equal-cost {self.reference}"
        said += f" --deployed-at {self.deployed}" if self.deployed else ""
        said += f" --cost-device {self.device}"
        return said + (f" --equal-cost-figure {self.figure_name}" if self.figure_name != "both" else "")

    def to_dict(self) -> dict[str, Any]:
        return {"reference": self.reference, "deployed": self.deployed, "device": self.device,
                "figures": list(self.figures)}


def family_layout_at(name: str, preset: str) -> str:
    """Family ``name``'s own layout at ``preset``: the depth it shipped at that size where it published one
    (``Family.published``: Nemotron-Flash's 24 symbols at ``llama-3.2-1b``), else whole periods of its layout at
    the depth whose non-embedding parameters come nearest the preset's (``composer families --preset``'s rule)."""
    family = FAMILIES[name]
    base = preset.partition(":")[0]
    if base in family.published:
        return family.pattern(family.published[base])
    arch = get_preset(preset).arch
    return matched_depth(family.generator, lambda pattern: non_embedding_params(arch.with_pattern(pattern)),
                         non_embedding_params(arch), family.period)


@functools.lru_cache(maxsize=64)
def reference_model(reference: str, preset: str) -> ArchConfig:
    """The model whose cost is the budget: ``reference``'s own layout at ``preset``'s widths."""
    return get_preset(preset).arch.with_pattern(family_layout_at(reference, preset))


def _prediction(arch: ArchConfig, device: str, figure: str, table):
    """The cost model's prediction behind one figure: a decode step at batch 1 at the decode point
    (``composer.costmodel.decode_point``), or a
    training step at the device's training shape."""
    from composer.costmodel import decode_point, predict_decode, predict_train

    if figure == "decode":
        return predict_decode(arch, device, context=decode_point(arch.max_seq_len), batch=1, table=table)
    if figure == "train":
        return predict_train(arch, device, table=table)
    raise ConfigError(f"unknown cost figure {figure!r}: one of {', '.join(FIGURES)}")


def figure_of(arch: ArchConfig, device: str, figure: str, table=None) -> float:
    """One cost figure of ``arch`` on ``device``, lower is better (module docstring)."""
    from composer.costmodel import load_table

    prediction = _prediction(arch, device, figure, load_table() if table is None else table)
    return prediction.ms_per_token if figure == "decode" else 1.0 / prediction.tokens_per_s


def costs_of(arch: ArchConfig, rule: EqualCost, table=None) -> dict[str, float]:
    return {figure: figure_of(arch, rule.device, figure, table) for figure in rule.figures}


@functools.lru_cache(maxsize=64)
def budget_of(rule: EqualCost, preset: str) -> dict[str, float]:
    """The reference's figures at ``preset``: what no model grown to equal cost there may exceed."""
    return costs_of(reference_model(rule.reference, preset), rule)


def assumed_constants(rule: EqualCost, arch: ArchConfig) -> list[str]:
    """The ids of the assumed (not measured or fitted) constants ``arch``'s figures under ``rule`` rest on, e.g. the
    GPUs' decode efficiency: a summary says so beside every modeled figure (issue 68)."""
    from composer.costmodel import load_table

    table = load_table()
    used = {}
    for figure in rule.figures:
        used.update(_prediction(arch, rule.device, figure, table).constants)
    return sorted({c.source for c in used.values() if table.sources.get(c.source, {}).get("kind") == "assumed"})


def describe(rule: EqualCost, target: str) -> dict[str, Any]:
    """What a search's summary and best.json say of its growth to equal cost (issue 68: the device, the size, whether
    each figure is measured or modeled, and whether a modeled figure rests on an assumed constant)."""
    from composer.costmodel import decode_point

    deployed = rule.deployed_at(target)
    reference = reference_model(rule.reference, deployed)
    budget = budget_of(rule, deployed)
    return {
        **rule.to_dict(), "deployed": deployed, "target": target, "modeled": True,
        "reference_pattern": reference.pattern, "reference_layers": reference.n_layers,
        "reference_d_model": reference.d_model, "budget": dict(budget),
        "decode_context": decode_point(reference.max_seq_len),
        "assumed_constants": assumed_constants(rule, reference),
        "device_named": rule.device_named,
    }


def describe_line(said: dict[str, Any]) -> str:
    """One line of :func:`describe`'s record."""
    figures = " and ".join(FIGURE_NAMES[figure] + (f" after {said['decode_context']:,} tokens" if figure == "decode"
                                                   else "") for figure in said["figures"])
    scaled = (f", scaled down to {said['target']} as its layout is" if said["deployed"] != said["target"] else "")
    assumed = (f"; rests on assumed constants ({', '.join(said['assumed_constants'])})"
               if said["assumed_constants"] else "; no assumed constant")
    return (f"grown to equal cost: every model is the widest whose {figures}, modeled on "
            f"{said.get('device_named', said['device'])} (cost "
            f"model{assumed}) at {said['deployed']}, is no more than {said['reference']}'s own layout's "
            f"({said['reference_layers']} layers, d_model {said['reference_d_model']}){scaled}; 'at' names each "
            "model's widths")


def widest_within(layout: str, preset: str, rule: EqualCost) -> tuple[ArchConfig, dict[str, float]]:
    """``layout`` at the largest ``d_model`` (a multiple of the width quantum, every width scaled with it) whose
    figures are all within the reference's budget at ``preset``; and those figures. Every width grows with
    ``d_model`` (``composer.widths``), so each figure does too and a bisection finds the largest that fits.
    :class:`OverBudget` where even one quantum of width costs more than the budget (the layout is too deep);
    ``OffTarget`` where the widest that fits lands more than :data:`COST_TOLERANCE` under it."""
    from composer.costmodel import load_table

    table = load_table()
    base = get_preset(preset).arch
    budget = budget_of(rule, preset)
    quantum = width_quantum(base)
    widths = range(quantum, WIDTH_RANGE * base.d_model + 1, quantum)

    @functools.cache
    def costs(d_model: int) -> dict[str, float]:
        return costs_of(scale_widths(base, d_model).with_pattern(layout), rule, table)

    def fits(d_model: int) -> bool:
        return all(costs(d_model)[figure] <= budget[figure] for figure in rule.figures)

    if not fits(widths[0]):
        over = max(rule.figures, key=lambda figure: costs(widths[0])[figure] / budget[figure])
        raise OverBudget(
            f"{compact_pattern(layout)} costs more than {rule.reference} at {preset} even at d_model {widths[0]} "
            f"({FIGURE_NAMES[over]} {costs(widths[0])[over] / budget[over]:.2f}x on {rule.device}): too many layers "
            "for that budget")
    low, high = 0, len(widths) - 1  # widths[low] fits; find the last that does
    while low < high:
        middle = (low + high + 1) // 2
        low, high = (middle, high) if fits(widths[middle]) else (low, middle - 1)
    d_model = widths[low]
    limit = binding(costs(d_model), budget)
    under = costs(d_model)[limit] / budget[limit]
    if under < 1 - COST_TOLERANCE:
        if low + 1 < len(widths):
            wider = widths[low + 1]
            beyond = f"the next width, d_model {wider}, costs {costs(wider)[limit] / budget[limit]:.2f}x"
        else:
            beyond = f"d_model {d_model} is the widest looked at ({WIDTH_RANGE}x {preset}'s)"
        raise OffTarget(f"{compact_pattern(layout)} at its widest within {rule.reference}'s cost at {preset} "
                        f"(d_model {d_model}) costs {under:.2f}x it in {FIGURE_NAMES[limit]} on {rule.device}, "
                        f"beyond the {COST_TOLERANCE:.0%} under the budget growth to equal cost allows ({beyond})")
    return scale_widths(base, d_model).with_pattern(layout), costs(d_model)


def binding(costs: dict[str, float], budget: dict[str, float]) -> str:
    """The figure closest to its budget: the one that stopped the width from growing."""
    return max(costs, key=lambda figure: costs[figure] / budget[figure])


def at_widths(pattern: str, arch: ArchConfig, preset: str, method: str, *, attention: str = "repeat",
              depth: int | None = None) -> Extrapolation:
    """``arch`` (a layout at ``preset``'s widths scaled to some ``d_model``) as the :class:`Extrapolation` every
    command prints and saves, its ``target`` the scaled preset's name (``demo-4m:d176``) so it trains and is
    costed like any other preset."""
    base = get_preset(preset).arch
    source = parse_pattern(pattern)
    size = non_embedding_params(arch)
    return Extrapolation(
        pattern=arch.pattern, source_pattern=source, method=method, rounding="nearest",
        scale=arch.d_model / base.d_model, repeats=0, target=scaled_name(preset, arch.d_model),
        source_non_embedding_params=non_embedding_params(base.with_pattern(source)),
        target_non_embedding_params=non_embedding_params(base), non_embedding_params=size, bound=0, arch=arch,
        attention=attention, depth=depth,
    )


def scaled_to(layout: str, arch: ArchConfig, rule: EqualCost, deployed: str, target: str,
              relayout=None) -> ArchConfig:
    """A deployed shape (``layout`` at ``arch``, on ``deployed``'s widths) scaled down to ``target`` the way the
    reference's is: depth by ``n(R_target) / n(R_deployed)`` (``relayout(n)`` lays the model out at ``n`` layers;
    default: ``composer.layouts.nearest_layout``, its composition and order kept), ``d_model`` by the presets' ratio,
    rounded to ``target``'s width quantum."""
    high, low = reference_model(rule.reference, deployed), reference_model(rule.reference, target)
    depth = max(1, round(len(layers(layout)) * low.n_layers / high.n_layers))
    small = relayout(depth) if relayout is not None else nearest_layout(layout, depth)
    base = get_preset(target).arch
    quantum = width_quantum(base)
    d_model = max(quantum, round(arch.d_model * base.d_model / get_preset(deployed).arch.d_model / quantum) * quantum)
    return scale_widths(base, d_model).with_pattern(small)


__all__ = [
    "COST_TOLERANCE", "FIGURES", "FIGURE_CHOICES", "FIGURE_NAMES", "EqualCost", "OverBudget", "assumed_constants",
    "at_widths", "binding", "budget_of", "costs_of", "describe", "describe_line", "family_layout_at", "figure_of",
    "reference_model", "scaled_to", "widest_within",
]
