"""Known layouts: Llama and the published hybrids a search can express, enqueued as its first trials.

Why: measured in ``docs/published-hybrids.md``, a searched winner lost to Samba, Nemotron-H, Jamba and MiniMax's
7:1 ratio; a user would have done better copying one of them. A search that trains those layouts first
(``study.enqueue_trial``, so the sampler learns from them like from any other trial) can never answer worse than
the best of them under its own score, and its report says whether its answer is a known layout or a new one.

Which layouts: Llama's 1:1 alternation, the Composer paper's stacked winner ``AAMMMM``, and every family of
``composer families`` whose symbols are all among the search's ``--primitives``. A family enters in whole periods
where the depth is a multiple of its period. Otherwise it enters as its *nearest layout* at that depth (the fit
is recorded and printed):

* a family whose generator is defined at every depth (``Family.every_depth``: Nemotron-H's ~8% attention spread
  evenly, Nemotron-Flash's one mixer in six) uses its own rule;
* a periodic family keeps its composition and order: each symbol's count over one period is scaled to the depth
  (largest remainders, every symbol of the period kept at least once), and each occurrence is placed at the
  quantile of that symbol's positions in the period, so attention stays where the period puts it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from composer.layouts import FAMILIES, llama, nearest_layout
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


def family_at_depth(name: str, n_layers: int) -> KnownLayout:
    """Family ``name`` at ``n_layers`` layers: whole periods, its own rule, or its nearest layout."""
    family = FAMILIES[name]
    if n_layers % family.period == 0:
        return KnownLayout(name, family.generator(n_layers), "whole periods")
    if family.every_depth and n_layers % family.unit == 0:  # a rule (an attention share), not a period
        pattern = family.generator(n_layers)
        return KnownLayout(name, pattern, f"its own rule at {n_layers} layers "
                                          f"({pattern.count('A')} attention of {n_layers})")
    pattern = nearest_layout(_period(name), n_layers, family.unit)
    return KnownLayout(name, pattern, f"nearest layout at {n_layers} layers (period of {family.period} does not "
                                      f"fit): {dict(sorted(Counter(layers(pattern)).items()))}")


def known_layouts(n_layers: int, primitives: list[str],
                  equal_cost: bool = False) -> tuple[list[KnownLayout], dict[str, str]]:
    """The known layouts a search of ``n_layers`` over ``primitives`` (layer tokens) can express, deduplicated
    by pattern (the first name wins), and the ones it cannot, with the reason. ``equal_cost``: the families
    designed at equal latency (``Family.equal_latency``) come first among the families, so that where two share a
    layout at this depth (the 3:1 and the 7:1 linear ratios are both ``DMDMAM`` at 6 layers) the one an equal-cost
    search must beat enters, and grows to its own layout at the target."""
    offered = set(primitives)
    candidates = [KnownLayout("llama", llama(n_layers), "1:1 alternation")]
    if n_layers % len(PAPER_STACKED) == 0:
        candidates.append(KnownLayout("composer-paper", PAPER_STACKED * (n_layers // len(PAPER_STACKED)),
                                      "whole periods"))
    else:
        candidates.append(KnownLayout("composer-paper", nearest_layout(PAPER_STACKED, n_layers),
                                      f"nearest layout at {n_layers} layers"))
    left_out: dict[str, str] = {}
    for name in sorted(FAMILIES, key=lambda name: equal_cost and not FAMILIES[name].equal_latency):
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
