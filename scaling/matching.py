"""Baselines matched to a composite (extrapolated) architecture, at the composite's widths
(docs/method.md, "Baselines").

The paper compares each composite with Llama (1:1 alternation), the Sandwich Transformer, striped 1:r patterns and
random patterns, all at the same widths and about the same size. How each is matched:

* ``llama``: whole ``AM`` blocks, as many as bring its non-embedding parameters closest to the *reference* size.
  The reference defaults to the preset whose widths the composite has, so a composite extrapolated to
  ``llama-3.2-1b`` is compared with ``(AM)x16`` itself: the paper's baseline. Without a matching preset the
  reference is the composite's own size.
* ``sandwich``: the composite's exact depth and attention/MLP counts (hence exactly its parameters), attention
  moved to the bottom (Press et al. 2020, via :func:`composer.layouts.sandwich`). Defined for A/M composites only.
* ``striped-1:R``: blocks of one ``A`` and ``R`` ``M`` at the depth (any, the last block may be cut) whose
  non-embedding parameters are closest to the reference size.
* ``random`` (``random-K`` for more of them): the composite's exact layer counts in a random order (seed
  ``seed + K``): the same parameters, only the placement differs, for any primitives.
* a published hybrid family (``jamba``, ``samba``, ``nemotron-h``, ``qwen3-next``, ``gdn-h1``, ``linear-7to1``;
  :data:`composer.layouts.FAMILIES`): its layout at the depth (whole periods of the published layout) whose
  non-embedding parameters are closest to the reference size. Total parameters are matched, so a family with
  MoE FFNs (Jamba, Qwen3-Next) uses fewer *active* parameters per token than the composite.

Patterns come from :mod:`composer.layouts`; this module only decides depths and counts.
"""

from __future__ import annotations

import dataclasses
import re

from composer import layouts as patterns
from composer.accounting import non_embedding_params
from composer.config import ArchConfig
from composer.errors import ConfigError
from composer.presets import PRESETS, get_preset

DEFAULT_NAMES = ("llama", "sandwich", "striped-1:2", "random")
NAME_FORMS = ("llama, sandwich, striped-1:R (R a positive integer), random, random-K, or a published hybrid "
              f"family ({', '.join(patterns.FAMILIES)})")
_STRIPED = re.compile(r"striped-1:([1-9][0-9]*)")
_RANDOM = re.compile(r"random(?:-([0-9]+))?")


def preset_of(arch: ArchConfig) -> str | None:
    """The preset whose widths (everything but the pattern and per-primitive options) ``arch`` has, if any."""
    for name, preset in PRESETS.items():
        if dataclasses.replace(preset.arch, pattern=arch.pattern, options=arch.options) == arch:
            return name
    return None


def reference_size(composite: ArchConfig, reference: int | str | ArchConfig | None = None) -> int:
    """Non-embedding parameters the depth-chosen baselines aim at (module docstring)."""
    if reference is None:
        name = preset_of(composite)
        reference = get_preset(name).arch if name else composite
    if isinstance(reference, str):
        reference = get_preset(reference).arch
    if isinstance(reference, ArchConfig):
        return non_embedding_params(reference)
    if isinstance(reference, int) and not isinstance(reference, bool) and reference > 0:
        return reference
    raise ConfigError(f"reference must be a preset name, an ArchConfig or a positive size, got {reference!r}")


def closest_depth(arch: ArchConfig, generator, target: int, step: int = 1) -> str:
    """``generator(n)`` at the depth ``n`` (a multiple of ``step``) whose size at ``arch``'s widths is nearest
    ``target``; the shallower on a tie."""
    return patterns.matched_depth(generator, lambda pattern: non_embedding_params(arch.with_pattern(pattern)),
                                  target, step)


def is_depth_matched(name: str) -> bool:
    """Whether baseline ``name`` is matched by choosing a depth (``llama``, ``striped-1:R``), so that it can be
    matched to any size, rather than derived from the composite's own layers (``sandwich``, ``random``)."""
    return name == "llama" or name in patterns.FAMILIES or _STRIPED.fullmatch(str(name)) is not None


def layout_at_depth(name: str, n_layers: int) -> str | None:
    """A depth-matched baseline's own layout at ``n_layers`` (``llama`` at 6: ``AMAMAM``); None for a baseline
    derived from a composite (``sandwich``, ``random``) or a family that has no layout at that depth.

    Why: a search scores patterns at one small depth, so this is the pattern under which it may have scored the
    baseline itself (``composer transfer`` and ``composer pipeline`` start the baseline at that trial's rate)."""
    if name == "llama":
        return patterns.llama(n_layers)
    striped = _STRIPED.fullmatch(str(name))
    if striped:
        return patterns.striped(n_layers, int(striped.group(1)))
    if name in patterns.FAMILIES:
        try:
            return patterns.FAMILIES[name].pattern(n_layers)
        except ConfigError:  # e.g. an odd depth for a family of mixer + FFN pairs
            return None
    return None


def baseline_pattern(name: str, composite: ArchConfig, seed: int = 0, target: int | None = None) -> str:
    """The pattern of baseline ``name`` matched to ``composite`` (``target``: the reference size)."""
    target = reference_size(composite) if target is None else target
    if name == "llama":
        return closest_depth(composite, patterns.llama, target, step=2)
    if name in patterns.FAMILIES:
        family = patterns.FAMILIES[name]
        return closest_depth(composite, family.generator, target, step=family.period)
    if name == "sandwich":
        others = set(composite.counts) - {"A", "M"}
        if others:
            raise ConfigError(
                f"the sandwich baseline needs an attention/MLP (A, M) composite; {composite.compact!r} also uses "
                f"{', '.join(sorted(others))}: compare with 'random' instead, which keeps any layer counts"
            )
        return patterns.sandwich(composite.n_layers, n_attention=composite.counts.get("A", 0))
    striped = _STRIPED.fullmatch(name)
    if striped:
        ratio = int(striped.group(1))
        return closest_depth(composite, lambda n: patterns.striped(n, ratio), target)
    random = _RANDOM.fullmatch(name)
    if random:
        offset = int(random.group(1) or 0)
        return patterns.random_pattern(composite.n_layers, seed=seed + offset, counts=composite.counts)
    raise ConfigError(f"unknown baseline {name!r}; choose from: {NAME_FORMS}")


def matched_baselines(
    composite: ArchConfig,
    names: tuple[str, ...] | list[str] = DEFAULT_NAMES,
    seed: int = 0,
    *,
    reference: int | str | ArchConfig | None = None,
) -> dict[str, ArchConfig]:
    """Baselines for ``composite`` at its widths and options, keyed by name (module docstring).

    ``reference`` is the size ``llama`` and ``striped-1:R`` match: a preset name, an architecture or a number
    of non-embedding parameters; default: the preset with the composite's widths, else the composite itself.
    """
    if isinstance(names, str):
        names = (names,)
    target = reference_size(composite, reference)
    return {name: composite.with_pattern(baseline_pattern(name, composite, seed, target)) for name in names}
