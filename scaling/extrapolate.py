"""Extrapolate a searched layer pattern to a target model size: stacking and stretching
(docs/method.md, "Extrapolation").

The search runs small patterns (6 or 16 layers); the winner is grown to the size of a target model at the
target's widths. Size is counted in parameters at the *target width*, so a pattern is compared with the target
by what it would weigh there, not by its depth.

Definitions (``size(p)`` = parameters of one residual layer of primitive ``p`` at the target widths, its pre-norm
included, from :func:`composer.accounting.layer_params`; any registered primitive works):

* ``m`` = the source pattern's layer parameters, ``sum(size(p) for p in pattern)``;
* ``M`` = the target's layer parameters: the non-embedding parameters of the target preset's own pattern (or of
  ``target_params`` when given), minus the final norm.

The final norm is left out of ``m`` and ``M`` because every model has exactly one whatever its depth: it does
not scale with the pattern. With it, the scale would drift by ``d_model / m`` (2e-6 at 1B) and the bounds below
would pick up a ``(s - 1) * d_model`` term; the paper's checks come out the same either way. Reported sizes
(``non_embedding_params``, ``target_non_embedding_params``) include it, as everywhere else in Composer.

* **stretching**: split the pattern into maximal runs ``(p_g, h_g)``; ``s = M / m``; each run becomes
  ``(p_g, ceil(s * h_g))``. The order of the runs is kept and their ratio up to rounding. Because ``s * h_g > 0``,
  ``ceil`` never drops a run.
* **stacking**: repeat the pattern ``k = floor(M / m)`` times, then append the pattern stretched by the remainder
  factor ``t = (M - k * m) / m`` (``0 <= t < 1``). When the remainder is exactly zero, ``ceil(0) = 0`` for every
  run and no partial copy is added. With ``M < m`` (``k = 0``) stacking is stretching by ``t = M / m``.
* **auto**: stack patterns of at most :data:`STACK_MAX_LAYERS` layers, stretch longer ones, as the paper did
  (it stacked its 6-layer winner and stretched its 16-layer one).

* **attention kept** (``attention="keep"``): the pattern's full-attention layers (those whose cache grows with
  the context and has no window) are not repeated. Its other layers grow as above, to the target's size less
  those attention layers, and the attention layers, as many as the pattern has, are placed at the middles of
  equal segments of the result (Nemotron-H's rule for its own, ``composer.layouts.segment_middles``): ``SDDMAS``
  at ``demo-4m`` is ``SDDMSSDDMSASDDMSSDDMS``, one attention layer in 21, where stacking gives
  ``SDDMASSDDMASSDDMASSDMAS``, 4 in 23.
  A searched pattern with one attention layer then holds one attention layer's cache at any depth, as the
  published hybrids do (about 8% of layers in Nemotron-H). A pattern of attention only, or one whose attention
  layers alone fill the target, grows as a whole.

All arithmetic is exact (:class:`fractions.Fraction`), so ``s * h_g`` that lands on an integer is not pushed one
layer up by floating-point error.

How close to the target (``diff = result - M``, ``size(g)`` the layer size of run ``g`` of the pattern that is
stretched: the whole pattern for stretching, the remainder copy for stacking):

* ``rounding="ceil"`` (the paper's rule, the default): ``0 <= diff < sum(size(g) for every run g)``: never below
  the target, above by less than one layer *per run*. A single-run remainder is within one layer; the paper's
  16-layer winner (6 runs) stretched to 1B lands 1.7 MLP layers above (+9.1%).
* ``rounding="nearest"``: start from ``floor(s * h_g)`` and add one layer to runs in order of their largest
  fractional part while that brings the total closer to the target, never beyond ``ceil(s * h_g)``. Then
  ``|diff| <= max(size) / 2``: within half of one (largest) layer either side. Stretching keeps every run (at
  least one layer each), which can break this bound only when shrinking (``s * h_g < 1``); the remainder copy of
  stacking may lose runs whose share rounds to zero.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from composer.accounting import analyze, layer_params, non_embedding_params
from composer.config import ArchConfig
from composer.errors import ConfigError
from composer.pattern import MAX_LAYERS, compact_pattern, layers, n_layers, parse_pattern, runs
from composer.presets import PRESETS, get_preset, scaled_name
from composer.widths import scale_widths, width_quantum, widths_table

METHODS = ("stack", "stretch", "auto")
ATTENTION_RULES = ("repeat", "keep")
"""How a pattern's full-attention layers grow: ``repeat`` (with the rest of the pattern) or ``keep`` (as many as
the pattern has, at the middles of the grown model; the module docstring)."""
ROUNDINGS = ("ceil", "nearest")
STACK_MAX_LAYERS = 8
"""``auto`` stacks patterns up to this depth and stretches longer ones (the paper: 6 stacked, 16 stretched)."""


@dataclass(frozen=True)
class Extrapolation:
    """The result of :func:`extrapolate`: the grown pattern at the target widths and how close it lands."""

    pattern: str
    source_pattern: str
    method: str
    rounding: str
    scale: float
    repeats: int
    target: str | None
    source_non_embedding_params: int
    target_non_embedding_params: int
    non_embedding_params: int
    bound: int
    arch: ArchConfig
    attention: str = "repeat"  # ATTENTION_RULES: how the pattern's full-attention layers grew
    kept_attention: tuple[str, ...] = ()  # the layers ``keep`` placed at the middles (empty: grown as a whole)
    depth: int | None = None  # grown to this many layers by width (grow_to_depth), None: by depth at the widths

    @property
    def compact(self) -> str:
        return compact_pattern(self.pattern)

    @property
    def counts(self) -> dict[str, int]:
        return self.arch.counts

    @property
    def n_layers(self) -> int:
        return self.arch.n_layers

    @property
    def difference(self) -> int:
        """``non_embedding_params - target_non_embedding_params``; positive when above the target."""
        return self.non_embedding_params - self.target_non_embedding_params

    @property
    def relative_error(self) -> float:
        """``difference / target_non_embedding_params``."""
        return self.difference / self.target_non_embedding_params

    def to_dict(self) -> dict[str, Any]:
        stats = analyze(self.arch)
        return {
            "pattern": self.pattern,
            "compact": self.compact,
            "source_pattern": self.source_pattern,
            "method": self.method,
            "rounding": self.rounding,
            "scale": self.scale,
            "repeats": self.repeats,
            "target": self.target,
            "n_layers": self.n_layers,
            "counts": self.counts,
            "params": stats.params,
            "non_embedding_params": self.non_embedding_params,
            "kv_cache_bytes_per_token": stats.kv_cache_bytes_per_token,
            "source_non_embedding_params": self.source_non_embedding_params,
            "target_non_embedding_params": self.target_non_embedding_params,
            "difference": self.difference,
            "relative_error": self.relative_error,
            "bound": self.bound,
            "attention": self.attention,
            "depth": self.depth,
            "widths": widths_table(self.arch),
            "arch": self.arch.to_dict(),
        }


def resolve_target(target: str | ArchConfig) -> tuple[ArchConfig, str | None]:
    """The target's architecture and its preset name (``None`` for an :class:`ArchConfig`)."""
    if isinstance(target, ArchConfig):
        return target, None
    if isinstance(target, str):
        return get_preset(target).arch, target
    raise ConfigError(f"target must be a preset name ({', '.join(PRESETS)}) or an ArchConfig, got {target!r}")


