"""The data preflight: what a command checks of its data before it writes ``--out`` or starts a run (issue 61).

Every command that trains (``composer train``, ``search``, ``pipeline``, ``hybridize``) and ``composer eval``'s
recall calls :func:`check_data` first, so that a source without text, records without the text field or a
tokenizer that does not load are one line and an untouched ``--out``, not a run that starts and fails in its first
step. Cheap: one document of a local source is read, the tokenizer is loaded, and only a small local source is
tokenised. A check that passed is not repeated in the process: a search trains every candidate through
``composer train``, whose preflight checked the same data again for every run (the tokenizer reloaded, a small
source tokenised again; issue 69).
"""

from __future__ import annotations

import json

from composer.data.config import DataConfig
from composer.data.errors import DataError
from composer.data.sources import LocalFiles, Source, check_source, resolve_source
from composer.data.tokenizer import ByteTokenizer, HFTokenizer, load_tokenizer

# a local source this small is tokenised whole by the preflight, to count its tokens (a second or less)
SMALL_SOURCE_BYTES = 1 << 20
# the checks that passed in this process, by what they checked (check_key): each tokenizer they loaded
_PASSED: dict[str, ByteTokenizer | HFTokenizer] = {}


def check_data(data: str | None, text_field: str = "text", tokenizer: str | None = None, seq_len: int | None = None,
               max_documents: int | None = None) -> ByteTokenizer | HFTokenizer:
    """Check that ``data`` opens and holds text in ``text_field`` (``check_source``), that ``tokenizer`` loads and,
    with ``seq_len``, that a small local source holds one training sequence (:func:`check_enough_text`); return
    the tokenizer. Each failure is a one-line ``DataError`` (a usage error: exit status 2). A check that passed in
    this process with the same arguments on the same data (:func:`check_key`) returns at once."""
    key = check_key(data, text_field, tokenizer, seq_len, max_documents)
    if key in _PASSED:
        return _PASSED[key]
    source = check_source(data, text_field)
    loaded = load_tokenizer(tokenizer)
    if seq_len is not None:
        check_enough_text(source, text_field, loaded, seq_len, max_documents)
    _PASSED[key] = loaded
    return loaded


def check_key(data: str | None, text_field: str, tokenizer: str | None, seq_len: int | None,
              max_documents: int | None) -> str:
    """What a passed check depends on: its arguments and the source's identity (a local file's path, size and
    modification time: a file rewritten between two checks is checked again). The default corpus, the Python
    standard library the process runs on, does not change under it: named, not listed (listing it takes seconds)."""
    identity = "the default corpus" if data is None else resolve_source(data).identity()
    return json.dumps([identity, text_field, tokenizer, seq_len, max_documents], sort_keys=True, default=str)


def check_enough_text(source: Source, text_field: str, tokenizer: ByteTokenizer | HFTokenizer, seq_len: int,
                      max_documents: int | None = None) -> None:
    """A local source of at most ``SMALL_SOURCE_BYTES`` that holds fewer tokens than one sequence of ``seq_len + 1``
    is a ``DataError`` before a run starts: the data module would find it only after Lightning printed its start-up
    lines and ``--out`` held config.json (issue 61). Larger sources, the default corpus and hub datasets are left to
    the data module: counting them means tokenising them."""
    if not isinstance(source, LocalFiles) or sum(path.stat().st_size for path in source.files) > SMALL_SOURCE_BYTES:
        return
    config = DataConfig(source=source.spec, text_field=text_field, max_documents=max_documents)
    texts = [text for batch in source.iter_texts(config) for text in batch]  # batches of documents
    tokens = len(tokenizer.encode_documents(texts)[0]) if texts else 0
    if tokens < seq_len + 1:
        raise DataError(f"{source.description} holds {tokens:,} tokens, fewer than one sequence of seq_len + 1 = "
                        f"{seq_len + 1:,}; use a larger source or a shorter --seq-len")


__all__ = ["check_data"]
