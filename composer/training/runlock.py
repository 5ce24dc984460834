"""One writer per run directory: a lock file holding the owner's pid and host.

Two ``composer train`` (or ``composer pipeline``) processes on one ``--out`` would interleave checkpoints and
summaries, and neither would notice. The first takes ``<out>/.composer.lock`` (created exclusively, so two
starting at once cannot both win); a second gets one line naming the owner. A lock left by a process that died
on this host (``kill -9``, a crash) is taken over; one held on another host is trusted, because its pid cannot
be checked from here, and the message says how to clear it by hand.

Only the job's first process takes the lock: the other ranks of a distributed run write into the same directory
by design.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

from composer.errors import ConfigError
from composer.files import make_output_dir

LOCK_NAME = ".composer.lock"
_RANK_VARIABLES = ("RANK", "LOCAL_RANK", "NODE_RANK", "SLURM_PROCID")


def is_first_process() -> bool:
    """True unless the environment says this is a non-zero rank (torchrun, Lightning, SLURM)."""
    return all(os.environ.get(name, "0") in ("", "0") for name in _RANK_VARIABLES)


def process_alive(pid: int) -> bool:
    """Whether a process with this pid exists on this host (signal 0 checks without signalling)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def _read(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def _create(path: Path, owner: dict) -> bool:
    try:
        descriptor = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return False
    with os.fdopen(descriptor, "w") as handle:
        json.dump(owner, handle)
    return True


@contextlib.contextmanager
def run_lock(directory: str | Path, command: str = "composer") -> Iterator[None]:
    """Hold ``<directory>/.composer.lock`` for the duration; raise :class:`ConfigError` if another live process
    holds it. Non-zero ranks pass through."""
    if not is_first_process():
        yield
        return
    directory = make_output_dir(directory)
    path = directory / LOCK_NAME
    owner = {"pid": os.getpid(), "host": socket.gethostname(), "command": command, "started": time.time()}
    owned = True
    for _ in range(3):  # a stale lock is removed and creation retried; another process may race us to it
        if _create(path, owner):
            break
        held = _read(path)
        local = held.get("host") == owner["host"]
        pid = held.get("pid")
        if local and isinstance(pid, int) and pid != owner["pid"] and not process_alive(pid):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()  # the owner died without releasing it
            continue
        if local and pid == owner["pid"]:
            owned = False  # re-entered by the same process: the outer holder releases it
            break
        since = time.strftime("%Y-%m-%d %H:%M", time.localtime(held.get("started", 0)))
        where = f"pid {pid} on {held.get('host', '?')}" if held else "another process"
        hint = "" if local else f"; if that process is gone, delete {path}"
        raise ConfigError(
            f"{str(directory)!r} is in use by {held.get('command', 'composer')} ({where}, since {since}); "
            f"wait for it or choose another --out{hint}"
        )
    else:
        raise ConfigError(f"could not take the lock {path}: other processes keep replacing it")
    try:
        yield
    finally:
        if owned and _read(path).get("pid") == owner["pid"]:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
