"""The mixers space (``--space mixers``): mixer slots, each followed by 0, 1 or 2 FFNs, and a searched depth.

Why a second space: the layers space (``search.space``) fixes a pattern's length at ``--layers`` and lets any
layer be any primitive, so a search at 6 layers holds ``AMAMAM`` but no 16-layer stack, and its MLPs are wherever a
sample puts them. Nemotron-Flash's search space (arXiv 2511.18890) is a sequence of mixers, each followed by 0, 1
or 2 FFNs, at a free depth. ``answer-mlp@16``, ``S(MD)x3 MAMDMSMDM`` (8 mixers, an MLP after each), beat
Nemotron-H's layout at its cost where the layers space's search could not reach it (issue 68): here it is one
point, at 8 slots.

A candidate is ``slots`` mixer slots, bottom first; slot ``i`` is ``mixer_i`` (a token of ``--primitives`` other
than the FFNs ``M`` and ``E``: ``A``, ``S``, ``D``, ``W``, a parallel ``[AS]``) followed by ``ffn_i`` copies of the
FFN (``M``, or ``E`` where ``--primitives`` offers it instead of ``M``; none where it offers neither). ``slots``
runs from ``least`` to ``most``: ``most`` is ``--layers`` and ``least`` half of it, rounded up, so the default
``--layers 6`` searches 3 to 6 mixers (3 to 18 layers) and the known layouts' 6-layer fits (3 or 4 mixers) lie
inside it. A pattern that starts with an FFN, or puts 3 or more after one mixer (``AAMMMM``), is not in the space;
``inexpressible`` says why, and the known layouts it cannot express are left out with that reason.

How Optuna's samplers see it, and why the parameters are these:

* **A fixed set of parameters.** Every trial suggests ``slots`` and all ``most`` slots' ``mixer_i`` and ``ffn_i``;
  the slots past ``slots`` are dormant (suggested, unused). Optuna's GP, TPE (multivariate) and NSGA-II samplers
  model only the parameters every trial has (the intersection search space); the others they draw at random. A
  conditional ``mixer_5`` that exists only when ``slots`` >= 6 would be random under all three, so the deep half
  of the space would never be learned. A dormant slot keeps its value, so NSGA-II's crossover carries it into a
  deeper child, and a change of depth is one parameter, not another set of them.
* **Depth as its own integer, not an "empty slot" choice.** With an empty choice in every slot, a pattern of
  ``d`` mixers has C(most, d) spellings, the prior over depth is binomial (piled at the deep end), and a known
  layout's spelling is one of many. ``slots`` gives depth a uniform prior and each pattern one spelling up to its
  dormant values (``params_of`` fills them with the first mixer and no FFN).
* **Ordered integers.** ``slots`` and ``ffn_i`` are integers: the GP's kernel and TPE's estimator see that 1 FFN
  lies between 0 and 2, which a categorical hides. ``mixer_i`` is categorical: mixers have no order.
* **Brute force is the exception.** ``BruteForceSampler`` walks a tree of parameters, so conditional ones are
  exact there, and fixed ones would make it enumerate every dormant value. ``conditional=True`` (the brute
  sampler's, ``search.spaces.build_space``) suggests only the active slots: it visits each pattern once, and
  ``size`` counts distinct patterns either way.

Pattern lengths vary: rung 0 trains each at its own depth at the search widths (a deeper stack has more
parameters there; ``--max-params`` bounds them), and the rungs at the target grow every pattern to the target's
size, where they compare at one size (or one cost).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from functools import cached_property

import optuna

from composer.errors import ConfigError
from composer.pattern import layers, parse_pattern
from search.space import check_choices, constraint_violation

FFN_TOKENS = ("M", "E")  # the FFNs a mixer slot may end with; every other token is a mixer
MOST_FFNS = 2  # Nemotron-Flash's space: 0, 1 or 2 FFNs after each mixer
MAX_ENUMERATED = 1_000_000  # enumerate() refuses more: a list of that many patterns is seconds and ~100 MB


def least_slots(most: int) -> int:
    """The fewest mixer slots of a space whose most is ``most`` (``--layers``): half, rounded up, so a known layout
    fitted to ``most`` layers as mixer + FFN pairs (``most / 2`` mixers) is inside it."""
    return max(1, math.ceil(most / 2))


@dataclass(frozen=True)
class MixerSpace:
    most: int = 6  # --layers: the most mixer slots
    primitives: str = "AMSD"  # the mixers and the FFN a slot may hold
    min_share: dict[str, float] = field(default_factory=dict)  # token -> minimum fraction of the pattern's layers
    max_share: dict[str, float] = field(default_factory=dict)  # token -> maximum fraction
    max_params: int | None = None  # non-embedding parameters at the search widths
    least: int | None = None  # the fewest mixer slots (default: least_slots(most))
    conditional: bool = False  # suggest only the active slots (brute force; see the module docstring)

    def __post_init__(self) -> None:
        if not isinstance(self.most, int) or isinstance(self.most, bool) or self.most < 1:
            raise ConfigError(f"layers must be a positive integer (the most mixer slots), got {self.most!r}")
        if self.least is None:
            object.__setattr__(self, "least", least_slots(self.most))
        if not isinstance(self.least, int) or not 1 <= self.least <= self.most:
            raise ConfigError(f"the fewest mixer slots must be 1 to {self.most}, got {self.least!r}")
        check_choices(self.primitives, self.choices, self.min_share, self.max_share)
        if not self.mixers:
            raise ConfigError(f"--space mixers needs a mixer among --primitives (A, S, D, W or a parallel layer), "
                              f"got only {self.primitives!r}: add one, e.g. --primitives A{self.primitives}")
        ffns = [token for token in self.choices if token in FFN_TOKENS]
        if len(ffns) > 1:
            raise ConfigError(f"--space mixers follows each mixer with one kind of FFN; --primitives "
                              f"{self.primitives!r} offers {' and '.join(ffns)}: drop one, or use --space layers")
        problem = self.infeasibility()
        if problem:
            raise ConfigError(f"no pattern satisfies the constraints: {problem}; relax --min-share / --max-share")

    @cached_property  # read per layer by slots_of: parsed once
    def choices(self) -> list[str]:
        """The layer tokens offered, mixers and FFN, e.g. ``["A", "M", "S"]``."""
        return layers(parse_pattern(self.primitives))

    @cached_property  # read per layer by slots_of: parsed once
    def mixers(self) -> list[str]:
        """The tokens a slot's mixer may be: every offered token but the FFNs."""
        return [token for token in self.choices if token not in FFN_TOKENS]

    @cached_property  # read per layer by slots_of: parsed once
    def ffn(self) -> str | None:
        """The FFN token a slot ends with (``M``, or ``E`` offered instead), or None: mixers only."""
        return next((token for token in self.choices if token in FFN_TOKENS), None)

    @property
    def most_ffns(self) -> int:
        return MOST_FFNS if self.ffn else 0

    @property
    def size(self) -> int:
        """Distinct patterns: each slot is one of (mixers x FFN counts), at every depth from least to most."""
        per_slot = len(self.mixers) * (self.most_ffns + 1)
        return sum(per_slot ** depth for depth in range(self.least, self.most + 1))

    @property
    def known_depth(self) -> int:
        """The depth in layers the known layouts are fitted to before they are read as slots (search.known): the
        layers space's at the same ``--layers``, so both spaces start from the same published layouts."""
        return self.most

    @property
    def describe(self) -> str:
        ffns = f", each followed by 0-{self.most_ffns} {self.ffn}" if self.ffn else ""
        return f"{self.least}-{self.most} mixers of {'/'.join(self.mixers)}{ffns}"

    @property
    def representative(self) -> str:
        """A pattern at the middle depth, the mixers in turn, each with the middle FFN count: what a stage that
        enqueues none is timed by."""
        depth = (self.least + self.most + 1) // 2
        ffns = (self.ffn or "") * (self.most_ffns // 2)
        return "".join(self.mixers[i % len(self.mixers)] + ffns for i in range(depth))

    def suggest(self, trial: optuna.Trial) -> str:
        """Sample the depth and every slot (only the active ones when ``conditional``); return the pattern."""
        slots = trial.suggest_int("slots", self.least, self.most)
        params = {"slots": slots}
        for i in range(slots if self.conditional else self.most):
            params[f"mixer_{i}"] = trial.suggest_categorical(f"mixer_{i}", self.mixers)
            if self.ffn:
                params[f"ffn_{i}"] = trial.suggest_int(f"ffn_{i}", 0, self.most_ffns)
        return self.pattern_of(params)

    def pattern_of(self, params: dict) -> str:
        return "".join(params[f"mixer_{i}"] + (self.ffn or "") * int(params.get(f"ffn_{i}", 0))
                       for i in range(int(params["slots"])))

    def slots_of(self, pattern: str) -> list[tuple[str, int]] | str:
        """``pattern`` as (mixer, FFN count) slots, or why it is not in the space."""
        slots: list[tuple[str, int]] = []
        for position, token in enumerate(layers(pattern)):
            if token in FFN_TOKENS:
                if token != self.ffn:
                    return (f"layer {position} is {token}, an FFN the space does not offer (it offers "
                            f"{self.ffn or 'none'})")
                if not slots:
                    return f"it starts with {token}: every slot starts with a mixer"
                mixer, ffns = slots[-1]
                if ffns == self.most_ffns:
                    return f"{mixer} at slot {len(slots) - 1} is followed by more than {self.most_ffns} {token}"
                slots[-1] = (mixer, ffns + 1)
            elif token in self.mixers:
                slots.append((token, 0))
            else:
                return f"layer {position} is {token}, not a mixer among --primitives {self.primitives!r}"
        if not self.least <= len(slots) <= self.most:
            return f"{len(slots)} mixers, outside the space's {self.least} to {self.most}"
        return slots

    def inexpressible(self, pattern: str) -> str | None:
        """Why no choice of this space's parameters gives ``pattern``, or None (``params_of``'s precondition)."""
        slots = self.slots_of(pattern)
        return slots if isinstance(slots, str) else None

    def params_of(self, pattern: str) -> dict:
        """The parameters ``suggest`` returns ``pattern`` for (dormant slots: the first mixer, no FFN); the inverse
        of ``pattern_of`` on the space, used to enqueue known layouts and promotions."""
        slots = self.slots_of(pattern)
        if isinstance(slots, str):
            raise ConfigError(f"{pattern} is not in the mixers space: {slots}")
        params: dict = {"slots": len(slots)}
        filler = (self.mixers[0], 0)
        for i in range(len(slots) if self.conditional else self.most):
            mixer, ffns = slots[i] if i < len(slots) else filler
            params[f"mixer_{i}"] = mixer
            if self.ffn:
                params[f"ffn_{i}"] = ffns
        return params

    def violation(self, pattern: str, non_embedding_params: int | None = None) -> str | None:
        """Why ``pattern`` is outside the constraints, or None (shares count the whole pattern's layers)."""
        return constraint_violation(pattern, self.min_share, self.max_share, self.max_params, non_embedding_params)

    def enumerate(self) -> list[str]:
        """Every distinct pattern, shallowest first (brute force and the up-front limit checks; small spaces)."""
        if self.size > MAX_ENUMERATED:
            raise ConfigError(f"the mixers space holds {self.size:,} patterns, too many to list (max "
                              f"{MAX_ENUMERATED:,}); use fewer --layers or --primitives")
        slot_choices = [mixer + (self.ffn or "") * ffns for mixer in self.mixers
                        for ffns in range(self.most_ffns + 1)]
        return ["".join(slots) for depth in range(self.least, self.most + 1)
                for slots in itertools.product(slot_choices, repeat=depth)]

    def infeasibility(self) -> str | None:
        """Why no pattern of the space can satisfy the share constraints, or None (checked before any training).

        Exact: for each depth and each total of FFNs (any total of 0 to 2 per slot is reachable), each token's count
        must land in ``[ceil(min * n), floor(max * n)]`` of the ``n`` layers, the mixers' counts adding up to the
        depth. ``max_params`` is not checked here (a violating trial is skipped with its reason)."""
        if not self.min_share and not self.max_share:
            return None
        for depth in range(self.least, self.most + 1):
            for ffns in range(depth * self.most_ffns + 1):
                total = depth + ffns

                def bounds(token: str, have: int) -> tuple[int, int]:
                    low = math.ceil(self.min_share.get(token, 0.0) * total - 1e-9)
                    high = math.floor(self.max_share.get(token, 1.0) * total + 1e-9)
                    return max(0, low), min(have, high)

                if self.ffn and not bounds(self.ffn, ffns)[0] <= ffns <= bounds(self.ffn, ffns)[1]:
                    continue
                ranges = [bounds(mixer, depth) for mixer in self.mixers]
                if all(low <= high for low, high in ranges) and \
                        sum(low for low, _ in ranges) <= depth <= sum(high for _, high in ranges):
                    return None
        shares = ", ".join([f"{token} >= {share:g}" for token, share in self.min_share.items()]
                           + [f"{token} <= {share:g}" for token, share in self.max_share.items()])
        return (f"no stack of {self.least} to {self.most} mixers"
                + (f" with 0-{self.most_ffns} {self.ffn} after each" if self.ffn else "") + f" holds {shares}")
