"""Baseline layer patterns the searched architectures are compared with (docs/method.md, "Baselines").

Every generator returns a canonical pattern of exactly ``n_layers`` symbols. Two kinds:

* the paper's baselines: Llama's 1:1 alternation, striped 1:r, the Sandwich Transformer, random orders;
* published hybrid families (:data:`FAMILIES`): the layouts of hybrids that shipped (Jamba, Samba, Nemotron-H,
  Qwen3-Next, the Gated DeltaNet paper's H1, MiniMax-01's 7:1 ratio), written in this project's grammar so that a
  searched winner can be compared with them. A *layer* here is one symbol, as in Nemotron-H's and this grammar's
  counting: a published "layer" of mixer + FFN (Jamba, Samba, Qwen3-Next) is two symbols, so Jamba's 32 layers are
  ``jamba(64)``. Each generator repeats its published period and cuts it at ``n_layers``; :func:`family_pattern`
  asks for whole mixer + FFN pairs where the family has them.
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from composer.errors import ConfigError
from composer.pattern import MAX_LAYERS, layers, parse_pattern


def _check_layers(n_layers: int) -> None:
    if not isinstance(n_layers, int) or n_layers < 1:
        raise ConfigError(f"n_layers must be a positive integer, got {n_layers!r}")


def spread(n_first: int, n_second: int, first: str = "A", second: str = "M") -> str:
    """Interleave ``n_first`` of ``first`` among ``n_second`` of ``second`` as evenly as possible.

    The j-th ``first`` goes to position ``floor(j * total / n_first)``, so it leads like Llama's ``AM``
    blocks: ``spread(2, 4) == "AMMAMM"``.
    """
    total = n_first + n_second
    positions = {j * total // n_first for j in range(n_first)}
    return "".join(first if i in positions else second for i in range(total))


def segment_middles(n_layers: int, count: int) -> list[int]:
    """The positions at the middle of ``count`` equal segments of ``n_layers`` layers (Nemotron-H's rule for its
    attention layers; ``scaling.extrapolate`` places a pattern's unrepeated attention the same way): for one, the
    middle layer, ``n_layers // 2``."""
    if not 0 < count <= n_layers:
        raise ConfigError(f"cannot place {count} layers at the middles of {n_layers}")
    return [(2 * j + 1) * n_layers // (2 * count) for j in range(count)]


def llama(n_layers: int) -> str:
    """Llama's 1:1 alternation ``AMAM...`` (an odd depth ends with ``A``)."""
    _check_layers(n_layers)
    return ("AM" * n_layers)[:n_layers]


def striped(n_layers: int, ratio: int) -> str:
    """Striped 1:r: repeated blocks of one ``A`` and ``ratio`` ``M`` (the last block is cut at ``n_layers``)."""
    _check_layers(n_layers)
    if not isinstance(ratio, int) or ratio < 1:
        raise ConfigError(f"striped ratio must be a positive integer, got {ratio!r}")
    block = "A" + "M" * ratio
    return (block * (n_layers // len(block) + 1))[:n_layers]


def sandwich(n_layers: int, n_attention: int | None = None, k: int | None = None) -> str:
    """Sandwich Transformer (Press et al. 2020): ``k`` attention layers, the rest interleaved, ``k`` MLP layers.

    ``n_attention`` defaults to half the layers (rounded down); ``k`` defaults to half the smaller count, the
    middle of the range Press et al. found to help. With ``n_attention`` set from a composite pattern the
    sandwich keeps its attention:MLP ratio and only moves attention towards the bottom.
    """
    _check_layers(n_layers)
    n_attention = n_layers // 2 if n_attention is None else n_attention
    n_mlp = n_layers - n_attention
    if not 0 <= n_attention <= n_layers:
        raise ConfigError(f"n_attention must be between 0 and n_layers ({n_layers}), got {n_attention}")
    k = min(n_attention, n_mlp) // 2 if k is None else k
    if not 0 <= k <= min(n_attention, n_mlp):
        raise ConfigError(f"sandwich k must be between 0 and {min(n_attention, n_mlp)}, got {k}")
    return "A" * k + spread(n_attention - k, n_mlp - k) + "M" * k


def random_pattern(
    n_layers: int, seed: int, primitives: str = "AM", counts: dict[str, int] | None = None
) -> str:
    """A random pattern; with ``counts`` (e.g. ``{"A": 9, "M": 18}``) a random order of exactly those layers."""
    _check_layers(n_layers)
    choices = layers(parse_pattern(primitives))  # validates the symbols; "AM[AS]" offers A, M and [AS]
    rng = random.Random(seed)
    if counts is None:
        return "".join(rng.choice(choices) for _ in range(n_layers))
    if sum(counts.values()) != n_layers:
        raise ConfigError(f"counts {counts} sum to {sum(counts.values())}, not n_layers={n_layers}")
    symbols = [symbol for symbol, n in counts.items() for _ in range(n)]
    parse_pattern("".join(symbols))
    rng.shuffle(symbols)
    return "".join(symbols)


def _periodic(block: str, n_layers: int) -> str:
    _check_layers(n_layers)
    return (block * (n_layers // len(block) + 1))[:n_layers]


def jamba(n_layers: int) -> str:
    """Jamba (arXiv 2403.19887; HF ``JambaConfig``): 1 attention per 8 mixers, MoE in every other FFN slot.

    Each Jamba layer is a mixer and an FFN. Within every 8 layers the mixer at offset 4 is attention and the rest
    are Mamba (``attn_layer_period=8``, ``attn_layer_offset=4``); the FFN of every odd layer is a mixture of
    experts (``expert_layer_period=2``, ``expert_layer_offset=1``). Jamba's Mamba is Mamba-1; this grammar's
    state-space mixer is Mamba-2 (``S``), as in Jamba-1.5's successors and every SSM hybrid since.
    """
    return _periodic("SMSESMSEAMSESMSE", n_layers)


def samba(n_layers: int) -> str:
    """Samba (arXiv 2406.07522; microsoft/Samba): Mamba, MLP, sliding-window attention, MLP, repeated.

    Samba's layer-wise stack is ``Mamba-MLP-SWA-MLP``; its window is 2,048 tokens (``W``'s ``window`` option).
    """
    return _periodic("SMWM", n_layers)


def nemotron_h(n_layers: int) -> str:
    """Nemotron-H (arXiv 2504.03624): Mamba-2 and MLP layers, about 8% of all layers attention, spread evenly.

    The 8B model has 52 layers: 24 Mamba-2, 24 FFN and 4 self-attention (``hybrid_override_pattern``), so
    ``round(n_layers * 4 / 52)`` (at least one) attention layers sit at the middle of equal segments of the
    stack and the remaining slots alternate Mamba-2 and MLP, starting with Mamba-2.
    """
    _check_layers(n_layers)
    n_attention = max(1, round(n_layers * 4 / 52))
    positions = set(segment_middles(n_layers, n_attention))
    others = iter("SM" * n_layers)
    return "".join("A" if i in positions else next(others) for i in range(n_layers))


def qwen3_next(n_layers: int) -> str:
    """Qwen3-Next (HF ``Qwen3NextConfig``): 3 Gated DeltaNet : 1 attention, every FFN a mixture of experts.

    Every fourth layer is full attention (``full_attention_interval=4``), the others Gated DeltaNet; all FFNs are
    sparse MoE. Each layer is a mixer and an FFN (two symbols).
    """
    return _periodic("DEDEDEAE", n_layers)


def gdn_h1(n_layers: int) -> str:
    """Gated DeltaNet-H1 (arXiv 2412.06464, the Gated DeltaNet paper's first hybrid): Gated DeltaNet and
    sliding-window attention alternating, each followed by an MLP."""
    return _periodic("DMWM", n_layers)


def linear_7to1(n_layers: int) -> str:
    """MiniMax-01's ratio (arXiv 2501.08313): 7 linear-attention mixers, then 1 softmax attention, each followed by
    an FFN. MiniMax's linear mixer is lightning attention; its documented substitute here is Gated DeltaNet (``D``),
    and its FFNs are MoE in the paper but MLP here, so that the family isolates the mixer ratio."""
    return _periodic("DM" * 7 + "AM", n_layers)


def nemotron_flash(n_layers: int) -> str:
    """Nemotron-Flash (arXiv 2511.18890, Table 11; HF ``nvidia/Nemotron-Flash-1B`` and ``-3B`` ``layer_types``):
    Gated DeltaNet and Mamba-2 mixers alternating, an FFN after every mixer, about one mixer in six attention.

    The 1B model has 12 mixers, ``D S A S D S A S D S D S``, and the 3B 18, ``D S A S D S A S D S A S D S D S D
    S``: mixers alternate ``D`` and ``S`` from the bottom, and the j-th attention layer takes the ``D`` slot of the
    j-th block of four mixers (mixer ``4j + 2``), ``round(mixers / 6)`` of them (at least one). Each mixer is
    followed by an MLP (two symbols), so the 1B layout is ``nemotron_flash(24)``. Its searched depth and width are
    latency-optimal for its GPU; a model of it at another size keeps the rule, not the depth.
    """
    _check_layers(n_layers)
    mixers = (n_layers + 1) // 2
    n_attention = max(1, round(mixers / 6))
    attention = {4 * j + 2 for j in range(n_attention) if 4 * j + 2 < mixers} or {mixers - 1}
    slots = ["A" if i in attention else "DS"[i % 2] for i in range(mixers)]
    return "".join(mixer + "M" for mixer in slots)[:n_layers]


def linear_3to1(n_layers: int) -> str:
    """Kimi Linear's and Qwen3-Next's ratio (arXiv 2510.26692; HF ``Qwen3NextConfig``): 3 linear-attention mixers,
    then 1 full attention, each followed by an FFN. Kimi Linear's linear mixer is Kimi Delta Attention, a gated
    delta rule with finer gates, and Qwen3-Next's is Gated DeltaNet (``D`` for both here); both use MoE FFNs,
    plain MLPs here, so the family isolates the 3:1 ratio (``qwen3-next`` keeps the MoE)."""
    return _periodic("DMDMDMAM", n_layers)


BASELINES = {
    "llama": llama,
    "striped": striped,
    "sandwich": sandwich,
    "random": random_pattern,
}


@dataclass(frozen=True)
class Family:
    """A published hybrid's layout: its generator, where the layout comes from, and its granularity.

    ``unit``: the symbols a depth must keep whole (2: mixer + FFN pairs); ``period``: the symbols of one full
    repeat of the published layout. A depth chosen to match a size (:func:`family_pattern`) is whole periods, so
    the published ratios hold exactly; a depth the user names needs only whole units."""

    name: str
    generator: Callable[[int], str]
    unit: int
    period: int
    source: str
    fact: str  # the published fact the generator encodes, for listings
    # preset -> the depth the family shipped at that size (Nemotron-Flash's 1B and 3B), where it published one: its
    # own rule for that size, used instead of the depth nearest the preset's parameters (composer.presets)
    published: dict[str, int] = dataclasses.field(default_factory=dict, hash=False, compare=False)
    # its generator is a rule defined at every depth (an attention share spread evenly), not a period cut short: a
    # depth that is not whole periods takes the rule, not the nearest layout (search.known.family_at_depth)
    every_depth: bool = False
    # designed at equal latency (Nemotron-Flash's search; Kimi Linear's 3:1): an equal-cost search's floor, entered
    # before the others where two families share a layout at the search's depth (search.known.known_layouts)
    equal_latency: bool = False

    def pattern(self, n_layers: int) -> str:
        if not isinstance(n_layers, int) or isinstance(n_layers, bool) or n_layers < self.unit \
                or n_layers % self.unit or n_layers > MAX_LAYERS:
            whole = "a positive multiple of 2 (whole mixer + FFN pairs)" if self.unit == 2 else "a positive number"
            raise ConfigError(f"{self.name} needs a depth that is {whole} up to {MAX_LAYERS}, got {n_layers!r}: "
                              f"e.g. {self.name}:{4 * self.period}")
        return self.generator(n_layers)


FAMILIES: dict[str, Family] = {family.name: family for family in (
    Family("jamba", jamba, 2, 16, "arXiv 2403.19887; HF JambaConfig",
           "1 attention : 7 Mamba (attention at offset 4 of each 8), MoE in every other FFN"),
    Family("samba", samba, 2, 4, "arXiv 2406.07522; microsoft/Samba", "Mamba, MLP, SWA, MLP repeated"),
    Family("nemotron-h", nemotron_h, 1, 13, "arXiv 2504.03624 (Nemotron-H 8B: 24 Mamba-2 + 24 FFN + 4 attention)",
           "Mamba-2 and MLP, ~8% of layers attention spread evenly", every_depth=True),
    Family("qwen3-next", qwen3_next, 2, 8, "HF Qwen3NextConfig (full_attention_interval=4)",
           "3 Gated DeltaNet : 1 attention, MoE FFNs"),
    Family("gdn-h1", gdn_h1, 2, 4, "arXiv 2412.06464 (Gated DeltaNet-H1)",
           "Gated DeltaNet and SWA alternating, with MLPs"),
    Family("linear-7to1", linear_7to1, 2, 16, "arXiv 2501.08313 (MiniMax-01's ratio; Gated DeltaNet for lightning)",
           "7 linear-attention (Gated DeltaNet) : 1 attention, with MLPs"),
    Family("nemotron-flash", nemotron_flash, 2, 24, "arXiv 2511.18890 (Nemotron-Flash 1B: 12 mixers, 2 attention)",
           "Gated DeltaNet and Mamba-2 alternating, 1 in 6 mixers attention, an MLP after each",
           published={"llama-3.2-1b": 24, "llama-3.2-3b": 36}, every_depth=True, equal_latency=True),
    Family("linear-3to1", linear_3to1, 2, 8, "arXiv 2510.26692 (Kimi Linear's 3:1; Qwen3-Next's ratio with MLPs)",
           "3 linear-attention (Gated DeltaNet) : 1 attention, with MLPs", equal_latency=True),
)}


def nearest_layout(period: str, n_layers: int, unit: int = 1) -> str:
    """``period``'s composition and order at ``n_layers`` layers, in whole ``unit``-layer groups (a mixer + FFN
    pair stays a pair) when ``n_layers`` allows it (search.known's docstring: each item's share and place kept)."""
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


def get_family(name: str) -> Family:
    try:
        return FAMILIES[name]
    except KeyError:
        raise ConfigError(f"unknown hybrid family {name!r}; choose one of: {', '.join(FAMILIES)}") from None


def matched_depth(pattern_of: Callable[[int], str], size_of: Callable[[str], int], target: int, step: int = 1) -> str:
    """``pattern_of(n)`` at the depth ``n`` (a multiple of ``step``) whose ``size_of`` is nearest ``target``; the
    shallower on a tie. Sizes must grow with depth, so the search stops at the first depth at or above target."""
    best_pattern, best_gap = None, None
    n = step
    while n <= MAX_LAYERS:
        pattern = pattern_of(n)
        size = size_of(pattern)
        gap = abs(size - target)
        if best_gap is None or gap < best_gap:
            best_pattern, best_gap = pattern, gap
        if size >= target:
            break
        n += step
    return best_pattern
