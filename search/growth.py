"""How a searched pattern becomes the model trained at a target: one function, :func:`grow`, for every command.

Why one: a search scores each pattern as the model it grows to at the target (its cache, cost and recall at the
target; its last rungs train it there), so whatever trains or prints the answer afterwards must build that same
model. When the rule lived in two places (a family's own layout here, ``scaling.extrapolate`` with a rule there),
``composer train --from-search`` trained Nemotron-H's own 16-layer layout while ``extrapolate`` and ``pipeline``
stacked its 6-layer fit to ``(SMSAMS)x3``, a model the search never scored (issue 60). Now ``train``,
``extrapolate``, ``pipeline``, ``transfer``, the search's trials, cost and recall checks, and ``--plan`` all call
:func:`grow`, through :class:`Growth` where a search's rule travels as one value.

The rule:

* a new pattern grows by depth at the target's widths (``scaling.extrapolate``: stacked or stretched to the
  target's non-embedding size); ``attention="keep"`` keeps its number of attention layers instead of repeating
  them (a pattern without attention, or of attention only, is grown whole);
* Llama's 1:1 alternation and the paper's stacked winner, whose own rule is stacking, are stacked whatever
  ``attention`` says;
* a published family (``known`` names one of ``composer.layouts.FAMILIES``) enters in its own layout (issue 37):
  Nemotron-H's 6-layer fit ``SMSAMS`` stacked to 18 layers holds 3 attention layers where its own rule gives about
  1 in 13. Its depth is the one, within 3 layers of the stack's, whose non-embedding parameters come closest to
  the stack's, so the family is compared at the same size; a depth of whole periods where that range holds one;
* with ``depth`` (``--depth-at-target``), the layout has that many layers and the widths are scaled
  until it weighs what the target does (``scaling.extrapolate.grow_to_depth``, a scaled preset such as
  ``demo-4m:d280``); a family in its own layout at that depth;
* with ``equal_cost`` (``--equal-cost FAMILY``), the layout is the one the rule above gives (at the preset the model
  is deployed at, ``--deployed-at``), and the widths are the widest whose cost on ``--cost-device`` is no more
  than FAMILY's own layout's there (``scaling.equal_cost``): loss then ranks models of equal cost. A deployed
  preset larger than the target is scaled down to it as the reference's own layout is.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING

from composer.layouts import FAMILIES
from composer.pattern import layers
from search.known import family_at_depth

if TYPE_CHECKING:
    from composer.config import ArchConfig
    from scaling.equal_cost import EqualCost
    from scaling.extrapolate import Extrapolation


@dataclass(frozen=True)
class Grown:
    """A searched pattern's model at a target: the full accounting (``extrapolation``: layout, widths, sizes) and
    one line saying how it was made."""

    extrapolation: Extrapolation
    how: str
    # grown to equal cost (scaling.equal_cost): the reference, where and on what, the budget and this model's
    # figures, the binding one, and its deployed shape where that is larger than the target; None: to equal size
    cost: dict | None = None

    @property
    def layout(self) -> str:
        return self.extrapolation.pattern

    @property
    def widths(self) -> str:
        """The preset its widths are: the target, or a scaled preset (``demo-4m:d280``) when grown by width."""
        return self.extrapolation.target

    @property
    def arch(self) -> ArchConfig:
        return self.extrapolation.arch


def dropped_layers(pattern: str, layout: str, target: str) -> str | None:
    """What a pattern lost growing to ``layout`` at preset ``target`` when that has fewer layers, e.g. "one layer
    (M) dropped to fit tiny's size" (``AAMMMM`` at ``tiny``: the target weighs less than the 6-layer pattern, so
    stacking keeps 0.56 of each run, rounded up); None where nothing was dropped. :func:`grow` says it in its
    ``how``, the search's summary beside the model each score was trained on (:func:`grown_line`)."""
    from collections import Counter

    before, after = layers(pattern), layers(layout)
    if len(after) >= len(before):
        return None
    fewer = Counter(before) - Counter(after)
    count = len(before) - len(after)
    which = ", ".join(f"{n} {symbol}" if n > 1 else symbol for symbol, n in fewer.items())
    return f"{'one layer' if count == 1 else f'{count} layers'} ({which}) dropped to fit {target}'s size"


