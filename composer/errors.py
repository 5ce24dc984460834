"""Errors a user can fix by changing their input; the CLI prints them on one line and exits with status 2."""


class ComposerUsageError(ValueError):
    """Bad user input (pattern, preset, config value). The message names the problem and the fix."""


class PatternError(ComposerUsageError):
    """A layer pattern that does not parse or uses an unknown primitive."""


class ConfigError(ComposerUsageError):
    """An architecture config, preset or option that is invalid or unknown."""
