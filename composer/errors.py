"""Errors the CLI prints on one line: usage errors (exit status 2) and runs that failed for a stated reason (1)."""


class ComposerUsageError(ValueError):
    """Bad user input (pattern, preset, config value). The message names the problem and the fix."""


class PatternError(ComposerUsageError):
    """A layer pattern that does not parse or uses an unknown primitive."""


class ConfigError(ComposerUsageError):
    """An architecture config, preset or option that is invalid or unknown."""


class ComposerRunError(RuntimeError):
    """A run that could not produce its result (e.g. training diverged); the message says why and what to try."""
