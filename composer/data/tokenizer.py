"""Tokenizers: the offline byte tokenizer and any Hugging Face tokenizer, behind one small interface.

The pipeline needs four things from a tokenizer: a ``name`` (for messages), a ``vocab_size`` (the model's
vocabulary is sized from it), an ``eos_id`` (the separator appended after every document) and batch encoding.
A ``fingerprint`` identifies the exact vocabulary and merges so that the token cache is rebuilt when a
tokenizer at the same path changes.

The byte tokenizer needs no download: ids 0-255 are the UTF-8 bytes of the text and 256 is EOS, so its
vocabulary is 257 (the ``search-1m`` preset rounds it up to 512). It encodes with numpy at memory bandwidth.

Hugging Face tokenizers load through ``transformers.AutoTokenizer`` by hub name or local directory; the paper
runs use the Llama-3 tokenizer (``LLAMA3_TOKENIZER``, 128,256 ids) and its ``<|end_of_text|>`` as EOS. Special
tokens (Llama's BOS) are not added: documents are separated by EOS only.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from composer.data.errors import DataError, describe

LLAMA3_TOKENIZER = "meta-llama/Llama-3.2-1B"
BYTE_TOKENIZER_NAMES = ("bytes", "byte")
_HUB_NAME = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")


@runtime_checkable
class Tokenizer(Protocol):
    name: str
    vocab_size: int
    eos_id: int
    fingerprint: str

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]: ...

    def encode_documents(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]: ...

    def decode(self, ids: Sequence[int]) -> str: ...


def token_dtype(vocab_size: int) -> np.dtype:
    """Smallest unsigned dtype that holds every id: uint16 up to 65,536 ids, else uint32."""
    return np.dtype(np.uint16) if vocab_size <= 1 << 16 else np.dtype(np.uint32)


class ByteTokenizer:
    """UTF-8 bytes as ids 0-255, EOS 256: lossless, offline, and fast (numpy, ~1 GB/s)."""

    name = "bytes"
    vocab_size = 257
    eos_id = 256
    fingerprint = "bytes-utf8-eos256"

    def encode_arrays(self, texts: Sequence[str]) -> list[np.ndarray]:
        return [np.frombuffer(text.encode("utf-8"), np.uint8) for text in texts]

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        return [array.tolist() for array in self.encode_arrays(texts)]

    def encode_documents(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """All documents as one flat array with EOS after each, plus each document's length (EOS included)."""
        encoded = [text.encode("utf-8") for text in texts]
        lengths = np.fromiter((len(b) + 1 for b in encoded), np.int64, len(encoded))
        out = np.empty(int(lengths.sum()), np.uint16)
        eos_at = np.cumsum(lengths) - 1
        is_text = np.ones(out.size, bool)
        is_text[eos_at] = False
        out[is_text] = np.frombuffer(b"".join(encoded), np.uint8)
        out[eos_at] = self.eos_id
        return out, lengths

    def decode(self, ids: Sequence[int]) -> str:
        """The UTF-8 text of the byte ids; EOS and ids past it (a model's padded vocabulary rows) add nothing."""
        data = bytes(int(i) for i in ids if 0 <= int(i) < 256)
        return data.decode("utf-8", errors="replace")

    def __repr__(self) -> str:
        return "ByteTokenizer(vocab_size=257, eos_id=256)"


