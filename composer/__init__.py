"""Composer core: architecture spec (pattern grammar + widths), presets, model assembly and accounting."""

from composer.accounting import ArchStats, analyze
from composer.config import ArchConfig
from composer.errors import ComposerUsageError, ConfigError, PatternError
from composer.model import CausalLMOutput, ComposerModel, build_model
from composer.pattern import compact_pattern, parse_pattern
from composer.presets import PRESETS, Preset, get_preset

__all__ = [
    "PRESETS",
    "ArchConfig",
    "ArchStats",
    "CausalLMOutput",
    "ComposerModel",
    "ComposerUsageError",
    "ConfigError",
    "PatternError",
    "Preset",
    "analyze",
    "build_model",
    "compact_pattern",
    "get_preset",
    "parse_pattern",
]