def round_runs(
    pattern_runs: list[tuple[str, int]],
    factor: Fraction,
    sizes: dict[str, int],
    rounding: str = "ceil",
    keep_every_run: bool = True,
) -> list[tuple[str, int]]:
    """Scale each run's length by ``factor`` and round to whole layers (see the module docstring).

    Runs rounded to zero layers are dropped. ``keep_every_run`` (``nearest`` only; ``ceil`` keeps every run
    whenever ``factor > 0``) rounds runs up to at least one layer.
    """
    exact = [factor * length for _, length in pattern_runs]
    if rounding == "ceil":
        counts = [math.ceil(x) for x in exact]
    elif rounding == "nearest":
        counts = [math.floor(x) for x in exact]
        if keep_every_run:
            counts = [max(1, n) for n in counts]
        target = sum(x * sizes[p] for x, (p, _) in zip(exact, pattern_runs))
        deficit = target - sum(n * sizes[p] for n, (p, _) in zip(counts, pattern_runs))
        by_fraction = sorted(range(len(exact)), key=lambda g: (-(exact[g] - math.floor(exact[g])), g))
        for g in by_fraction:
            size = sizes[pattern_runs[g][0]]
            if counts[g] < math.ceil(exact[g]) and deficit >= Fraction(size, 2):
                counts[g] += 1
                deficit -= size
    else:
        raise ConfigError(f"rounding must be one of {ROUNDINGS}, got {rounding!r}")
    return [(p, n) for (p, _), n in zip(pattern_runs, counts) if n > 0]


