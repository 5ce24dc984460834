"""Baseline layer patterns the searched architectures are compared with (method.md, "Baselines").

Every generator returns a canonical pattern of exactly ``n_layers`` symbols.
"""

from __future__ import annotations

import random

from composer.errors import ConfigError
from composer.pattern import parse_pattern


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
    parse_pattern(primitives)  # validates the symbols
    rng = random.Random(seed)
    if counts is None:
        return "".join(rng.choice(primitives) for _ in range(n_layers))
    if sum(counts.values()) != n_layers:
        raise ConfigError(f"counts {counts} sum to {sum(counts.values())}, not n_layers={n_layers}")
    symbols = [symbol for symbol, n in counts.items() for _ in range(n)]
    parse_pattern("".join(symbols))
    rng.shuffle(symbols)
    return "".join(symbols)


BASELINES = {
    "llama": llama,
    "striped": striped,
    "sandwich": sandwich,
    "random": random_pattern,
}
