"""Known layouts: Llama and the published hybrids a search can express, enqueued as its first trials.

Why: measured in ``docs/published-hybrids.md``, a searched winner lost to Samba, Nemotron-H, Jamba and MiniMax's
7:1 ratio; a user would have done better copying one of them. A search that trains those layouts first
(``study.enqueue_trial``, so the sampler learns from them like from any other trial) can never answer worse than
the best of them under its own score, and its report says whether its answer is a known layout or a new one.

Which layouts: Llama's 1:1 alternation, the Composer paper's stacked winner ``AAMMMM``, and every family of
``composer families`` whose symbols are all among the search's ``--primitives``. A family enters in whole periods
where the depth is a multiple of its period. Otherwise it enters as its *nearest layout* at that depth (the fit
is recorded and printed):

* a family whose generator is defined at every depth (Nemotron-H: ~8% attention spread evenly) uses its own rule;
* a periodic family keeps its composition and order: each symbol's count over one period is scaled to the depth
  (largest remainders, every symbol of the period kept at least once), and each occurrence is placed at the
  quantile of that symbol's positions in the period, so attention stays where the period puts it.
"""

from __future__ import annotations

import functools
import math
from collections import Counter
from dataclasses import dataclass

from composer.layouts import FAMILIES, llama
from composer.pattern import layers

PAPER_STACKED = "AAMMMM"  # the Composer paper's 6-layer searched winner (stacked to 1B in the paper)


@dataclass(frozen=True)
class KnownLayout:
    """A known layout at the search's depth, and how it was fitted to that depth."""

    name: str
    pattern: str
    fit: str  # "whole periods", "cut to N layers" or "nearest layout at N layers: ..."


def _period(name: str) -> str:
    family = FAMILIES[name]
    return family.generator(family.period)


