"""The layers space (``--space layers``, the default): one categorical choice of layer per layer, with optional
constraints. The other space, mixers with 0-2 MLPs after each and a searched depth, is ``search.mixer_space``.

The Optuna parameters are ``layer_0 .. layer_{n-1}``; a trial's pattern is their concatenation (plus any frozen
head/tail from an incremental strategy). Constraints are checked on the whole pattern; a violating sample is
recorded as pruned with its reason, so model-based samplers learn to avoid it without a fake score.

``primitives`` lists the layer tokens a layer may be: symbols (``"AM"``) and, to search parallel layers, the
bracketed pairs to offer (``"AM[AS][WS]"``: attention, MLP, attention beside Mamba-2, SWA beside Mamba-2). Shares
count whole tokens: ``min_share={"A": 0.2}`` counts ``A`` layers, not ``[AS]`` ones.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import optuna

from composer.errors import ConfigError
from composer.pattern import counts, layers, n_layers, parse_pattern


@dataclass(frozen=True)
class SearchSpace:
    n_layers: int = 6
    primitives: str = "AM"  # the layer tokens to choose from: symbols and parallel layers, e.g. "AM[AS]"
    min_share: dict[str, float] = field(default_factory=dict)  # token -> minimum fraction of layers
    max_share: dict[str, float] = field(default_factory=dict)  # token -> maximum fraction of layers
    max_params: int | None = None  # non-embedding parameters at the search widths
    head: str = ""  # frozen layers before the searched ones (incremental strategies)
    tail: str = ""  # frozen layers after them

    def __post_init__(self) -> None:
        if not isinstance(self.n_layers, int) or self.n_layers < 1:
            raise ConfigError(f"layers must be a positive integer, got {self.n_layers!r}")
        check_choices(self.primitives, self.choices, self.min_share, self.max_share)
        problem = self.infeasibility()
        if problem:
            raise ConfigError(f"no pattern satisfies the constraints: {problem}; relax --min-share / --max-share")

    def infeasibility(self) -> str | None:
        """Why no pattern of the space can satisfy the share constraints, or None (checked before any training).

        Each symbol's count must land in ``[ceil(min * n), floor(max * n)]`` of the whole pattern (frozen head and
        tail included, their counts fixed); the searched layers must add up to ``n_layers``. ``max_params`` is
        not checked here: it needs every pattern's accounting, and a violating trial is skipped with its reason.
        """
        import math

        total = self.n_layers + n_layers(self.head) + n_layers(self.tail)
        frozen = counts(self.head + self.tail)
        lower_sum = upper_sum = 0
        for symbol in self.choices:
            fixed = frozen.get(symbol, 0)
            low = math.ceil(self.min_share.get(symbol, 0.0) * total - 1e-9) - fixed
            high = math.floor(self.max_share.get(symbol, 1.0) * total + 1e-9) - fixed
            low, high = max(0, low), min(self.n_layers, high)
            if high < low:
                return (f"{symbol} needs at least {low} and at most {high} of the {self.n_layers} searched layers "
                        f"(min share {self.min_share.get(symbol, 0.0):g}, max share {self.max_share.get(symbol, 1.0):g})")
            lower_sum, upper_sum = lower_sum + low, upper_sum + high
        if lower_sum > self.n_layers:
            return f"the minimum shares need {lower_sum} of only {self.n_layers} searched layers"
        if upper_sum < self.n_layers:
            return f"the maximum shares allow only {upper_sum} of the {self.n_layers} searched layers"
        return None

    @property
    def choices(self) -> list[str]:
        """The layer tokens a searched layer may be, e.g. ``["A", "M", "[AS]"]``."""
        return layers(parse_pattern(self.primitives))

    @property
    def size(self) -> int:
        return len(self.choices) ** self.n_layers

    def param_name(self, index: int) -> str:
        return f"layer_{index}"

    def suggest(self, trial: optuna.Trial) -> str:
        """Sample the searched layers and return the full pattern."""
        searched = "".join(
            trial.suggest_categorical(self.param_name(i), self.choices) for i in range(self.n_layers)
        )
        return self.head + searched + self.tail

    def pattern_of(self, params: dict[str, str]) -> str:
        return self.head + "".join(params[self.param_name(i)] for i in range(self.n_layers)) + self.tail

    def params_of(self, pattern: str) -> dict[str, str]:
        tokens = layers(pattern)
        searched = tokens[n_layers(self.head) : len(tokens) - n_layers(self.tail)]
        return {self.param_name(i): symbol for i, symbol in enumerate(searched)}

    def violation(self, pattern: str, non_embedding_params: int | None = None) -> str | None:
        """Why ``pattern`` is outside the constraints, or None."""
        return constraint_violation(pattern, self.min_share, self.max_share, self.max_params, non_embedding_params)

    def enumerate(self) -> list[str]:
        """Every pattern of the space (for brute force; only sensible for small spaces)."""
        return [self.head + "".join(p) + self.tail for p in itertools.product(self.choices, repeat=self.n_layers)]

    @property
    def known_depth(self) -> int:
        """The depth the known layouts enter at (search.known): the searched layers."""
        return self.n_layers

    def inexpressible(self, pattern: str) -> str | None:
        """Why no choice of this space's parameters gives ``pattern``, or None (``params_of``'s precondition)."""
        tokens = layers(pattern)
        searched = len(tokens) - n_layers(self.head) - n_layers(self.tail)
        if searched != self.n_layers:
            return f"{searched} searched layers, not {self.n_layers}"
        missing = sorted(set(tokens) - set(self.choices) - set(layers(self.head + self.tail)))
        return f"needs {', '.join(missing)}, not in --primitives" if missing else None

    @property
    def describe(self) -> str:
        """The space in a few words, for the plan and the stage's first line."""
        return f"{self.n_layers}-layer {self.primitives}"

    @property
    def representative(self) -> str:
        """A pattern of the searched primitives in turn: what a stage that enqueues none is timed by."""
        return (self.primitives * self.n_layers)[: self.n_layers]