class HFTokenizer:
    """A ``transformers`` tokenizer, encoding through its Rust backend when it has one (parallel, quiet)."""

    def __init__(self, tokenizer: Any, name: str) -> None:
        eos_id = tokenizer.eos_token_id
        if eos_id is None:
            raise DataError(
                f"tokenizer {name!r} has no eos token; use a tokenizer that defines one, or set "
                "tokenizer.eos_token before passing it"
            )
        self.hf = tokenizer
        self.name = name
        self.vocab_size = len(tokenizer)  # includes added special tokens, unlike tokenizer.vocab_size
        self.eos_id = int(eos_id)
        self._backend = getattr(tokenizer, "backend_tokenizer", None)
        self.fingerprint = self._fingerprint()

    def _fingerprint(self) -> str:
        if self._backend is not None:
            content = self._backend.to_str()
        else:  # slow tokenizer: the vocabulary is what defines the ids
            content = repr(sorted(self.hf.get_vocab().items()))
        digest = hashlib.sha256(content.encode("utf-8")).hexdigest()[:16]
        return f"hf-{self.vocab_size}-{self.eos_id}-{digest}"

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        texts = list(texts)
        if self._backend is not None:
            return [enc.ids for enc in self._backend.encode_batch_fast(texts, add_special_tokens=False)]
        out = self.hf(texts, add_special_tokens=False, return_attention_mask=False, verbose=False)
        return [list(ids) for ids in out["input_ids"]]

    def encode_documents(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """All documents as one flat array with EOS after each, plus each document's length (EOS included)."""
        dtype = token_dtype(self.vocab_size)
        ids = self.encode_batch(texts)
        lengths = np.fromiter((len(seq) + 1 for seq in ids), np.int64, len(ids))
        out = np.empty(int(lengths.sum()), dtype)
        start = 0
        for seq, length in zip(ids, lengths):
            out[start : start + length - 1] = seq
            out[start + length - 1] = self.eos_id
            start += int(length)
        return out, lengths

    def decode(self, ids: Sequence[int]) -> str:
        return self.hf.decode([int(i) for i in ids])

    def __repr__(self) -> str:
        return f"HFTokenizer({self.name!r}, vocab_size={self.vocab_size}, eos_id={self.eos_id})"


def load_tokenizer(name_or_path: str | os.PathLike | None = None) -> ByteTokenizer | HFTokenizer:
    """The byte tokenizer for ``None``/``"bytes"``, else a Hugging Face tokenizer by local directory or hub
    name.

    A path that exists is loaded with ``local_files_only`` (no network); a hub name goes through the hub (and
    its local cache). Every failure becomes a one-line ``DataError``.
    """
    if name_or_path is None or str(name_or_path).strip().lower() in BYTE_TOKENIZER_NAMES:
        return ByteTokenizer()
    spec = os.fspath(name_or_path).strip()
    path = Path(spec).expanduser()
    local = path.exists()
    if not local and not _HUB_NAME.match(spec):
        raise DataError(
            f"tokenizer path {spec!r} does not exist; pass a directory with tokenizer files, a Hugging Face "
            "tokenizer name (e.g. meta-llama/Llama-3.2-1B), or None for the byte tokenizer"
        )
    try:
        from huggingface_hub.utils import logging as hub_logging
        from transformers import AutoTokenizer
        from transformers.utils import logging as hf_logging

        verbosity, hub_verbosity = hf_logging.get_verbosity(), hub_logging.get_verbosity()
        hf_logging.set_verbosity_error()  # keep "default legacy behaviour" notices off the log
        hub_logging.set_verbosity_error()  # and the hub's "Retrying in 2s" lines (10 of them offline): one line
        try:
            hf = AutoTokenizer.from_pretrained(str(path) if local else spec, local_files_only=local)
        finally:
            hf_logging.set_verbosity(verbosity)
            hub_logging.set_verbosity(hub_verbosity)
    except DataError:
        raise
    except Exception as err:  # noqa: BLE001 - transformers/huggingface_hub raise OSError, ValueError, HTTP...
        if local:
            raise DataError(
                f"could not load a tokenizer from {spec!r} ({describe(err)}); the directory needs "
                "tokenizer.json or tokenizer_config.json with its vocabulary files (save one with "
                "tokenizer.save_pretrained)"
            ) from None
        raise DataError(
            f"could not load tokenizer {spec!r}: unknown name or Hugging Face hub unreachable "
            f"({describe(err)}); check the name and network access (gated models need `hf auth login`), "
            "or pass a local tokenizer directory or None for the byte tokenizer"
        ) from None
    return HFTokenizer(hf, name=spec)


# -- saving a tokenizer with a model, and finding it again ---------------------------------------------------
#
# ``composer train`` writes the tokenizer it trained with into ``<out>/model`` (next to config.json and
# model.safetensors) in the form transformers' ``AutoTokenizer`` loads, and names it in the model's config.json
# (``"tokenizer": "bytes"`` or the Hugging Face name it was loaded from), so ``composer generate``/``export``
# need nothing but the model directory. ``composer export`` writes the same files into a transformers
# checkpoint (one function, :func:`save_tokenizer_files`, does both).

BYTE_EOS_TOKEN = "<|endoftext|>"
# files ``save_pretrained`` may write for a tokenizer; a model directory's stale ones are replaced
TOKENIZER_FILES = (
    "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja",
    "tokenizer.model", "vocab.json", "merges.txt", "added_tokens.json",
)
HF_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")  # either one means "a tokenizer is here"
_MISSING = object()


def byte_tokenizer_fast() -> Any:
    """Composer's byte tokenizer as a ``tokenizers`` object: ids 0-255 are the UTF-8 bytes, 256 is EOS.

    A byte-level BPE with the 256 single-byte symbols as its vocabulary and no merges: its ByteLevel
    pre-tokenizer maps every byte to one symbol (GPT-2's printable byte alphabet), so each byte becomes its
    own id; the ByteLevel decoder maps symbols back to bytes.
    """
    from tokenizers import AddedToken, decoders, models, pre_tokenizers
    from tokenizers import Tokenizer as FastTokenizer

    byte_symbol = _bytes_to_unicode()
    tokenizer = FastTokenizer(models.BPE(vocab={byte_symbol[b]: b for b in range(256)}, merges=[]))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.add_special_tokens([AddedToken(BYTE_EOS_TOKEN, special=True)])
    assert tokenizer.token_to_id(BYTE_EOS_TOKEN) == 256
    return tokenizer


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable character table (what ``pre_tokenizers.ByteLevel`` emits)."""
    printable = [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]  # "!"-"~", "¡"-"¬", "®"-"ÿ"
    codes, extra = list(printable), 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            codes.append(256 + extra)
            extra += 1
    return dict(zip(printable, map(chr, codes)))


def save_tokenizer_files(tokenizer: ByteTokenizer | HFTokenizer, directory: str | Path,
                         max_seq_len: int) -> dict[str, Any]:
    """Write ``tokenizer`` into ``directory`` in the form ``AutoTokenizer.from_pretrained`` loads.

    A Hugging Face tokenizer is re-saved with ``save_pretrained``; the byte tokenizer becomes an equivalent
    ``tokenizer.json`` (byte-level BPE with no merges) that encodes text to the same ids. Returns
    ``description``, ``bos_id`` (``None`` when the tokenizer has none), ``eos_id`` and ``notes``.
    """
    directory = Path(directory)
    if isinstance(tokenizer, ByteTokenizer):
        from transformers import PreTrainedTokenizerFast

        hf = PreTrainedTokenizerFast(
            tokenizer_object=byte_tokenizer_fast(), eos_token=BYTE_EOS_TOKEN, model_max_length=max_seq_len,
            clean_up_tokenization_spaces=False,
        )
        hf.save_pretrained(str(directory))
        # transformers 5 records its own class name (TokenizersBackend), which 4.x cannot resolve; the
        # generic fast-tokenizer class loads the same tokenizer.json in both.
        config_path = directory / "tokenizer_config.json"
        config = json.loads(config_path.read_text())
        config["tokenizer_class"] = "PreTrainedTokenizerFast"
        config_path.write_text(json.dumps(config, indent=2) + "\n")
        return {
            "description": f"byte-level (ids 0-255 = UTF-8 bytes, {BYTE_EOS_TOKEN} = 256) as tokenizer.json",
            "bos_id": None, "eos_id": tokenizer.eos_id,
            "notes": ["byte tokenizer: tokenizer.json encodes text to the ids Composer trained on; it adds "
                      "no BOS token (the model never saw one)"],
        }
    tokenizer.hf.save_pretrained(str(directory))
    bos = tokenizer.hf.bos_token_id
    notes = []
    probe = "a"
    if tokenizer.hf(probe)["input_ids"] != tokenizer.hf(probe, add_special_tokens=False)["input_ids"]:
        notes.append("this tokenizer adds special tokens (e.g. BOS) by default, but Composer trained without "
                     "them: encode with add_special_tokens=False to match training")
    return {"description": f"{tokenizer.name} (Hugging Face tokenizer, re-saved)",
            "bos_id": None if bos is None else int(bos), "eos_id": tokenizer.eos_id, "notes": notes}


def save_model_tokenizer(tokenizer: ByteTokenizer | HFTokenizer | str | None, directory: str | Path,
                         max_seq_len: int, warn=None) -> dict[str, Any]:
    """Save ``tokenizer`` (an object, or a spec as ``composer train --tokenizer`` takes it) into the model
    directory ``directory`` and return the entries that mark it in the model's config.json:
    ``{"tokenizer": "bytes" | <name it was loaded from>, "tokenizer_files": [...]}``.

    The files are staged in a hidden folder and moved in, replacing tokenizer files an earlier save left. A
    failure to write them (``warn`` gets one line) still returns the marker: the byte tokenizer needs no files
    to be reloaded, and a Hugging Face one is then reloaded by name.
    """
    if tokenizer is None or isinstance(tokenizer, (str, os.PathLike)):
        tokenizer = load_tokenizer(tokenizer)
    directory = Path(directory)
    name = "bytes" if isinstance(tokenizer, ByteTokenizer) else tokenizer.name
    stage = directory / f".tokenizer-{os.getpid()}.tmp"
    shutil.rmtree(stage, ignore_errors=True)
    written: list[str] = []
    try:
        stage.mkdir(parents=True)
        save_tokenizer_files(tokenizer, stage, max_seq_len)
        written = sorted(p.name for p in stage.iterdir() if p.is_file())
        for stale in TOKENIZER_FILES:
            if stale not in written and (directory / stale).is_file():
                (directory / stale).unlink()
        for file in written:
            os.replace(stage / file, directory / file)
    except Exception as err:  # noqa: BLE001 - the trained weights matter more than the tokenizer files
        written = []
        if warn is not None:
            warn(f"warning: could not save tokenizer {name!r} with the model ({describe(err)}); it is "
                 "recorded by name in config.json only")
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    return {"tokenizer": name, "tokenizer_files": written}


def _json_entry(path: Path, keys: tuple[str, ...]) -> Any:
    """``data[k1][k2]...`` of a JSON file, or ``_MISSING`` when the file or an entry is not there."""
    try:
        value = json.loads(path.read_text())
    except (OSError, ValueError):
        return _MISSING
    for key in keys:
        if not isinstance(value, dict) or key not in value:
            return _MISSING
        value = value[key]
    return value


def find_tokenizer(model_dir: str | Path) -> tuple[str | None, str]:
    """The tokenizer a model was trained with (a spec for :func:`load_tokenizer`) and where that was read.

    In order: the byte tokenizer named in the model's config.json (``composer train`` writes its tokenizer.json
    too, but the byte tokenizer itself is exact and needs nothing), Hugging Face tokenizer files in the model
    directory, a ``tokenizer`` entry in its config.json, or the run's summary.json/config.json beside it (model
    directories written before tokenizers were saved with the model). ``(None, "not recorded")`` otherwise.
    """
    model_dir = Path(model_dir)
    marker = _json_entry(model_dir / "config.json", ("tokenizer",))
    if isinstance(marker, str) and marker.strip().lower() in BYTE_TOKENIZER_NAMES:
        return "bytes", f"{model_dir.name}/config.json"
    if any((model_dir / name).is_file() for name in HF_TOKENIZER_FILES):
        return str(model_dir), "tokenizer files in the model directory"
    candidates = (
        (model_dir / "config.json", ("tokenizer",)),
        (model_dir.parent / "summary.json", ("tokenizer",)),
        (model_dir.parent / "config.json", ("train", "tokenizer")),
    )
    for path, keys in candidates:
        value = _json_entry(path, keys)
        if value is _MISSING:
            continue
        if value is None or isinstance(value, str):
            # None is composer train's default, the byte tokenizer
            return value or "bytes", f"{path.parent.name}/{path.name}"
    return None, "not recorded"


def load_tokenizer_for(model_dir: str | Path, tokenizer: str | None = None) -> ByteTokenizer | HFTokenizer:
    """The tokenizer of the model in ``model_dir`` (see :func:`find_tokenizer`), or ``tokenizer`` when given.

    Raises a one-line ``DataError`` when none is recorded (a model directory from before tokenizers were saved
    with the model, moved away from its run): pass the tokenizer explicitly then.
    """
    if tokenizer is not None:
        return load_tokenizer(tokenizer)
    spec, _ = find_tokenizer(model_dir)
    if spec is None:
        raise DataError(
            f"no tokenizer is saved with the model in {str(model_dir)!r} (and no run summary beside it names "
            "one); pass --tokenizer NAME_OR_PATH ('bytes' for the offline byte tokenizer)"
        )
    return load_tokenizer(spec)


__all__ = ["BYTE_EOS_TOKEN", "LLAMA3_TOKENIZER", "ByteTokenizer", "HFTokenizer", "Tokenizer", "byte_tokenizer_fast",
           "find_tokenizer", "load_tokenizer", "load_tokenizer_for", "save_model_tokenizer",
           "save_tokenizer_files", "token_dtype"]
