"""Where documents come from: the default corpus, local files, or a Hugging Face hub dataset.

``resolve_source`` turns ``DataConfig.source`` into a ``Source`` that can (a) describe itself for the cache
key (``identity``), (b) yield batches of document texts once, for tokenising into the cache (``iter_texts``),
and (c) open a ``datasets.IterableDataset`` for streaming (``open_stream``). Local files and hub datasets both
go through ``datasets.load_dataset`` with its own builders (``text``, ``json``, ``parquet``), read lazily
(``streaming=True``) so a materialised source is never copied into an Arrow cache next to our token cache.

How a string is classified: a glob (``*``, ``?``, ``[``) or an existing path is local; a string that looks
like a path (starts with ``/``, ``.`` or ``~``, or ends with a data-file suffix) but does not exist is a
missing local path; anything else (``org/name`` or ``name``, with an optional ``:config``) is a hub dataset
name.
"""

from __future__ import annotations

import glob as globlib
import hashlib
import re
from abc import ABC, abstractmethod
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from composer.data import stdlib_corpus
from composer.data.config import DataConfig
from composer.data.errors import DataError, describe

BUILDERS = {".txt": "text", ".jsonl": "json", ".json": "json", ".parquet": "parquet"}
COMPRESSIONS = (".gz", ".zst", ".bz2", ".xz")
_SUPPORTED = ".txt, .jsonl, .json or .parquet files (text and JSON may be .gz/.zst/.bz2/.xz compressed)"
_HUB_NAME = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?(:[\w.-]+)?$")
_DATA_SUFFIX = re.compile(
    r"\.(txt|jsonl|json|parquet|csv|tsv|arrow|npy|bin)(\.(gz|zst|bz2|xz))?$", re.IGNORECASE
)
_READ_BATCH = 1000


class Source(ABC):
    """A corpus of documents. Subclasses say how to list, identify, read and stream it."""

    description: str
    slug: str
    streams_by_default: bool = False

    @abstractmethod
    def identity(self) -> dict[str, Any]:
        """Everything that determines the documents, for the cache key (paths, sizes, mtimes, versions)."""

    @abstractmethod
    def iter_texts(self, config: DataConfig) -> Iterator[list[str]]:
        """Batches of non-empty document texts in a fixed order, at most ``config.max_documents`` in all."""

    def open_stream(self, config: DataConfig) -> Any:
        """A ``datasets.IterableDataset`` of the documents, for streaming."""
        raise DataError(
            f"{self.description} cannot be streamed; leave streaming unset (None) or False to materialise it"
        )

    def text_field(self, config: DataConfig) -> str:
        return config.text_field

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.description})"


class StdlibSource(Source):
    """The offline default corpus (see ``composer.data.stdlib_corpus`` for origin and licence)."""

    def __init__(self) -> None:
        self.root = stdlib_corpus.stdlib_root()
        self.files = stdlib_corpus.stdlib_files(self.root)
        if not self.files:
            raise DataError(
                f"the default corpus is empty: no .py files under {str(self.root)!r}; pass as source a "
                "local file or a Hugging Face dataset name"
            )
        version = stdlib_corpus.identity(self.files, self.root)["python"]
        self.description = (
            f"the Python {version} standard library ({len(self.files)} files, {stdlib_corpus.LICENSE})"
        )
        self.slug = f"python{version}-stdlib"

    def identity(self) -> dict[str, Any]:
        return stdlib_corpus.identity(self.files, self.root)

    def iter_texts(self, config: DataConfig) -> Iterator[list[str]]:
        files = self.files if config.max_documents is None else self.files[: config.max_documents]
        for start in range(0, len(files), _READ_BATCH):
            texts = [t for t in stdlib_corpus.iter_documents(files[start : start + _READ_BATCH]) if t]
            if texts:
                yield texts


class _DatasetsSource(Source):
    """A source read through ``datasets.load_dataset``; shared reading, field checks and error wrapping."""

    @abstractmethod
    def _load(self, config: DataConfig) -> Any: ...

    def open_stream(self, config: DataConfig) -> Any:
        try:
            return self._load(config)
        except DataError:
            raise
        except Exception as err:  # noqa: BLE001 - wrapped into a one-line DataError
            raise self._load_error(err) from None

    @abstractmethod
    def _load_error(self, err: Exception) -> DataError: ...

    def iter_texts(self, config: DataConfig) -> Iterator[list[str]]:
        field = self.text_field(config)
        remaining = config.max_documents
        stream = self.open_stream(config)
        batches = stream.iter(batch_size=_READ_BATCH)
        while remaining is None or remaining > 0:
            try:
                batch = next(batches)
            except StopIteration:
                return
            except DataError:
                raise
            except Exception as err:  # noqa: BLE001 - wrapped into a one-line DataError
                raise self._read_error(err) from None
            texts = document_texts(batch, field, self.description)
            if remaining is not None:
                texts = texts[:remaining]
                remaining -= len(texts)
            if texts:
                yield texts

    def _read_error(self, err: Exception) -> DataError:
        return DataError(f"could not read {self.description} ({describe(err)}); check that the data is valid "
                         f"{self._format_name()}")

    def _format_name(self) -> str:
        return "text"


