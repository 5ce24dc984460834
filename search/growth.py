"""How a searched pattern becomes the model trained at a target: one function, :func:`grow`, for every command.

Why one: a search scores each pattern as the model it grows to at the target (its cache, cost and recall at the
target; its last rungs train it there), so whatever trains or prints the answer afterwards must build that same
model. When the rule lived in two places (a family's own layout here, ``scaling.extrapolate`` with a rule there),
``composer train --from-search`` trained Nemotron-H's own 16-layer layout while ``extrapolate`` and ``pipeline``
stacked its 6-layer fit to ``(SMSAMS)x3``, a model the search never scored (issue 60). Now ``train``,
``extrapolate``, ``pipeline``, ``transfer``, the search's trials, cost and recall checks, and ``--plan`` all call
:func:`grow`, through :class:`Growth` where a search's rule travels as one value. What it returns, :class:`Grown`,
is the one currency of a grown model: made once, passed whole, stored in a trial as one attribute (:data:`GROWN`),
never rebuilt from a preset's name and a layout string by whoever needs it next (issue 69).

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
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from composer.layouts import FAMILIES
from composer.pattern import layers
from search.known import family_at_depth

if TYPE_CHECKING:
    from composer.config import ArchConfig
    from scaling.equal_cost import EqualCost
    from scaling.extrapolate import Extrapolation

# how a grown model was matched to its target (Grown.by)
BY_PARAMETERS = "parameters"  # grown by depth at the target's widths to its non-embedding parameters
BY_DEPTH = "depth"  # laid out at a chosen depth, its widths scaled to the target's non-embedding parameters
BY_COST = "cost"  # at the widest widths within a reference family's cost (scaling.equal_cost)
GROWN = "grown"  # the one trial attribute (and lm evaluation detail) naming the model a pattern grew to
# the attributes that named it before GROWN, read where a study written by older code is resumed or reported:
# (layout, widths) of a trial's model at the target, and of the model an lm evaluation trained
LEGACY_ATTRIBUTES = (("target_pattern", "target_widths"), ("trained_pattern", "widths"))


@dataclass(frozen=True)
class Grown:
    """The model a searched pattern becomes at a target, made once by the growth rule (:func:`grow`) and passed as
    it is, never rebuilt from its names: to a search's trials (their cost and cache), its rungs' training, the
    plan, the answer and every command given ``--from-search``.

    ``layout`` at ``widths`` (a preset: the target's, or a scaled one such as ``demo-4m:d280`` where the widths were
    grown), how it was matched to the target (``by``: :data:`BY_PARAMETERS`, :data:`BY_DEPTH` or :data:`BY_COST`)
    and, in words, how it was made (``how``). ``cost``: grown to equal cost, the reference, where and on what, the
    budget and this model's figures, the binding one, and its deployed shape where that is larger than the target;
    None otherwise. ``extrapolation``: the full accounting of the growth (``composer extrapolate`` prints it);
    None for a model read back from a trial (:meth:`from_record`). A trial stores it as one attribute
    (:data:`GROWN`, :meth:`record`)."""

    layout: str
    widths: str
    by: str
    how: str
    cost: dict | None = None
    extrapolation: Extrapolation | None = field(default=None, compare=False, repr=False)

    @functools.cached_property
    def arch(self) -> ArchConfig:
        """Its :class:`~composer.config.ArchConfig`: ``layout`` at ``widths``."""
        if self.extrapolation is not None:
            return self.extrapolation.arch
        from composer.presets import get_preset

        return get_preset(self.widths).arch.with_pattern(self.layout)

    @property
    def depth(self) -> int:
        return len(layers(self.layout))

    @property
    def target(self) -> str:
        """The preset it was grown to: its widths' preset, before any scaling (``demo-4m`` of ``demo-4m:d280``)."""
        return self.widths.partition(":")[0]

    @functools.cached_property
    def non_embedding_params(self) -> int:
        from composer.accounting import non_embedding_params

        return non_embedding_params(self.arch)

    @functools.cached_property
    def params(self) -> int:
        """Every parameter, the embedding and the LM head included: what a model grown by width carries beyond the
        non-embedding size it was matched at (a wider model has a wider embedding)."""
        from composer.accounting import total_params

        return total_params(self.arch)

    @functools.cached_property
    def target_sizes(self) -> tuple[int, int]:
        """The target preset's own ``(non-embedding, total)`` parameters (``composer extrapolate --params``: the
        non-embedding size asked for)."""
        from composer.accounting import non_embedding_params, total_params
        from composer.presets import get_preset

        own = get_preset(self.target).arch
        asked = self.extrapolation.target_non_embedding_params if self.extrapolation is not None else None
        return asked or non_embedding_params(own), total_params(own)

    def sizes(self) -> str:
        """Its parameters with and without the embedding and head, beside the target's: "1.63B parameters with
        embeddings and head, 975.61M without, against llama-3.2-1b's 1.24B and 973.15M". A comparison "at the
        target's size" matches the non-embedding count; the totals say what else differs (issue 69)."""
        from composer.accounting import format_count

        non_embedding, total = self.target_sizes
        return (f"{format_count(self.params)} parameters with embeddings and head, "
                f"{format_count(self.non_embedding_params)} without, against {self.target}'s {format_count(total)} "
                f"and {format_count(non_embedding)}")

    def record(self) -> dict[str, Any]:
        """What a trial stores of it (:data:`GROWN`): JSON, read back by :meth:`from_record`."""
        return {"layout": self.layout, "widths": self.widths, "by": self.by, "how": self.how, "depth": self.depth,
                "non_embedding_params": self.non_embedding_params, "params": self.params,
                **({"cost": self.cost} if self.cost is not None else {})}

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> Grown:
        return cls(record["layout"], record["widths"], record.get("by", BY_PARAMETERS), record.get("how", ""),
                   record.get("cost"))

    @classmethod
    def stored_in(cls, attrs: dict[str, Any], widths: str) -> Grown | None:
        """The model a stored trial's (or leaderboard row's, or lm evaluation's details') pattern grew to: its
        :data:`GROWN` record; in a study written before that attribute, its layout and widths under their old
        names (:data:`LEGACY_ATTRIBUTES`), at ``widths`` (the target's) where none was stored; None where it names
        none (a trial skipped before it grew, an evaluation at the search's widths)."""
        if attrs.get(GROWN):
            return cls.from_record(attrs[GROWN])
        for layout_key, widths_key in LEGACY_ATTRIBUTES:
            if attrs.get(layout_key):
                at = attrs.get(widths_key) or widths
                return cls(attrs[layout_key], at, BY_PARAMETERS if ":" not in at else BY_DEPTH,
                           "recorded before the growth was stored whole")
        return None

    @staticmethod
    def layout_in(attrs: dict[str, Any]) -> str | None:
        """The layout of the model stored in ``attrs`` (:meth:`stored_in`), where its widths are not needed."""
        if attrs.get(GROWN):
            return attrs[GROWN]["layout"]
        return next((attrs[layout_key] for layout_key, _ in LEGACY_ATTRIBUTES if attrs.get(layout_key)), None)


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
    return _made(grown.extrapolation, f"{grown.how}; {dropped}", grown.by) if dropped else grown