def _expand(scaled_runs: list[tuple[str, int]]) -> str:
    return "".join(symbol * n for symbol, n in scaled_runs)


def _check_depth(n_layers: int, what: str) -> None:
    if n_layers > MAX_LAYERS:
        raise ConfigError(f"{what} would have {n_layers:,} layers, more than the {MAX_LAYERS:,} a pattern may have")


def stretch(
    pattern: str, factor: Fraction, sizes: dict[str, int], rounding: str = "ceil", keep_every_run: bool = True
) -> str:
    """Stretch ``pattern`` by ``factor``: each maximal run ``(p, h)`` becomes ``(p, round(factor * h))``."""
    pattern_runs = runs(pattern)
    _check_depth(sum(math.ceil(factor * h) for _, h in pattern_runs), "the stretched pattern")
    return _expand(round_runs(pattern_runs, factor, sizes, rounding, keep_every_run))


def stack(pattern: str, factor: Fraction, sizes: dict[str, int], rounding: str = "ceil") -> tuple[str, int]:
    """Stack ``pattern`` ``floor(factor)`` times plus a copy stretched by the remainder; returns (pattern, repeats)."""
    repeats = math.floor(factor)
    _check_depth(repeats * n_layers(pattern), "the stacked pattern")
    # Below one copy there is nothing to stack onto: keep every run, as stretching does.
    remainder = stretch(pattern, factor - repeats, sizes, rounding, keep_every_run=repeats == 0)
    return pattern * repeats + remainder, repeats


def _layer_size(pattern: str, sizes: dict[str, int]) -> int:
    return sum(sizes[token] for token in layers(pattern))


def _bound(pattern: str, factor: Fraction, sizes: dict[str, int], rounding: str, keep_every_run: bool) -> int:
    """The guaranteed ``|result - M|`` (module docstring) when ``pattern`` is rounded at ``factor``.

    0 when every ``factor * h_g`` is whole (nothing is rounded); one layer per run for ``ceil``, and for
    ``nearest`` when a kept run had to be rounded up from zero; half the largest layer otherwise.
    """
    pattern_runs = runs(pattern)
    exact = [factor * h for _, h in pattern_runs]
    if all(x.denominator == 1 for x in exact):
        return 0
    if rounding == "ceil" or (keep_every_run and any(x < 1 for x in exact)):
        return sum(sizes[symbol] for symbol, _ in pattern_runs)
    return max(sizes[token] for token in layers(pattern)) // 2