class LocalFiles(_DatasetsSource):
    """Local files of one type, read by the matching ``datasets`` builder; one shard per file."""

    def __init__(self, spec: str, files: list[Path], builder: str) -> None:
        self.spec = spec
        self.files = files
        self.builder = builder
        kind = {"text": "text", "json": "JSON", "parquet": "Parquet"}[builder]
        plural = "s" if len(files) != 1 else ""
        self.description = f"{spec!r} ({len(files)} {kind} file{plural})"
        self.slug = _slug(Path(spec.rstrip("/")).name or "local")

    def identity(self) -> dict[str, Any]:
        listing = []
        for path in self.files:
            stat = path.stat()
            listing.append([str(path.resolve()), stat.st_size, stat.st_mtime_ns])
        return {"kind": "local", "builder": self.builder, "files": listing}

    def text_field(self, config: DataConfig) -> str:
        return "text" if self.builder == "text" else config.text_field

    def _load(self, config: DataConfig) -> Any:
        import logging

        from datasets import load_dataset

        # the json builder logs a parse error on a line of its own before raising it; _read_error reports it in one
        logging.getLogger("datasets.packaged_modules.json.json").setLevel(logging.CRITICAL)
        kwargs: dict[str, Any] = {"sample_by": config.text_unit} if self.builder == "text" else {}
        return load_dataset(
            self.builder, data_files=[str(p) for p in self.files], split="train", streaming=True, **kwargs
        )

    def _load_error(self, err: Exception) -> DataError:
        return DataError(
            f"could not load {self.description} ({describe(err)}); check that the files are valid "
            f"{self._format_name()}"
        )

    def _read_error(self, err: Exception) -> DataError:
        """A JSON-lines file's first malformed line by its number from 1, as an editor shows it (issue 69: Arrow's
        "in row 1" counts from 0 within a block, and came on two lines); other read errors as the base class's."""
        if self.builder == "json":
            for path in self.files:
                bad = first_bad_json_line(path)
                if bad is not None:
                    return DataError(f"{str(path)!r} line {bad[0]:,} {bad[1]}; fix or remove that line")
        return super()._read_error(err)

    def _format_name(self) -> str:
        return {"text": "UTF-8 text", "json": "JSON or JSON lines", "parquet": "Parquet"}[self.builder]


class HubDataset(_DatasetsSource):
    """A Hugging Face hub dataset (``name`` or ``name:config``), split ``train``; streamed by default."""

    streams_by_default = True

    def __init__(self, spec: str) -> None:
        name, _, config_name = spec.partition(":")
        self.name = name
        self.config_name = config_name or None
        self.description = f"Hugging Face dataset {name!r}" + (
            f" (config {config_name!r})" if config_name else ""
        )
        self.slug = _slug(name.replace("/", "--") + (f"--{config_name}" if config_name else ""))

    def identity(self) -> dict[str, Any]:
        return {"kind": "hub", "name": self.name, "config": self.config_name}

    def _load(self, config: DataConfig) -> Any:
        from datasets import load_dataset

        return load_dataset(self.name, self.config_name, split="train", streaming=True)

    def _load_error(self, err: Exception) -> DataError:
        return DataError(
            f"could not load {self.description}: unknown dataset or config, or the Hugging Face hub is "
            f"unreachable ({describe(err)}); check the name and network access, or pass a local file, "
            "directory or glob as the source"
        )


def first_bad_json_line(path: Path) -> tuple[int, str] | None:
    """The number (from 1) of the first non-empty line of a JSON-lines file that is not a JSON object, with what is
    wrong with it ("is not valid JSON (...)"); None when every line is one, or when the file is a single JSON
    document (which the json builder reads too). Read only after a read failed: its cost is the error path's."""
    import bz2
    import gzip
    import json
    import lzma

    opener = {".gz": gzip.open, ".bz2": bz2.open, ".xz": lzma.open}.get(path.suffix)
    if opener is None and path.suffix == ".zst":
        return None
    with (opener or open)(path, "rt", encoding="utf-8", errors="replace") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                value = json.loads(line)
            except json.JSONDecodeError as err:
                problem = f"is not valid JSON ({err.msg} at column {err.colno})"
            else:
                if isinstance(value, dict):
                    continue
                problem = f"holds a JSON {type(value).__name__}, not an object"
            break
        else:
            return None
    with (opener or open)(path, "rt", encoding="utf-8", errors="replace") as handle:
        try:
            json.load(handle)  # one JSON document over several lines: not a JSON-lines file
            return None
        except json.JSONDecodeError:
            return number, problem


