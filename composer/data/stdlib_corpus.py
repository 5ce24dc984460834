"""The offline default corpus: the Python standard library's own source files.

Why this corpus: every machine that runs Composer has it, so tests, CPU smoke runs and CI train on real text
with no download and no network. It is ~11 M bytes of code, comments and docstrings (CPython 3.11, ~670
files), enough for small search runs on the byte tokenizer.

What it is: the ``.py`` files under ``sysconfig.get_paths()["stdlib"]``, sorted by their path relative to that
directory (POSIX separators), one document per file, skipping every directory named ``test``, ``tests``,
``idlelib``, ``site-packages`` or ``dist-packages`` (test suites, the IDLE GUI, and third-party packages,
which are not the standard library and carry other licences). Files are read as UTF-8, with undecodable bytes
replaced.

Origin and licence: the CPython source distribution, https://github.com/python/cpython, under the Python
Software Foundation License Version 2 (PSF-2.0), https://docs.python.org/3/license.html. The content differs
slightly between Python versions and builds, so the Python version (and a digest of the file list) is part of
the token cache key.
"""

from __future__ import annotations

import hashlib
import os
import platform
import sys
import sysconfig
from collections.abc import Iterator
from pathlib import Path

EXCLUDED_DIRS = frozenset({"test", "tests", "idlelib", "site-packages", "dist-packages", "__pycache__"})
LICENSE = "PSF-2.0"
ORIGIN = "https://github.com/python/cpython (Lib/ of the running interpreter's version)"


def stdlib_root() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


def stdlib_files(root: Path | None = None) -> list[Path]:
    """The corpus files, sorted by relative POSIX path. Excluded directories are pruned, never walked."""
    root = stdlib_root() if root is None else Path(root)
    found: list[tuple[str, Path]] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in EXCLUDED_DIRS]
        for filename in filenames:
            if filename.endswith(".py"):
                path = Path(dirpath, filename)
                found.append((path.relative_to(root).as_posix(), path))
    return [path for _, path in sorted(found)]


def read_document(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace")


def iter_documents(files: list[Path]) -> Iterator[str]:
    for path in files:
        yield read_document(path)


def identity(files: list[Path], root: Path | None = None) -> dict:
    """What identifies the corpus: interpreter version and build, and each file's relative path and size."""
    root = stdlib_root() if root is None else Path(root)
    digest = hashlib.sha256()
    for path in files:
        digest.update(f"{path.relative_to(root).as_posix()}\t{path.stat().st_size}\n".encode())
    return {
        "kind": "python-stdlib",
        "python": platform.python_version(),
        "implementation": sys.implementation.name,
        "files": len(files),
        "listing": digest.hexdigest()[:16],
    }


__all__ = ["EXCLUDED_DIRS", "LICENSE", "ORIGIN", "identity", "iter_documents", "stdlib_files", "stdlib_root"]