def extrapolate(
    pattern: str,
    target: str | ArchConfig,
    *,
    method: str = "auto",
    target_params: int | None = None,
    rounding: str = "ceil",
    attention: str = "repeat",
) -> Extrapolation:
    """Grow ``pattern`` to the size of ``target`` at the target's widths (see the module docstring).

    ``target`` is a preset name or an :class:`ArchConfig` (its widths, options and its own pattern's size);
    ``target_params`` overrides the size to reach, in non-embedding parameters (final norm included, as
    :func:`composer.accounting.non_embedding_params` counts them). ``attention``: ``repeat`` the pattern's
    full-attention layers with it, or ``keep`` their number (:data:`ATTENTION_RULES`).
    """
    if method not in METHODS:
        raise ConfigError(f"method must be one of {', '.join(METHODS)}, got {method!r}")
    if rounding not in ROUNDINGS:
        raise ConfigError(f"rounding must be one of {', '.join(ROUNDINGS)}, got {rounding!r}")
    if attention not in ATTENTION_RULES:
        raise ConfigError(f"attention must be one of {', '.join(ATTENTION_RULES)}, got {attention!r}")
    source = parse_pattern(pattern)
    target_arch, target_name = resolve_target(target)
    source_arch = target_arch.with_pattern(source)
    final_norm = target_arch.d_model
    if target_params is None:
        target_non_embedding = non_embedding_params(target_arch)
    else:
        if not isinstance(target_params, int) or isinstance(target_params, bool) or target_params <= final_norm:
            raise ConfigError(
                f"target params must be an integer above the final norm's {final_norm} parameters "
                f"(non-embedding), got {target_params!r}"
            )
        target_non_embedding = target_params
    sizes = layer_params(source_arch)
    chosen = method if method != "auto" else ("stack" if n_layers(source) <= STACK_MAX_LAYERS else "stretch")
    kept = full_attention_layers(source_arch) if attention == "keep" else []
    grown = "".join(token for token in layers(source) if token not in kept) if kept else source
    big_m = target_non_embedding - final_norm - sum(sizes[token] for token in kept)
    if not grown or big_m <= 0:  # attention only, or a target its attention alone fills: grown as a whole
        kept, grown, big_m = [], source, target_non_embedding - final_norm
    m = _layer_size(grown, sizes)
    factor = Fraction(big_m, m)
    if chosen == "stack":
        result, repeats = stack(grown, factor, sizes, rounding)
        bound = _bound(grown, factor - repeats, sizes, rounding, keep_every_run=repeats == 0)
    else:
        result, repeats = stretch(grown, factor, sizes, rounding), 0
        bound = _bound(grown, factor, sizes, rounding, keep_every_run=True)
    if kept:
        result = place_at_middles(result, kept)
    arch = target_arch.with_pattern(result)
    return Extrapolation(
        pattern=result,
        source_pattern=source,
        method=chosen,
        rounding=rounding,
        scale=float(factor),
        repeats=repeats,
        target=target_name,
        source_non_embedding_params=non_embedding_params(source_arch),
        target_non_embedding_params=target_non_embedding,
        non_embedding_params=non_embedding_params(arch),
        bound=bound,
        arch=arch,
        attention=attention,
        kept_attention=tuple(kept),
    )


def given_layout(pattern: str, layout: str, target: str | ArchConfig, how: str) -> Extrapolation:
    """``layout``, a model built by a rule other than growth (a published family's own layout at the target,
    ``search.growth``), as an :class:`Extrapolation` from ``pattern`` at ``target``'s widths, so it is printed,
    saved and compared like a grown one. ``how`` names the rule (its ``method``)."""
    target_arch, target_name = resolve_target(target)
    source, grown = parse_pattern(pattern), parse_pattern(layout)
    arch = target_arch.with_pattern(grown)
    size = non_embedding_params(arch)
    return Extrapolation(
        pattern=grown,
        source_pattern=source,
        method=how,
        rounding="nearest",
        scale=n_layers(grown) / n_layers(source),
        repeats=0,
        target=target_name,
        source_non_embedding_params=non_embedding_params(target_arch.with_pattern(source)),
        target_non_embedding_params=non_embedding_params(target_arch),
        non_embedding_params=size,
        bound=max(layer_params(arch).values()),
        arch=arch,
    )


def full_attention_layers(arch: ArchConfig) -> list[str]:
    """The layers of ``arch``'s pattern whose cache grows with the context without a window (full attention), in
    order: what ``attention="keep"`` does not repeat. A sliding window's cache is bounded, so it grows as the
    other layers do."""
    per_primitive = analyze(arch).per_primitive
    return [token for token in layers(arch.pattern)
            if per_primitive[token]["kv_bytes_per_token"] > 0 and per_primitive[token]["window"] is None]


def place_at_middles(pattern: str, inserted: list[str]) -> str:
    """``pattern`` with the ``inserted`` layers, in their order, at the middles of equal segments of the result
    (``composer.layouts.segment_middles``)."""
    from composer.layouts import segment_middles

    total = n_layers(pattern) + len(inserted)
    positions = set(segment_middles(total, len(inserted)))
    rest, placed = iter(layers(pattern)), iter(inserted)
    return "".join(next(placed) if i in positions else next(rest) for i in range(total))


