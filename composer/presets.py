"""Named architecture presets: the official Llama 3.x shapes, a ~350M shape, and small search/test widths.

A preset fixes the widths; its pattern is the Llama default for that size. Search and extrapolation swap the
pattern and keep the widths (``get_preset("llama-3.2-1b").arch.with_pattern("AAMMMM")``).
"""

from __future__ import annotations

from dataclasses import dataclass

from composer.config import ArchConfig
from composer.errors import ConfigError
from primitives.rope import RopeScaling


@dataclass(frozen=True)
class Preset:
    name: str
    arch: ArchConfig
    description: str
    source: str


# Llama 3.2 extends its 8K pretraining context 32x; Llama 3.1 8x (Hugging Face config.json "rope_scaling").
_LLAMA_3_2_ROPE = RopeScaling(factor=32.0, low_freq_factor=1.0, high_freq_factor=4.0, original_max_seq_len=8192)
_LLAMA_3_1_ROPE = RopeScaling(factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0, original_max_seq_len=8192)
_LLAMA_VOCAB = 128_256

_PRESETS: tuple[Preset, ...] = (
    Preset(
        name="llama-3.2-1b",
        arch=ArchConfig(
            pattern="(AM)x16", d_model=2048, n_heads=32, n_kv_heads=8, head_dim=64, ffn_dim=8192,
            vocab_size=_LLAMA_VOCAB, tie_embeddings=True, rope_scaling=_LLAMA_3_2_ROPE, max_seq_len=131_072,
        ),
        description="Llama 3.2 1B: 16 blocks, tied embeddings (1,235,814,400 parameters)",
        source="meta-llama/Llama-3.2-1B config.json",
    ),
    Preset(
        name="llama-3.2-3b",
        arch=ArchConfig(
            pattern="(AM)x28", d_model=3072, n_heads=24, n_kv_heads=8, head_dim=128, ffn_dim=8192,
            vocab_size=_LLAMA_VOCAB, tie_embeddings=True, rope_scaling=_LLAMA_3_2_ROPE, max_seq_len=131_072,
        ),
        description="Llama 3.2 3B: 28 blocks, tied embeddings (3,212,749,824 parameters)",
        source="meta-llama/Llama-3.2-3B config.json",
    ),
    Preset(
        name="llama-3.1-8b",
        arch=ArchConfig(
            pattern="(AM)x32", d_model=4096, n_heads=32, n_kv_heads=8, head_dim=128, ffn_dim=14336,
            vocab_size=_LLAMA_VOCAB, tie_embeddings=False, rope_scaling=_LLAMA_3_1_ROPE, max_seq_len=131_072,
        ),
        description="Llama 3.1 8B: 32 blocks, untied embeddings (8,030,261,248 parameters)",
        source="meta-llama/Llama-3.1-8B config.json",
    ),
    Preset(
        # Not an official Llama size. Llama-3.2-1B's depth (16 blocks), head dim 64 and 8 KV heads at half its
        # width; FFN 3.5x d_model (a multiple of 256) brings the total to ~358M with the Llama-3 vocabulary.
        name="llama-350m",
        arch=ArchConfig(
            pattern="(AM)x16", d_model=1024, n_heads=16, n_kv_heads=8, head_dim=64, ffn_dim=3584,
            vocab_size=_LLAMA_VOCAB, tie_embeddings=True, rope_scaling=_LLAMA_3_2_ROPE, max_seq_len=131_072,
        ),
        description="~350M Llama-3.2-style shape (not an official size): d 1024, 16 blocks, FFN 3584",
        source="this project (see composer/presets.py)",
    ),
    Preset(
        # Search width: MAD's model width 128 (Poli et al. 2024) with the paper's 6-layer search depth; the
        # vocabulary is the offline byte tokenizer's size rounded up (MAD tasks override it with their own).
        name="search-1m",
        arch=ArchConfig(
            pattern="(AM)x3", d_model=128, n_heads=4, n_kv_heads=2, head_dim=32, ffn_dim=512,
            vocab_size=512, tie_embeddings=True, max_seq_len=2048,
            # MAD sequences are 32-256 tokens: W's default 4096-token window would make it full attention
            # there. 64 keeps it local at search scale, as 4096 is at the 8K training context.
            options={"W": {"window": 64}},
        ),
        description="search width (~0.8M parameters): d 128, MAD's width, 6 layers",
        source="this project; width from MAD (Poli et al. 2024)",
    ),
    Preset(
        # The CPU demo pipeline's target: what the searched search-1m pattern is extrapolated to and pretrained at
        # on a laptop. Wider than the search (d 192 vs 128) and Llama-3.2-1B's 16 layers, ~4.3M non-embedding
        # parameters: big enough that stacking is not a no-op, small enough to train four models in minutes.
        name="demo-4m",
        arch=ArchConfig(
            pattern="(AM)x8", d_model=192, n_heads=6, n_kv_heads=2, head_dim=32, ffn_dim=768,
            vocab_size=512, tie_embeddings=True, max_seq_len=2048,
        ),
        description="CPU demo target (~4.4M parameters): d 192, 16 layers, for the end-to-end demo pipeline",
        source="this project",
    ),
    Preset(
        name="tiny",
        arch=ArchConfig(
            pattern="(AM)x2", d_model=64, n_heads=4, n_kv_heads=2, head_dim=16, ffn_dim=256,
            vocab_size=256, tie_embeddings=True, max_seq_len=1024,
        ),
        description="test width (~140K parameters): d 64, 4 layers, for unit tests and CPU smoke runs",
        source="this project",
    ),
)