def check_choices(primitives: str, choices: list[str], min_share: dict[str, float],
                  max_share: dict[str, float]) -> None:
    """Refuse a primitive offered twice, or a share of one not offered or outside 0..1 (every space's rule)."""
    if len(set(choices)) != len(choices):
        raise ConfigError(f"primitives {primitives!r} repeats a symbol; list each layer once, e.g. 'AM' or "
                          "'AM[AS]'")
    for name, shares in (("min_share", min_share), ("max_share", max_share)):
        for symbol, share in shares.items():
            if symbol not in choices:
                raise ConfigError(f"{name} names {symbol!r}, which is not among the primitives "
                                  f"{''.join(choices)!r}")
            if not 0.0 <= share <= 1.0:
                raise ConfigError(f"{name} of {symbol} must be between 0 and 1, got {share}")


def constraint_violation(pattern: str, min_share: dict[str, float], max_share: dict[str, float],
                         max_params: int | None, non_embedding_params: int | None = None) -> str | None:
    """Why ``pattern`` is outside the shares (of its whole layers) or ``max_params``, or None (every space's rule)."""
    n = n_layers(pattern)
    have = counts(pattern)
    for symbol, share in min_share.items():
        if have.get(symbol, 0) < share * n - 1e-9:
            return f"{symbol} share {have.get(symbol, 0) / n:.2f} is below the minimum {share:.2f}"
    for symbol, share in max_share.items():
        if have.get(symbol, 0) > share * n + 1e-9:
            return f"{symbol} share {have.get(symbol, 0) / n:.2f} is above the maximum {share:.2f}"
    if max_params is not None and non_embedding_params is not None and non_embedding_params > max_params:
        # short: a progress line shows 51 characters of a reason (issue 47: cut mid-number)
        return f"{non_embedding_params:,} params > --max-params {max_params:,}"
    return None