DEPTH_WIDTH_RANGE = 8
"""``grow_to_depth`` looks for ``d_model`` up to this many times the target's (and down to one quantum)."""
SIZE_TOLERANCE = 0.05
"""How far from the target's non-embedding parameters a model grown to a depth by width may land (either side):
its widths move in quanta (whole key/value head groups, the MLP in quanta), so the size in between is not
reachable. At ``llama-3.2-1b`` (a quantum of 64 in 2,048) every model lands within 5%, at ``demo-4m`` most; one
that lands further is refused (:class:`OffTarget`), not compared "at the target's size"."""


class OffTarget(ConfigError):
    """A model the growth rule cannot bring within its tolerance of the target: a depth whose nearest width lands
    more than :data:`SIZE_TOLERANCE` from the target's size (or, ``scaling.equal_cost``, a layout whose widest width
    within a reference's cost is too far under it, or too deep for it at any width). A search records such a
    candidate as skipped with this reason; a command that grows one pattern prints it as its error."""


def pattern_at_depth(pattern: str, depth: int, attention: str = "repeat", kept: list[str] | None = None) -> str:
    """``pattern`` at exactly ``depth`` layers, its order kept: stacked whole, then a remainder copy whose runs
    share the layers left by largest remainder (every run kept while the remainder has room for them all).
    ``kept`` (``attention="keep"``: the pattern's full-attention layers) are taken out, the rest grown to
    ``depth - len(kept)`` and the kept layers placed at the middles, as :func:`extrapolate` does. A pattern that
    already has ``depth`` layers and repeats its attention is returned as given: a layout (a family's at that
    depth, say) is trained as written."""
    source = parse_pattern(pattern)
    if not isinstance(depth, int) or isinstance(depth, bool) or depth < 1:
        raise ConfigError(f"depth must be a positive number of layers, got {depth!r}")
    _check_depth(depth, "the grown pattern")
    kept = list(kept or []) if attention == "keep" else []
    if not kept and n_layers(source) == depth:
        return source
    rest = [token for token in layers(source) if token not in kept] if kept else layers(source)
    if not rest:  # attention only: grown as a whole
        kept, rest = [], layers(source)
    room = depth - len(kept)
    if room < 1:
        raise ConfigError(f"a depth of {depth} leaves no room beside the {len(kept)} attention layer(s) the 'keep' "
                          "rule keeps: give a larger depth, or grow with 'repeat'")
    repeats, remainder = divmod(room, len(rest))
    grown = "".join(rest) * repeats + _remainder_copy(runs("".join(rest)), remainder)
    return place_at_middles(grown, kept) if kept else grown


def _remainder_copy(pattern_runs: list[tuple[str, int]], n: int) -> str:
    """``n`` layers of a pattern given by its runs, each run's share ``n * h / total`` by largest remainder, runs
    kept at one layer at least while ``n`` holds them all (so a partial copy still has each primitive)."""
    if n == 0:
        return ""
    total = sum(h for _, h in pattern_runs)
    exact = [Fraction(n * h, total) for _, h in pattern_runs]
    floor_at = 1 if n >= len(pattern_runs) else 0
    counts = [max(floor_at, math.floor(x)) for x in exact]
    order = sorted(range(len(exact)), key=lambda g: (-(exact[g] - math.floor(exact[g])), g))
    while sum(counts) < n:
        for g in order:
            if sum(counts) < n and counts[g] < math.ceil(exact[g]) + floor_at:
                counts[g] += 1
    while sum(counts) > n:  # the floor of one layer overshot: take from the largest surplus
        g = max(range(len(counts)), key=lambda i: (counts[i] - exact[i], -i))
        counts[g] -= 1
    return _expand([(symbol, c) for (symbol, _), c in zip(pattern_runs, counts) if c > 0])


def _depths_within(source: str, target_arch: ArchConfig, goal: int, depth: int, attention: str,
                   kept: list[str]) -> str:
    """The words that name the depths nearest ``depth`` (within 4 layers) at which ``source`` lands within
    :data:`SIZE_TOLERANCE` of ``goal``, for :class:`OffTarget`'s message."""
    quantum = width_quantum(target_arch)
    widths = range(quantum, DEPTH_WIDTH_RANGE * target_arch.d_model + 1, quantum)
    near = []
    for other in sorted(range(max(1, depth - 4), depth + 5), key=lambda n: (abs(n - depth), n)):
        if other == depth or other < len(kept) + 1:
            continue
        layout = pattern_at_depth(source, other, attention, kept)
        sizes = [non_embedding_params(scale_widths(target_arch, d).with_pattern(layout)) for d in widths]
        if min(abs(size / goal - 1) for size in sizes) <= SIZE_TOLERANCE:
            near.append(other)
    if not near:
        return "choose a depth nearer the pattern's own, or grow it by depth (no --depth-at-target)"
    return f"choose another depth ({' or '.join(str(n) for n in sorted(near[:2]))} lands within it)"