def grown_line(pattern: str, layout: str, target: str) -> str | None:
    """"AAMMMM grows to AAMMM at tiny: one layer (M) dropped to fit tiny's size", or None where ``layout`` has as
    many layers as ``pattern`` or more (:func:`dropped_layers`), or was laid out at a depth asked for
    (``--depth-at-target``: ``target`` a scaled preset such as ``demo-4m:d280``)."""
    from composer.presets import PRESETS

    dropped = dropped_layers(pattern, layout, target) if target in PRESETS else None
    return f"{pattern} grows to {layout} at {target}: {dropped}" if dropped else None


@functools.lru_cache(maxsize=16_384)  # a search's space (4,096 patterns) under each rule
def grow(pattern: str, target: str, known: str | None = None, attention: str = "repeat", depth: int | None = None,
         *, target_params: int | None = None, method: str = "auto", rounding: str = "ceil",
         equal_cost: EqualCost | None = None) -> Grown:
    """The model ``pattern`` (``known``: the known layout it is, if any) becomes at preset ``target`` under
    ``attention`` (``repeat``/``keep``) and ``depth`` (None: by depth at the target's widths); the module docstring
    gives the rule. ``target_params``, ``method`` and ``rounding`` are ``composer extrapolate``'s options for a new
    pattern grown by depth (a search grows with their defaults). ``equal_cost``: the widths are then the widest
    within the reference family's cost instead of its size (:func:`_grow_to_cost`)."""
    if equal_cost is not None:
        if target_params is not None:
            from composer.errors import ConfigError

            raise ConfigError("--params sets the size a model grows to, --equal-cost its cost: give one of them")
        return _grow_to_cost(pattern, target, known, attention, depth, equal_cost)
    grown = _grow(pattern, target, known, attention, depth, target_params, method, rounding)
    dropped = None if depth is not None else dropped_layers(pattern, grown.layout, grown.widths)  # depth: as asked
    return Grown(grown.extrapolation, f"{grown.how}; {dropped}") if dropped else grown


def _grow(pattern: str, target: str, known: str | None, attention: str, depth: int | None, target_params: int | None,
          method: str, rounding: str) -> Grown:
    from scaling.extrapolate import extrapolate, grow_to_depth

    if depth is not None:
        if known in FAMILIES:
            grown = grow_to_depth(family_at_depth(known, depth).pattern, target, depth, target_params=target_params)
            how = f"{known}'s own layout at {depth} layers"
        else:
            grown = grow_to_depth(pattern, target, depth, attention=attention if known is None else "repeat",
                                  target_params=target_params)
            how = f"laid out at {depth} layers" + (
                f" with its {len(grown.kept_attention)} attention layer(s) unrepeated" if grown.kept_attention else "")
        return Grown(grown, f"{how}, widths scaled to d_model {grown.arch.d_model} to the target's size")
    if known is None and attention == "keep":
        grown = extrapolate(pattern, target, method=method, attention="keep", target_params=target_params,
                            rounding=rounding)
        count = len(grown.kept_attention)
        if count:  # a pattern without attention, or of attention only, is stacked
            return Grown(grown, f"grown to the target's size with its {count} attention "
                                f"layer{'s' if count != 1 else ''} unrepeated")
    stacked = extrapolate(pattern, target, method=method, target_params=target_params, rounding=rounding)
    if known not in FAMILIES:
        return Grown(stacked, "stacked to the target's size")
    return _family_at_size(pattern, target, known, stacked)


