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
