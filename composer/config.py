"""Architecture config: a layer pattern plus the widths its primitives are built with."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from composer.errors import ConfigError, PatternError
from composer.pattern import compact_pattern, counts, layers, n_layers, parse_pattern
from primitives.base import Widths
from primitives.rope import RopeScaling


def option_names(cls: Any, widths: Widths) -> list[str] | None:
    """The options ``--options`` may give primitive ``cls``: its config's fields that the shared widths do not set,
    found by offering each field (at the value it takes without options) to ``config_from_arch``. None where the
    primitive has no config dataclass or builds none without options (a parallel layer's options are its parts')."""
    config_class = getattr(cls, "Config", None)
    if not dataclasses.is_dataclass(config_class):
        return None
    bare = dataclasses.replace(widths, options={})
    try:
        base = cls.config_from_arch(bare)
    except (TypeError, ValueError):
        return None
    names = []
    for name in (f.name for f in dataclasses.fields(config_class)):
        try:
            cls.config_from_arch(dataclasses.replace(bare, options={cls.symbol: {name: getattr(base, name)}}))
        except (TypeError, ValueError, KeyError):
            continue  # set from the widths ("got multiple values"), or refused as an option
        names.append(name)
    return names


@dataclass(frozen=True)
class ArchConfig:
    """Everything needed to build a model, and nothing about how it is trained.

    ``pattern`` is canonicalised on construction (``"(AM)x2"`` becomes ``"AMAM"``). The widths are shared by
    all primitives; ``options`` holds per-symbol extras a primitive's config accepts, e.g.
    ``{"A": {"backend": "sdpa"}}``.
    """

    pattern: str
    d_model: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    ffn_dim: int
    vocab_size: int
    tie_embeddings: bool = True
    norm_eps: float = 1e-5
    rope_theta: float = 500_000.0
    rope_scaling: RopeScaling | None = None
    max_seq_len: int = 8192
    init_std: float = 0.02
    options: dict[str, dict[str, Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "pattern", parse_pattern(self.pattern))
        for name in ("d_model", "n_heads", "n_kv_heads", "head_dim", "ffn_dim", "vocab_size", "max_seq_len"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ConfigError(f"{name} must be a positive integer, got {value!r}")
        if not (self.norm_eps > 0 and self.rope_theta > 0 and self.init_std > 0):
            raise ConfigError("norm_eps, rope_theta and init_std must be positive")
        if isinstance(self.rope_scaling, dict):
            try:
                object.__setattr__(self, "rope_scaling", RopeScaling(**self.rope_scaling))
            except (TypeError, ValueError) as err:
                raise ConfigError(f"invalid rope_scaling {self.rope_scaling}: {err}") from err
        from primitives.registry import REGISTRY

        for symbol in self.options:
            if symbol not in REGISTRY:
                raise ConfigError(
                    f"options for unknown primitive {symbol!r}; registered: {REGISTRY.describe()}"
                )
        self.primitive_configs()  # fail now, with the primitive's message, rather than at build time

    # -- views --------------------------------------------------------------------------------------------
    @property
    def n_layers(self) -> int:
        return n_layers(self.pattern)

    @property
    def layers(self) -> list[str]:
        """One token per layer: a primitive symbol or a parallel layer such as ``"[AS]"``."""
        return layers(self.pattern)

    @property
    def compact(self) -> str:
        return compact_pattern(self.pattern)

    @property
    def counts(self) -> dict[str, int]:
        return counts(self.pattern)

    def options_for(self, symbol: str) -> dict[str, Any]:
        return dict(self.options.get(symbol, {}))

    @property
    def widths(self) -> Widths:
        """What the primitives' configs are built from (``primitives.base.Widths``)."""
        return Widths(d_model=self.d_model, n_heads=self.n_heads, n_kv_heads=self.n_kv_heads,
                      head_dim=self.head_dim, ffn_dim=self.ffn_dim, norm_eps=self.norm_eps,
                      rope_theta=self.rope_theta, rope_scaling=self.rope_scaling, options=self.options)

    def primitive_configs(self) -> dict[str, Any]:
        """Config of each layer token the pattern uses (a primitive or a parallel layer), keyed by token."""
        from primitives.registry import REGISTRY

        configs = {}
        widths = self.widths
        for symbol in dict.fromkeys(self.layers):
            cls = REGISTRY.get(symbol)
            try:
                configs[symbol] = cls.config_from_arch(widths)
            except (TypeError, ValueError) as err:
                valid = option_names(cls, widths)
                unknown = sorted(set(widths.options_for(symbol)) - set(valid or ()))
                if valid is not None and unknown:  # a misspelt option (issue 69: "windw" for "window")
                    raise ConfigError(f"unknown option{'s' * (len(unknown) > 1)} {', '.join(map(repr, unknown))} "
                                      f"for primitive {symbol} ({cls.name}) in --options; valid: "
                                      f"{', '.join(valid)}") from None
                raise ConfigError(f"invalid config for primitive {symbol} ({cls.name}): {err}") from err
        return configs

    # -- derivation ---------------------------------------------------------------------------------------
    def with_pattern(self, pattern: str) -> ArchConfig:
        return dataclasses.replace(self, pattern=pattern)

    def replace(self, **changes: Any) -> ArchConfig:
        unknown = set(changes) - {f.name for f in dataclasses.fields(self)}
        if unknown:
            raise ConfigError(f"unknown architecture field(s) {sorted(unknown)}; valid: {_field_names()}")
        return dataclasses.replace(self, **changes)

    # -- serialisation ------------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["rope_scaling"] = dataclasses.asdict(self.rope_scaling) if self.rope_scaling else None
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ArchConfig:
        unknown = set(data) - set(_field_names())
        if unknown:
            raise ConfigError(f"unknown architecture field(s) {sorted(unknown)}; valid: {_field_names()}")
        try:
            return cls(**data)
        except TypeError as err:  # missing required fields
            raise ConfigError(f"incomplete architecture config: {err}") from err


def _field_names() -> list[str]:
    return [f.name for f in dataclasses.fields(ArchConfig)]


__all__ = ["ArchConfig", "ConfigError", "PatternError"]