def _grow_to_cost(pattern: str, target: str, known: str | None, attention: str, depth: int | None,
                  rule: EqualCost) -> Grown:
    """Growth to equal cost (``scaling.equal_cost``): the layout the rule gives at the deployed preset (a family's
    own layout there, or at ``depth``; a new pattern by depth at its widths, or laid out at ``depth``), at the
    widest ``d_model`` within the reference's cost there; scaled down to ``target`` where deployed is larger. The
    reference family itself is the budget, as it is."""
    from composer.errors import ConfigError
    from composer.presets import get_preset
    from scaling.equal_cost import (
        FIGURE_NAMES,
        at_widths,
        binding,
        budget_of,
        family_layout_at,
        scaled_to,
        widest_within,
    )

    deployed = rule.deployed_at(target)
    if depth is not None and deployed != target:
        raise ConfigError(f"--depth-at-target sets the depth at {target}, --deployed-at {deployed} the size cost is "
                          f"taken at: give one of them (or --deployed-at {target})")
    budget = budget_of(rule, deployed)
    relayout = _relayout(pattern, known, attention, deployed)  # the layout at n layers, by the growth rule
    if known == rule.reference and depth is None:
        layout = family_layout_at(known, deployed)
        arch, costs = get_preset(deployed).arch.with_pattern(layout), dict(budget)
        how = f"{known}'s own layout at {len(layers(layout))} layers at {deployed}: the reference whose cost the " \
              "others are grown to"
    else:
        if known in FAMILIES:
            layout = relayout(depth) if depth else family_layout_at(known, deployed)
            how = f"{known}'s own layout at {len(layers(layout))} layers"
        elif depth is not None:
            layout, how = relayout(depth), f"laid out at {depth} layers"
        else:
            by_size = _grow(pattern, deployed, known, attention, None, None, "auto", "ceil")
            layout, how = by_size.layout, by_size.how.replace("the target's size", f"{deployed}'s size")
            if by_size.extrapolation.method == "stretch":  # a long pattern: stacked to that depth instead, so the
                # deployed shape and the one scaled down from it (relayout) keep its order, run for run
                layout = relayout(len(layers(layout)))
                how = f"stacked to {deployed}'s depth by size ({len(layers(layout))} layers)"
        arch, costs = widest_within(layout, deployed, rule)
        limit = binding(costs, budget)
        how += (f", then widths to {rule.reference}'s cost at {deployed} on {rule.device} (cost model): d_model "
                f"{arch.d_model}, {FIGURE_NAMES[limit]} {costs[limit] / budget[limit]:.2f}x {rule.reference}'s")
    record = {**rule.to_dict(), "deployed": deployed, "budget": dict(budget), "costs": costs,
              "binding": binding(costs, budget), "deployed_pattern": arch.pattern, "deployed_d_model": arch.d_model}
    if deployed != target:
        arch = scaled_to(arch.pattern, arch, rule, deployed, target, relayout)
        how += f"; scaled to {target} as {rule.reference}'s is: {arch.n_layers} layers, d_model {arch.d_model}"
    grown = at_widths(pattern, arch, target, "equal-cost", attention=attention, depth=depth)
    return Grown(grown, how, record)


def _relayout(pattern: str, known: str | None, attention: str, target: str):
    """``n -> layout``: ``pattern`` at ``n`` layers under its growth rule (a family's own layout at ``n``; a pattern
    stacked whole with a remainder copy, its full attention kept at the middles under ``keep``), so a deployed
    shape scaled down to a smaller target keeps the structure it grew with."""
    from composer.presets import get_preset
    from scaling.extrapolate import full_attention_layers, pattern_at_depth

    if known in FAMILIES:
        return lambda n: family_at_depth(known, n).pattern
    rule = attention if known is None else "repeat"  # Llama and the paper's winner are stacked whatever it says
    kept = full_attention_layers(get_preset(target).arch.with_pattern(pattern)) if rule == "keep" else []
    return lambda n: pattern_at_depth(pattern, n, rule, kept)


def _family_at_size(pattern: str, target: str, known: str, stacked: Extrapolation) -> Grown:
    """Family ``known`` in its own layout at the depth, within 3 layers of ``stacked``'s, nearest its size."""
    from composer.accounting import non_embedding_params
    from scaling.extrapolate import given_layout

    widths = stacked.arch
    depth = len(layers(stacked.pattern))
    candidates = {n: family_at_depth(known, n) for n in range(max(1, depth - 3), depth + 4)}
    whole = {n: layout for n, layout in candidates.items() if not layout.fit.startswith("nearest layout")}
    candidates = whole or candidates  # whole periods where the range holds them: a fit clumps a long layout
    best = min(candidates, key=lambda n: (abs(non_embedding_params(widths.with_pattern(candidates[n].pattern))
                                              - stacked.non_embedding_params), abs(n - depth)))
    how = f"{known}'s own layout at {best} layers ({candidates[best].fit})"
    return Grown(given_layout(pattern, candidates[best].pattern, target, "family"), how)