def nearest_layout(period: str, n_layers: int, unit: int = 1) -> str:
    """``period``'s composition and order at ``n_layers`` layers, in whole ``unit``-layer groups (a mixer + FFN
    pair stays a pair) when ``n_layers`` allows it (see the module docstring)."""
    tokens = layers(period)
    if unit > 1 and n_layers % unit == 0 and len(tokens) % unit == 0:
        units = ["".join(tokens[i:i + unit]) for i in range(0, len(tokens), unit)]
        return "".join(_resample(units, n_layers // unit))
    return "".join(_resample(tokens, n_layers))


def _resample(items: list[str], n: int) -> list[str]:
    """``n`` items keeping each distinct item's share (largest remainders, each kept at least once while room
    allows) and its place: the j-th of c copies sits at the quantile (j + 1/2) / c of its positions."""
    size, counts = len(items), Counter(items)
    order = list(dict.fromkeys(items))
    if len(order) > n:  # more distinct items than room: keep the commonest
        order = sorted(order, key=lambda item: (-counts[item], items.index(item)))[:n]
    share = {item: counts[item] * n / size for item in order}
    copies = {item: max(1, math.floor(share[item])) for item in order}
    while sum(copies.values()) > n:  # the minimum of one copy overshot: take from the largest surplus
        item = max(order, key=lambda i: (copies[i] - share[i], -items.index(i)))
        copies[item] -= 1
    by_remainder = sorted(order, key=lambda item: (-(share[item] - copies[item]), items.index(item)))
    for item in by_remainder[: n - sum(copies.values())]:
        copies[item] += 1
    placed = []
    for item in order:
        positions = [i for i, other in enumerate(items) if other == item]
        for j in range(copies[item]):
            position = positions[min(len(positions) - 1, int((j + 0.5) / copies[item] * len(positions)))]
            placed.append(((position + 0.5 + j * 1e-6) / size, items.index(item), item))
    return [item for _, _, item in sorted(placed)]


def family_at_depth(name: str, n_layers: int) -> KnownLayout:
    """Family ``name`` at ``n_layers`` layers: whole periods, its own rule, or its nearest layout."""
    family = FAMILIES[name]
    if n_layers % family.period == 0:
        return KnownLayout(name, family.generator(n_layers), "whole periods")
    if name == "nemotron-h":  # defined by its attention share, not by a period
        pattern = family.generator(n_layers)
        return KnownLayout(name, pattern, f"its own rule at {n_layers} layers "
                                          f"({pattern.count('A')} attention of {n_layers})")
    pattern = nearest_layout(_period(name), n_layers, family.unit)
    return KnownLayout(name, pattern, f"nearest layout at {n_layers} layers (period of {family.period} does not "
                                      f"fit): {dict(sorted(Counter(layers(pattern)).items()))}")


@functools.lru_cache(maxsize=256)
def layout_at_target(pattern: str, target: str, known: str | None = None,
                     attention: str = "repeat") -> tuple[str, str]:
    """The model ``pattern`` becomes at preset ``target``, and how it was made.

    A new pattern is grown by the project's extrapolator, stacked to the target's size; ``attention="keep"``
    (``composer search --attention-at-target keep``) keeps its number of attention layers instead of repeating
    them (``scaling.extrapolate``). Llama's and the paper's stacked winner, whose own rule is stacking, are
    stacked whatever ``attention`` says. A published family (``known`` names one of
    ``composer.layouts.FAMILIES``) enters in its own layout instead (issue 37): Nemotron-H's 6-layer fit ``SMSAMS``
    stacked to 18 layers holds 3 attention layers where its own rule gives about 1 in 13. Its depth is the one,
    within 3 layers of the stack's, whose non-embedding parameters come closest to the stack's, so the family is
    compared at the same size; a depth of whole periods where that range holds one (a periodic family's nearest
    layout places each symbol at its positions' quantiles, which over many periods groups them: Samba at 19
    layers would be ``SSSSSMMMMWWWWWMMMMM``)."""
    from composer.accounting import non_embedding_params
    from composer.presets import get_preset
    from scaling.extrapolate import extrapolate

    if known is None and attention == "keep":
        grown = extrapolate(pattern, target, method="auto", attention="keep")
        count = len(grown.kept_attention)
        if count:  # a pattern without attention, or of attention only, is stacked
            return grown.pattern, (f"grown to the target's size with its {count} attention "
                                   f"layer{'s' if count != 1 else ''} unrepeated")
    stacked = extrapolate(pattern, target, method="auto").pattern
    if known not in FAMILIES:
        return stacked, "stacked to the target's size"
    widths = get_preset(target).arch
    size = non_embedding_params(widths.with_pattern(stacked))
    depth = len(layers(stacked))
    candidates = {n: family_at_depth(known, n) for n in range(max(1, depth - 3), depth + 4)}
    whole = {n: layout for n, layout in candidates.items() if not layout.fit.startswith("nearest layout")}
    candidates = whole or candidates  # whole periods where the range holds them: a fit clumps a long layout
    best = min(candidates, key=lambda n: (abs(non_embedding_params(widths.with_pattern(candidates[n].pattern))
                                              - size), abs(n - depth)))
    return candidates[best].pattern, f"{known}'s own layout at {best} layers ({candidates[best].fit})"


def known_layouts(n_layers: int, primitives: list[str]) -> tuple[list[KnownLayout], dict[str, str]]:
    """The known layouts a search of ``n_layers`` over ``primitives`` (layer tokens) can express, deduplicated
    by pattern (the first name wins), and the ones it cannot, with the reason."""
    offered = set(primitives)
    candidates = [KnownLayout("llama", llama(n_layers), "1:1 alternation")]
    if n_layers % len(PAPER_STACKED) == 0:
        candidates.append(KnownLayout("composer-paper", PAPER_STACKED * (n_layers // len(PAPER_STACKED)),
                                      "whole periods"))
    else:
        candidates.append(KnownLayout("composer-paper", nearest_layout(PAPER_STACKED, n_layers),
                                      f"nearest layout at {n_layers} layers"))
    left_out: dict[str, str] = {}
    for name in FAMILIES:
        missing = sorted(set(layers(_period(name))) - offered)
        if missing:
            left_out[name] = f"needs {', '.join(missing)}, not in --primitives"
            continue
        candidates.append(family_at_depth(name, n_layers))
    chosen, seen = [], {}
    for layout in candidates:
        if set(layers(layout.pattern)) - offered:
            left_out[layout.name] = f"needs {', '.join(sorted(set(layers(layout.pattern)) - offered))}"
        elif layout.pattern in seen:
            left_out[layout.name] = f"same layout as {seen[layout.pattern]} at this depth ({layout.pattern})"
        else:
            seen[layout.pattern] = layout.name
            chosen.append(layout)
    return chosen, left_out


def depth_at_target(spec: int | str | None, target: str, flag: str = "--depth") -> int | None:
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


@functools.lru_cache(maxsize=256)
def model_at_target(pattern: str, target: str, known: str | None = None, attention: str = "repeat",
                    depth: int | None = None) -> tuple[str, str, str]:
    """The model ``pattern`` becomes at preset ``target``: ``(layout, widths, how)``, ``widths`` a preset name.

    Without ``depth``, :func:`layout_at_target` at the target's widths. With ``depth``, the layout has ``depth``
    layers and the widths are scaled until it weighs what the target does (``scaling.extrapolate.grow_to_depth``,
    a scaled preset such as ``demo-4m:d280``): a new pattern is laid out at that depth with ``attention``'s rule; a
    published family (``known``) in its own layout at that depth; so every layout of a search is compared at one
    depth and one size, and only its mixers and their order differ."""
    from scaling.extrapolate import grow_to_depth

    if depth is None:
        layout, how = layout_at_target(pattern, target, known, attention)
        return layout, target, how
    if known in FAMILIES:
        grown = grow_to_depth(family_at_depth(known, depth).pattern, target, depth)
        how = f"{known}'s own layout at {depth} layers"
    else:
        grown = grow_to_depth(pattern, target, depth, attention=attention if known is None else "repeat")
        how = f"laid out at {depth} layers" + (f" with its {len(grown.kept_attention)} attention layer(s) unrepeated"
                                               if grown.kept_attention else "")
    return grown.pattern, grown.target, f"{how}, widths scaled to d_model {grown.arch.d_model} to the target's size"


@dataclass(frozen=True)
class Growth:
    """How a searched pattern becomes the model trained and costed at a target: its attention rule (``repeat``
    or ``keep``, ``--attention-at-target``) and its depth there (None: by depth at the target's widths; N: N
    layers, widths scaled, ``--depth-at-target``). One value travels from the search's config to every place that
    grows a pattern (its trials' cost and cache, the rungs' training, the plan, the answer), so they cannot
    disagree on the model."""

    attention: str = "repeat"
    depth: int | None = None

    def model(self, pattern: str, target: str, known: str | None = None) -> tuple[str, str, str]:
        """``(layout, widths, how)``: :func:`model_at_target` under this rule."""
        return model_at_target(pattern, target, known, self.attention, self.depth)

    def layout(self, pattern: str, target: str, known: str | None = None) -> str:
        return self.model(pattern, target, known)[0]

    def arch(self, pattern: str, target: str, known: str | None = None):
        """The grown model's :class:`~composer.config.ArchConfig`: its layout at its widths."""
        from composer.presets import get_preset

        layout, widths, _ = self.model(pattern, target, known)
        return get_preset(widths).arch.with_pattern(layout)


def as_growth(rule: str | Growth | None) -> Growth:
    """``rule`` as a :class:`Growth`: an attention rule's name (``repeat``, ``keep``) grows by depth."""
    if isinstance(rule, Growth):
        return rule
    return Growth(rule or "repeat")