def document_texts(batch: dict[str, list[Any]], field: str, description: str) -> list[str]:
    """The non-empty texts of a batch of rows; a missing or non-text field is a ``DataError``."""
    if field not in batch:
        available = ", ".join(sorted(batch)) or "none"
        raise DataError(
            f"text field {field!r} not found in {description}; available fields: {available}; "
            "set text_field (--text-field) to the column that holds the text"
        )
    texts = []
    for value in batch[field]:
        if value is None:
            continue
        if not isinstance(value, str):
            raise DataError(
                f"field {field!r} of {description} holds {type(value).__name__} values, not text; "
                "set text_field (--text-field) to the column that holds the text"
            )
        if value:
            texts.append(value)
    return texts


def check_source(spec: str | None, text_field: str = "text") -> Source:
    """Read the first document of a local source: JSON or Parquet records without ``text_field`` (issue 47) and a
    source with no text at all (an empty ``.txt``, issue 61) are a ``DataError`` here, in a second, before a command
    writes its ``--out`` or starts a run, instead of the same error in every run that trains on it. The default
    corpus is checked when it is found, and a hub dataset is left to its first run (reading it may take the
    network). Returns the source it resolved."""
    source = resolve_source(spec)
    if isinstance(source, LocalFiles):
        if next(source.iter_texts(DataConfig(source=spec, text_field=text_field, max_documents=1)), None) is None:
            raise DataError(no_documents(source))
    return source


def no_documents(source: Source) -> str:
    """The error of a source without a single non-empty document."""
    return f"{source.description} has no non-empty documents; pass a source with text in it"


def builder_for(path: Path) -> str | None:
    """The ``datasets`` builder for a file name, or None when the type is unsupported."""
    name = path.name.lower()
    for compression in COMPRESSIONS:
        if name.endswith(compression):
            name = name[: -len(compression)]
            if name.endswith(".parquet"):
                return None  # parquet compresses internally
            break
    return BUILDERS.get(Path(name).suffix)


def resolve_source(spec: str | None) -> Source:
    """The ``Source`` for ``DataConfig.source`` (see the module docstring for how strings are classified)."""
    if spec is None:
        return StdlibSource()
    spec = str(spec).strip()
    if any(ch in spec for ch in "*?["):
        matches = [Path(p) for p in sorted(globlib.glob(str(Path(spec).expanduser()), recursive=True))]
        files = [p for p in matches if p.is_file()]
        if not files:
            raise DataError(
                f"glob {spec!r} matches no files; pass an existing file, directory or glob, or a Hugging "
                "Face dataset name"
            )
        return _local(spec, files)
    path = Path(spec).expanduser()
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file() and not _hidden(p, path) and builder_for(p))
        if not files:
            raise DataError(f"directory {spec!r} has no {_SUPPORTED}; put data files in it or pass a file")
        return _local(spec, files)
    if path.is_file():
        return _local(spec, [path])
    if spec.startswith(("/", ".", "~")) or _DATA_SUFFIX.search(spec) or not _HUB_NAME.match(spec):
        raise DataError(
            f"dataset path {spec!r} does not exist; pass an existing file, directory or glob, or a "
            "Hugging Face dataset name"
        )
    return HubDataset(spec)


def _local(spec: str, files: list[Path]) -> LocalFiles:
    builders = {}
    for path in files:
        builder = builder_for(path)
        if builder is None:
            suffix = "".join(path.suffixes) or path.name
            raise DataError(f"unsupported file type {suffix!r} for {str(path)!r}; use {_SUPPORTED}")
        builders.setdefault(builder, path)
    if len(builders) > 1:
        kinds = ", ".join(f"{b} ({p.name})" for b, p in builders.items())
        raise DataError(f"{spec!r} mixes file types: {kinds}; keep one type per source")
    return LocalFiles(spec, files, next(iter(builders)))


def _hidden(path: Path, root: Path) -> bool:
    return any(part.startswith(".") for part in path.relative_to(root).parts)


def _slug(text: str) -> str:
    slug = re.sub(r"[^\w.-]+", "_", text).strip("._")[:48]
    return slug or hashlib.sha256(text.encode()).hexdigest()[:8]


__all__ = ["BUILDERS", "HubDataset", "LocalFiles", "Source", "StdlibSource", "builder_for", "check_source",
           "no_documents", "resolve_source"]