def known_growth_note(pattern: str, known: str | None, attention: str) -> str | None:
    """Why ``pattern``, a known layout the search entered, grows other than by ``attention`` (:func:`grow`'s
    rule), for the lines that say how a pattern grew; None for a new pattern, or a known one the rule grows as
    it is."""
    if known in FAMILIES:
        return (f"{pattern} is the search's known layout {known}: grown in {known}'s own layout at the target, as "
                "the search trained it")
    if known is not None and attention == "keep":
        return f"{pattern} is the search's known layout {known}: stacked, as the search grew it"
    return None


def layout_at_target(pattern: str, target: str, known: str | None = None,
                     attention: str = "repeat") -> tuple[str, str]:
    """``(layout, how)`` of :func:`grow` by depth at the target's widths."""
    grown = grow(pattern, target, known, attention)
    return grown.layout, grown.how


def model_at_target(pattern: str, target: str, known: str | None = None, attention: str = "repeat",
                    depth: int | None = None, equal_cost: EqualCost | None = None) -> tuple[str, str, str]:
    """``(layout, widths, how)`` of :func:`grow`, ``widths`` a preset name."""
    grown = grow(pattern, target, known, attention, depth, equal_cost=equal_cost)
    return grown.layout, grown.widths, grown.how


def depth_at_target(spec: int | str | None, target: str, flag: str = "--depth-at-target") -> int | None:
    """``--depth-at-target``'s value as a number of layers: a number, or a published family's name for that
    family's own depth at ``target`` (its layout at the target's size, ``composer.presets.family_architecture``:
    Nemotron-H is 13 layers at ``demo-4m``, 26 at ``llama-3.2-1b``), so a layout can be compared at a family's
    depth. None: grown by depth at the target's widths, as before."""
    from composer.errors import ConfigError
    from composer.presets import family_architecture, get_preset

    if spec is None or isinstance(spec, int):
        return spec
    text = str(spec).strip()
    if text.isdigit():
        return int(text)
    if text in FAMILIES:
        return family_architecture(text, get_preset(target).arch).n_layers
    raise ConfigError(f"{flag} {spec!r} is neither a number of layers nor a family ({', '.join(FAMILIES)}): "
                      f"give e.g. {flag} 16 or {flag} nemotron-h")


@dataclass(frozen=True)
class Growth:
    """A search's growth rule as one value: its attention rule (``repeat`` or ``keep``, ``--attention-at-target``),
    its depth at the target (None: by depth at the target's widths; N: N layers, widths scaled,
    ``--depth-at-target``) and what the widths are matched to (None: the target's size; an
    ``scaling.equal_cost.EqualCost``: a reference family's cost, ``--equal-cost``). It travels from the search's
    config to every place that grows a pattern (its trials' cost and cache, the rungs' training, the plan, the
    answer, the commands given ``--from-search``), so they cannot disagree on the model."""

    attention: str = "repeat"
    depth: int | None = None
    equal_cost: EqualCost | None = None  # grown to a reference family's cost, not the target's size

    def grow(self, pattern: str, target: str, known: str | None = None) -> Grown:
        return grow(pattern, target, known, self.attention, self.depth, equal_cost=self.equal_cost)

    def model(self, pattern: str, target: str, known: str | None = None) -> tuple[str, str, str]:
        """``(layout, widths, how)``: :func:`grow` under this rule."""
        grown = self.grow(pattern, target, known)
        return grown.layout, grown.widths, grown.how

    def layout(self, pattern: str, target: str, known: str | None = None) -> str:
        return self.grow(pattern, target, known).layout

    def arch(self, pattern: str, target: str, known: str | None = None) -> ArchConfig:
        """The grown model's :class:`~composer.config.ArchConfig`: its layout at its widths."""
        return self.grow(pattern, target, known).arch


def as_growth(rule: str | Growth | None) -> Growth:
    """``rule`` as a :class:`Growth`: an attention rule's name (``repeat``, ``keep``) grows by depth."""
    if isinstance(rule, Growth):
        return rule
    return Growth(rule or "repeat")