PRESETS: dict[str, Preset] = {preset.name: preset for preset in _PRESETS}


def get_preset(name: str) -> Preset:
    """A named preset, or ``NAME:dD``: NAME's widths scaled to ``d_model = D`` (``composer.widths``: how a pattern
    grown at a chosen depth reaches the target's size)."""
    if name in PRESETS:
        return PRESETS[name]
    from composer.widths import SCALED_NAME, scale_widths

    scaled = SCALED_NAME.fullmatch(str(name))
    if scaled and scaled.group("base") in PRESETS:
        base = PRESETS[scaled.group("base")]
        arch = scale_widths(base.arch, int(scaled.group("d_model")))
        return Preset(name=name, arch=arch, description=f"{base.name}'s widths scaled to d_model {arch.d_model}",
                      source=f"{base.source}; widths scaled by composer.widths")
    raise ConfigError(f"unknown preset {name!r}; choose one of: {', '.join(PRESETS)} (or NAME:dD, NAME's widths at "
                      "d_model D)") from None


def scaled_name(base: str, d_model: int) -> str:
    """The preset name of ``base``'s widths at ``d_model`` (``base`` itself where nothing is scaled). A ``base``
    already scaled (``demo-4m:d384``) is rescaled from its named preset (``demo-4m:d400``, the same widths), since
    ``NAME:dD`` takes one scale: a search whose target is a scaled preset grows to a name it can read again."""
    if get_preset(base).arch.d_model == d_model:
        return base
    from composer.widths import SCALED_NAME

    scaled = SCALED_NAME.fullmatch(base)
    root = scaled.group("base") if scaled and scaled.group("base") in PRESETS else base
    return root if get_preset(root).arch.d_model == d_model else f"{root}:d{d_model}"


def family_architecture(spec: str, base: ArchConfig) -> ArchConfig | None:
    """A published hybrid family (``composer.layouts.FAMILIES``) at ``base``'s widths, or None when ``spec``
    names none. ``jamba`` takes the depth whose non-embedding parameters are nearest ``base``'s own (so
    ``jamba --preset llama-3.2-1b`` is a Jamba the size of Llama 3.2 1B) in whole periods of its layout, so
    its published ratios hold; ``jamba:64`` takes 64 layers (symbols)."""
    from composer.accounting import non_embedding_params
    from composer.layouts import FAMILIES, matched_depth

    name, _, depth = spec.partition(":")
    if name not in FAMILIES:
        return None
    family = FAMILIES[name]
    if depth:
        if not depth.isdigit():
            raise ConfigError(f"{spec!r}: the depth after ':' must be a number of layers, e.g. {name}:"
                              f"{4 * family.period}")
        return base.with_pattern(family.pattern(int(depth)))
    pattern = matched_depth(family.generator, lambda p: non_embedding_params(base.with_pattern(p)),
                            non_embedding_params(base), family.period)
    return base.with_pattern(pattern)


def default_preset_note(preset: str, what: str, flag: str = "--preset", why: str = "the default") -> str:
    """The line a command prints where it chose a preset itself, not the user (issue 49: ``train --arch`` without
    ``--preset`` silently built a tiny model, and the default differs by command): which preset, what it sizes,
    why, and the flag that sets it. E.g. "preset tiny: the widths of --arch AM (the default; --preset sets them)"."""
    return f"{flag.removeprefix('--')} {preset}: {what} ({why}; {flag} sets them)"


def resolve_architecture(spec: str, preset: str | None, default_preset: str) -> tuple[ArchConfig, str]:
    """``spec`` is a preset name, a published hybrid family (``jamba``, ``jamba:64``: :func:`family_architecture`)
    or a pattern, the last two at the widths of ``preset`` (default ``default_preset``).

    Returns the config and the name of the preset whose widths it uses.
    """
    from composer.errors import PatternError
    from primitives.registry import REGISTRY

    if spec in PRESETS:
        if preset is not None:
            raise ConfigError(f"{spec!r} is a preset already; drop --preset or give a pattern instead")
        return PRESETS[spec].arch, spec
    widths = preset or default_preset
    base = get_preset(widths).arch
    family = family_architecture(spec, base)
    if family is not None:
        return family, widths
    try:
        return base.with_pattern(spec), widths
    except PatternError as err:
        if spec[:1].islower():  # looks like a mistyped preset name rather than a pattern
            raise ConfigError(
                f"{spec!r} is neither a preset ({', '.join(PRESETS)}), a hybrid family ({', '.join(_family_names())}) "
                f"nor a pattern of {REGISTRY.describe()}"
            ) from err
        raise


def _family_names() -> list[str]:
    from composer.layouts import FAMILIES

    return list(FAMILIES)