def _made(extrapolation: Extrapolation, how: str, by: str, cost: dict | None = None) -> Grown:
    """The :class:`Grown` of a growth's full accounting; one grown by width says its sizes beside the target's in
    ``how`` (a wider model carries a wider embedding: depth 12 at ``llama-3.2-1b`` is 1.63B parameters against the
    preset's 1.24B at the same non-embedding size)."""
    grown = Grown(extrapolation.pattern, extrapolation.target, by, how, cost, extrapolation)
    if by == BY_PARAMETERS:
        return grown
    return Grown(grown.layout, grown.widths, by, f"{how}; {grown.sizes()}", cost, extrapolation)


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
        return _made(grown, f"{how}, widths scaled to d_model {grown.arch.d_model} to the target's size", BY_DEPTH)
    if known is None and attention == "keep":
        grown = extrapolate(pattern, target, method=method, attention="keep", target_params=target_params,
                            rounding=rounding)
        count = len(grown.kept_attention)
        if count:  # a pattern without attention, or of attention only, is stacked
            return _made(grown, f"grown to the target's size with its {count} attention "
                                f"layer{'s' if count != 1 else ''} unrepeated", BY_PARAMETERS)
    stacked = extrapolate(pattern, target, method=method, target_params=target_params, rounding=rounding)
    if known not in FAMILIES:
        return _made(stacked, "stacked to the target's size", BY_PARAMETERS)
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
        how += (f", then widths to {rule.reference}'s cost at {deployed} on {rule.device_named} (cost model): d_model "
                f"{arch.d_model}, {FIGURE_NAMES[limit]} {costs[limit] / budget[limit]:.2f}x {rule.reference}'s")
    record = {**rule.to_dict(), "deployed": deployed, "budget": dict(budget), "costs": costs,
              "binding": binding(costs, budget), "deployed_pattern": arch.pattern, "deployed_d_model": arch.d_model}
    if deployed != target:
        arch = scaled_to(arch.pattern, arch, rule, deployed, target, relayout)
        how += f"; scaled to {target} as {rule.reference}'s is: {arch.n_layers} layers, d_model {arch.d_model}"
    grown = at_widths(pattern, arch, target, "equal-cost", attention=attention, depth=depth)
    return _made(grown, how, BY_COST, record)


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
    return _made(given_layout(pattern, candidates[best].pattern, target, "family"), how, BY_PARAMETERS)


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
        """The model ``pattern`` (``known``: the known layout it is) becomes at ``target`` under this rule."""
        return grow(pattern, target, known, self.attention, self.depth, equal_cost=self.equal_cost)

    @classmethod
    def of_answer(cls, answer: dict[str, Any], target: str, *, attention: str | None = None,
                  depth: int | str | None = None, equal_cost: EqualCost | None = None) -> Growth:
        """The rule a finished search (``answer``: ``search.results.answer_of``) grew its patterns by, at
        ``target``: its ``--attention-at-target``, ``--depth-at-target`` and ``--equal-cost``, unless
        ``attention``, ``depth`` or ``equal_cost`` says otherwise."""
        from scaling.equal_cost import EqualCost

        depth = answer.get("depth_at_target") if depth is None else depth
        if equal_cost is None and answer.get("equal_cost_rule"):
            said = answer["equal_cost_rule"]
            equal_cost = EqualCost.of(said["equal_cost"], said.get("deployed_at"), said.get("cost_device"),
                                      said.get("equal_cost_figure"))
        return cls(attention or answer.get("attention_at_target") or "repeat", depth_at_target(depth, target),
                   equal_cost)
