"""Composer core: architecture spec (pattern grammar + widths), presets, model assembly and accounting.

The core's modules sit here; the rest of the package lives in rooms: ``data``, ``training``, ``hybridize``,
``interop``, ``evaluation``, ``experiments`` and ``cli`` (README's "Repository layout").
"""

import sys
from importlib.machinery import PathFinder

from composer.accounting import ArchStats, analyze
from composer.config import ArchConfig
from composer.errors import ComposerUsageError, ConfigError, MovedModuleFinder, PatternError
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

# An import of a module that moved into a room fails with one line naming its new path (composer.errors). Right
# after the path finder: asked only for what the files do not hold, and before an editable install's finder,
# which would otherwise serve the module from another checkout.
if not any(isinstance(finder, MovedModuleFinder) for finder in sys.meta_path):
    _after = next((i + 1 for i, finder in enumerate(sys.meta_path) if finder is PathFinder), len(sys.meta_path))
    sys.meta_path.insert(_after, MovedModuleFinder())
    del _after
