"""The one error type of the data pipeline.

Data problems (a path that does not exist, an unsupported file type, a missing text field, a tokenizer or
dataset that cannot be loaded) are user errors: the CLI prints a ``ComposerUsageError`` on one line and exits
with status 2. Errors raised by ``datasets``, ``transformers`` and ``huggingface_hub`` are wrapped into a
``DataError`` whose message names the problem and the fix, instead of surfacing a deep library traceback.
"""

from __future__ import annotations

from composer.errors import ComposerUsageError


class DataError(ComposerUsageError):
    """A source, tokenizer or data setting that cannot be used. The message names the problem and the fix."""


def describe(err: BaseException, limit: int = 200) -> str:
    """``TypeName: first line of the message``, shortened, to embed a library error in a one-line message."""
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    text = lines[0] if lines else ""
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


__all__ = ["DataError", "describe"]
