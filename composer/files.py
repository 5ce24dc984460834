"""Atomic file writes: every result file (summaries, leaderboards, cache markers, pipeline stages) is written
under a unique temporary name in its directory and renamed into place, so a process killed mid-write leaves
the previous file (or none), never half a file that a resume or a reader would trust. The temporary name is
unique per process and call, so concurrent writers (ranks, workers) never interleave in one temporary file."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

try:
    import fcntl
except ImportError:  # not POSIX: no advisory locks, updates are atomic but may lose a concurrent writer's entry
    fcntl = None


def temporary_path(path: Path) -> Path:
    """A hidden sibling of ``path`` no other process or call uses."""
    path = Path(path)
    return path.with_name(f".{path.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp")


def atomic_write_text(path: str | Path, text: str) -> Path:
    path = Path(path)
    tmp = temporary_path(path)
    try:
        tmp.write_text(text)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def atomic_write_json(path: str | Path, data: Any, **dumps: Any) -> Path:
    """``json.dumps(data, indent=2, **dumps)`` written atomically."""
    return atomic_write_text(path, json.dumps(data, **{"indent": 2, **dumps}))


@contextlib.contextmanager
def locked(path: str | Path) -> Iterator[None]:
    """An exclusive advisory lock (``fcntl.flock``) on ``path``'s sidecar ``.<name>.lock``, held for the block.

    Why: an atomic write keeps a file whole, not its entries. Two processes that each read a shared file, add an
    entry and write it back (a search's workers measuring cost figures) lose one another's entry unless the read,
    the change and the write happen under one lock. Blocking: a writer waits its turn."""
    path = Path(path)
    if fcntl is None:
        yield
        return
    with open(path.with_name(f".{path.name}.lock"), "a") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def update_json(path: str | Path, change: Callable[[dict[str, Any]], dict[str, Any]]) -> dict[str, Any]:
    """Read ``path``'s JSON object (empty where it is missing, damaged or not an object), apply ``change`` to it and
    write the result atomically, all under :func:`locked`; returns what was written."""
    path = Path(path)
    with locked(path):
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            data = {}
        data = change(data if isinstance(data, dict) else {})
        atomic_write_json(path, data)
    return data


def atomic_write_csv(path: str | Path, rows: list[dict[str, Any]], columns: list[str] | tuple[str, ...]) -> Path:
    """``rows`` as CSV with a header of ``columns`` (other keys are left out), written atomically."""
    buffer = io.StringIO(newline="")
    writer = csv.DictWriter(buffer, fieldnames=list(columns), extrasaction="ignore")
    writer.writeheader()
    writer.writerows(rows)
    return atomic_write_text(path, buffer.getvalue())


def write_outputs(
    out: str | Path,
    stem: str,
    report: Any,
    *,
    table: str | None = None,
    rows: tuple[list[dict[str, Any]], Sequence[str]] | None = None,
    plot: Callable[[Any, Path], Any] | None = None,
) -> Path:
    """A measured result in every form it is read in, side by side under ``out``: ``stem.json`` (all of it, for
    programs), ``stem.csv`` (``rows`` as ``(rows, columns)``, for spreadsheets), ``stem.md`` (the ``table`` people
    read) and ``stem.png`` (``plot(report, path)``: what people would rather see than read). Each file is written
    atomically; the forms not given are not written. Returns ``out``."""
    out = Path(out)
    atomic_write_json(out / f"{stem}.json", report)
    if rows is not None:
        atomic_write_csv(out / f"{stem}.csv", *rows)
    if table is not None:
        atomic_write_text(out / f"{stem}.md", table + "\n")
    if plot is not None:
        plot(report, out / f"{stem}.png")
    return out


def umask_permissions(path: str | Path) -> None:
    """Give ``path`` the permissions a new file gets from the umask (0644 under the usual 022): safetensors writes
    its file owner-only (0600), which another user of a shared machine, or a serving process, cannot read (issue
    69)."""
    umask = os.umask(0)  # reading the umask means setting it: put it straight back
    os.umask(umask)
    Path(path).chmod(0o666 & ~umask)


def check_output_dir(path: str | Path, flag: str = "--out") -> None:
    """Refuse, before anything is written or started, an output directory that cannot be one: an existing file, a
    path under a file, or a place this user may not write (issue 69: a file or a read-only --out failed after 1-5
    progress lines). Creates nothing; :func:`make_output_dir` creates it once the run starts."""
    from composer.errors import ConfigError

    path = Path(path).expanduser()
    if path.exists() and not path.is_dir():
        raise ConfigError(f"{flag} {str(path)!r} is a file, not a directory; give a new or existing directory")
    existing = path
    while not existing.exists():  # where `mkdir -p` would start
        existing = existing.parent
    if not existing.is_dir():
        raise ConfigError(f"{flag} {str(path)!r} cannot be created: {str(existing)!r} is a file; give a directory "
                          "path")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ConfigError(f"{flag} {str(path)!r} cannot be written: no write permission on {str(existing)!r}; "
                          f"choose a directory you can write to")


def make_output_dir(path: str | Path) -> Path:
    """``mkdir -p`` for a user's ``--out``; a directory that cannot be created is a one-line usage error."""
    from composer.errors import ConfigError

    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ConfigError(f"cannot create output directory {str(path)!r}: {err.strerror or err}; "
                          "choose another --out") from None
    return path


# -- reading what another tool wrote: a damaged file is one line naming it, never a parser's traceback ----------
def read_json_file(path: str | Path, what: str = "JSON") -> Any:
    """``path``'s JSON, or a one-line :class:`~composer.errors.ConfigError` naming the file and the problem."""
    from composer.errors import ConfigError

    path = Path(path)
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"{str(path)!r} does not exist (expected {what})") from None
    except (OSError, UnicodeDecodeError, ValueError) as err:
        raise ConfigError(f"{str(path)!r} is damaged: cannot read it as {what} ({err}); re-save or re-download it") from None


def check_safetensors(path: str | Path) -> None:
    """Raise :func:`read_safetensors`' one line for a truncated or corrupt file, reading its header only (cheap
    for a model of any size: a command checks its inputs before minutes of setup, then reads them)."""
    from safetensors import SafetensorError, safe_open

    from composer.errors import ConfigError

    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{str(path)!r} does not exist (a weights file it should hold)")
    try:
        with safe_open(str(path), framework="pt"):
            pass
    except (SafetensorError, OSError, ValueError, RuntimeError) as err:
        raise ConfigError(_damaged_weights(path, err)) from None


def _damaged_weights(path: Path, err: Exception) -> str:
    reason = str(err).splitlines()[0] if str(err) else type(err).__name__
    return f"{str(path)!r} is damaged: not a readable safetensors file ({reason}); re-download or re-export it"


def read_safetensors(path: str | Path, device: str = "cpu") -> dict:
    """Every tensor of one ``.safetensors`` file. A truncated or corrupt file (a half-finished download, a disk
    that filled up) is a one-line :class:`~composer.errors.ConfigError` naming it, not safetensors' traceback."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    from composer.errors import ConfigError

    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{str(path)!r} does not exist (a weights file it should hold)")
    try:
        return load_file(str(path), device=device)
    except (SafetensorError, OSError, ValueError, RuntimeError) as err:
        raise ConfigError(_damaged_weights(path, err)) from None
