"""A recall-bearing share of the training stream: windows in which a span of the window's own text comes again.

Why: at the budgets a CPU can train (a few million tokens of 512-byte windows), natural text repeats too little
for a small model to learn to retrieve from its context, so no trained model shows recall, with attention or
without (issue 48's figures). Recall-bearing snippets mixed into pretraining make the retrieval circuit form
earlier (arXiv 2509.22947). Here a ``share`` of the training windows gets one span of ``span`` tokens, cut from
the window's own text, written again at a later position of the same window: predicting the second copy is
easy for a model that looks back and as hard as the text for one that cannot. The spans are text the model
trains on anyway, not random tokens, so the trained model's copy gain on random spans
(:mod:`composer.evaluation.context_recall`) stays a test of retrieval it never saw in training.

Which windows, and where their two copies sit, depend only on ``seed`` and the window's position in the global
chunk stream, so a resumed run sees the windows an uninterrupted one would, and two runs with one training seed
see the same repeats. Validation is never changed: the held-out text that scores every run stays plain text.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from composer.data.errors import DataError

BYTE_SPAN, SUBWORD_SPAN = 64, 32  # about a line of text or code in bytes; about 130 bytes of English in subwords
STREAM_SALT = 0x5E9EA7  # keeps these draws apart from any other use of the training seed


def default_span(byte_level: bool, seq_len: int) -> int:
    """64 bytes or 32 subword tokens, at most a quarter of the context (room for two copies and text between)."""
    return max(2, min(BYTE_SPAN if byte_level else SUBWORD_SPAN, seq_len // 4))


def check_settings(share: Any, span: Any) -> None:
    """``repeat_share`` a fraction of the windows and ``repeat_span`` (None: the default) a positive token count:
    a ``DataConfig`` checks them when it is made, a ``RepeatedSpans`` when it is built."""
    if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0.0 <= share <= 1.0:
        raise DataError(f"repeat_share must be a fraction of the training windows in [0, 1], got {share!r}")
    if span is not None and (isinstance(span, bool) or not isinstance(span, int) or span < 1):
        raise DataError(f"repeat_span must be a positive token count, got {span!r}")


@dataclass(frozen=True)
class RepeatedSpans:
    """Repeats a span in ``share`` of the windows (each of ``seq_len + 1`` tokens) of the training stream."""

    share: float
    span: int
    seed: int = 0

    def __post_init__(self) -> None:
        check_settings(self.share, self.span)
        if self.span is None:
            raise DataError("repeat_span must be a positive token count, got None")

    def check_fits(self, seq_len: int) -> None:
        """Two copies must fit in a window; say which knob to turn when they do not."""
        if 2 * self.span > seq_len + 1:
            raise DataError(f"repeat_span {self.span} does not fit twice in a window of seq_len {seq_len}; "
                            f"pass a repeat_span of at most {(seq_len + 1) // 2} or a longer seq_len")

    def placement(self, position: int, width: int) -> tuple[int, int] | None:
        """Where the window at global stream ``position`` repeats its span (first copy's start, second's), or
        ``None`` when it is not one of the ``share`` that do. The second copy starts where the first ends or
        later, uniformly, so the distances between copies range from ``span`` to the whole window."""
        rng = np.random.default_rng([self.seed, STREAM_SALT, int(position)])
        if rng.random() >= self.share:
            return None
        first = int(rng.integers(0, width - 2 * self.span + 1))
        second = int(rng.integers(first + self.span, width - self.span + 1))
        return first, second

    def apply(self, windows: np.ndarray, positions: np.ndarray) -> np.ndarray:
        """``windows`` (``[n, seq_len + 1]``, changed in place and returned) with their spans repeated."""
        width = windows.shape[1]
        for row, position in zip(windows, positions):
            where = self.placement(int(position), width)
            if where is not None:
                first, second = where
                row[second:second + self.span] = row[first:first + self.span]
        return windows

    @property
    def identity(self) -> str:
        """What a resumed run must match: a stream with other repeats is other training data."""
        return f"repeat{self.share:g}x{self.span}" if self.share > 0 else ""