def grow_to_depth(
    pattern: str,
    target: str,
    depth: int,
    *,
    attention: str = "repeat",
    target_params: int | None = None,
) -> Extrapolation:
    """Grow ``pattern`` to the size of preset ``target`` at ``depth`` layers, by width.

    The pattern is first laid out at ``depth`` layers (:func:`pattern_at_depth`, ``attention`` as in
    :func:`extrapolate`); then ``d_model`` is the multiple of the width quantum whose model comes nearest the
    target's non-embedding parameters, every width scaled with it (``composer.widths``: heads in whole key/value
    groups, the MLP's width in quanta). Embeddings are left out of the match, as everywhere in growth, so a wider
    model carries a larger embedding (``vocab * d_model``) beside the same non-embedding size. A size more than
    :data:`SIZE_TOLERANCE` from the target's is :class:`OffTarget`.
    """
    if attention not in ATTENTION_RULES:
        raise ConfigError(f"attention must be one of {', '.join(ATTENTION_RULES)}, got {attention!r}")
    target_arch, target_name = resolve_target(target)
    source = parse_pattern(pattern)
    goal = non_embedding_params(target_arch) if target_params is None else target_params
    kept = full_attention_layers(target_arch.with_pattern(source)) if attention == "keep" else []
    grown = pattern_at_depth(source, depth, attention, kept)
    quantum = width_quantum(target_arch)

    @functools.cache  # the bisection, the nearest step and the bound ask for the same widths
    def size_at(d_model: int) -> int:
        return non_embedding_params(scale_widths(target_arch, d_model).with_pattern(grown))

    candidates = range(quantum, DEPTH_WIDTH_RANGE * target_arch.d_model + 1, quantum)
    # size grows with d_model (up to the heads' rounding): bisect to the first width at or above the goal, then
    # take the nearest of it and its neighbours
    low, high = 0, len(candidates) - 1
    while low < high:
        middle = (low + high) // 2
        low, high = (middle + 1, high) if size_at(candidates[middle]) < goal else (low, middle)
    near = candidates[max(0, low - 2):low + 3]
    d_model = min(near, key=lambda d: (abs(size_at(d) - goal), d))
    if d_model in (candidates[0], candidates[-1]) and size_at(d_model) != goal:
        raise ConfigError(f"{compact_pattern(grown)} cannot reach {target_name or 'the target'}'s size at {depth} "
                          f"layers within d_model {candidates[0]}-{candidates[-1]}: choose a depth nearer its own")
    off = size_at(d_model) / goal - 1
    if abs(off) > SIZE_TOLERANCE:
        name = target_name or "the target"
        raise OffTarget(f"{compact_pattern(grown)} at {depth} layers lands {off:+.1%} from {name}'s non-embedding "
                        f"parameters at its nearest width (d_model {d_model}), beyond the {SIZE_TOLERANCE:.0%} "
                        "growth to a depth allows: "
                        + _depths_within(source, target_arch, goal, depth, attention, kept))
    arch = scale_widths(target_arch, d_model).with_pattern(grown)
    step_bound = max(abs(size_at(d_model + quantum) - size_at(d_model)), abs(size_at(d_model) - size_at(
        max(quantum, d_model - quantum)))) // 2
    return Extrapolation(
        pattern=grown,
        source_pattern=source,
        method="depth",
        rounding="nearest",
        scale=d_model / target_arch.d_model,
        repeats=0,
        target=scaled_name(target_name, d_model) if target_name else None,
        source_non_embedding_params=non_embedding_params(target_arch.with_pattern(source)),
        target_non_embedding_params=goal,
        non_embedding_params=size_at(d_model),
        bound=step_bound,
        arch=arch,
        attention=attention,
        kept_attention=tuple(kept),
        depth=depth,
    )
