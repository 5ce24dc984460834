"""The layout classes the cost model's errors are reported by.

A pooled error hides where a model misses: on this CPU the layers whose kernels run a recurrent scan (``S``'s SSD
scan, ``D``'s delta rule) were over-predicted by 37-46% while attention and MLP stacks were within 20%
(docs/reports/layout-cost-cpu-2026-11-29.md), and a pool of mostly the latter reported the former as fine. So
every error summary is also given per class, and a goal must hold in each.

The class of a layout is decided by its token mixers (a layer with an inference cache: attention, sliding
window, the state-space and linear-attention layers; an MLP mixes no tokens): ``S/D-heavy`` when at least half
of them keep a fixed recurrent state (``S``, ``D``: a cache of fixed size, no keys and values per token), else
``A/M-heavy``. One function, so a benchmark, a report and its test cannot classify a layout differently.
"""

from __future__ import annotations

from composer.config import ArchConfig
from primitives.registry import REGISTRY

AM_HEAVY = "A/M-heavy"
SD_HEAVY = "S/D-heavy"
LAYOUT_CLASSES = (AM_HEAVY, SD_HEAVY)


def mixer_counts(arch: ArchConfig) -> tuple[int, int]:
    """(token mixers, of which keep a fixed recurrent state) among ``arch``'s layers."""
    configs = arch.primitive_configs()
    mixers = state = 0
    for symbol, n in arch.counts.items():
        spec = REGISTRY.get(symbol).inference_cache(configs[symbol])
        if spec.bytes_per_token or spec.fixed_bytes:
            mixers += n
            if spec.fixed_bytes and not spec.bytes_per_token:
                state += n
    return mixers, state


def layout_class(arch: ArchConfig) -> str:
    """``S/D-heavy`` when at least half of ``arch``'s token mixers keep a fixed recurrent state, else
    ``A/M-heavy`` (a stack of MLPs only, mixing no tokens, is ``A/M-heavy``)."""
    mixers, state = mixer_counts(arch)
    return SD_HEAVY if mixers and 2 * state >= mixers else AM_HEAVY


__all__ = ["AM_HEAVY", "LAYOUT_CLASSES", "SD_HEAVY", "layout_class", "mixer_counts"]
