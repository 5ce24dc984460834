"""The data preflight: what a command checks of its data before it writes ``--out`` or starts a run (issue 61).

Every command that trains (``composer train``, ``search``, ``pipeline``, ``hybridize``) and ``composer eval``'s
recall calls :func:`check_data` first, so that a source without text, records without the text field or a
tokenizer that does not load are one line and an untouched ``--out``, not a run that starts and fails in its first
step. Cheap: one document of a local source is read, the tokenizer is loaded, nothing is tokenised.
"""

from __future__ import annotations

from composer.data.sources import check_source
from composer.data.tokenizer import ByteTokenizer, HFTokenizer, load_tokenizer


def check_data(data: str | None, text_field: str = "text", tokenizer: str | None = None
               ) -> ByteTokenizer | HFTokenizer:
    """Check that ``data`` opens and holds text in ``text_field`` (``check_source``) and that ``tokenizer`` loads;
    return the tokenizer. Each failure is a one-line ``DataError`` (a usage error: exit status 2)."""
    check_source(data, text_field)
    return load_tokenizer(tokenizer)


__all__ = ["check_data"]
