"""Search test fixtures: the toy evaluator on the import path (also for spawned workers) and a PostgreSQL server."""

from __future__ import annotations

import getpass
import glob
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


@pytest.fixture(autouse=True)
def toy_on_path(monkeypatch):
    monkeypatch.syspath_prepend(str(HERE))  # spawned workers inherit sys.path
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.delenv("WANDB_API_KEY", raising=False)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _postgres_bin(name: str) -> str | None:
    found = shutil.which(name) or sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return found if isinstance(found, str) else (found[-1] if found else None)


@pytest.fixture(scope="session")
def postgres_url():
    """A throw-away PostgreSQL server on loopback (Debian's postgresql package; .ci/run installs it)."""
    pytest.importorskip("psycopg", reason="psycopg is not installed (pip install 'composer-hnas[dev]')")
    initdb, pg_ctl = _postgres_bin("initdb"), _postgres_bin("pg_ctl")
    if not (initdb and pg_ctl):
        pytest.skip("no PostgreSQL server binaries (apt-get install postgresql)")
    base = Path(tempfile.mkdtemp(prefix="composer-pg-"))  # pytest's own tmp dirs are private to root
    base.chmod(0o755)
    data = base / "data"
    data.mkdir()
    run_as: list[str] = []
    if os.geteuid() == 0:  # the server refuses to run as root: use Debian's postgres user
        if shutil.which("runuser") is None:
            pytest.skip("running as root without runuser; cannot start PostgreSQL")
        run_as = ["runuser", "-u", "postgres", "--"]
        shutil.chown(data, "postgres")
    user = "postgres" if run_as else getpass.getuser()
    port = _free_port()
    init = subprocess.run([*run_as, initdb, "-D", str(data), "-A", "trust", "-U", user],
                          capture_output=True, text=True)
    if init.returncode:
        pytest.skip(f"initdb failed: {init.stderr.strip()[-300:]}")
    start = subprocess.run(
        [*run_as, pg_ctl, "-D", str(data), "-l", str(data / "log"), "-w", "-o",
         f"-h 127.0.0.1 -p {port} -k {data}", "start"], capture_output=True, text=True)
    if start.returncode:
        pytest.skip(f"PostgreSQL did not start: {start.stderr.strip()[-300:]}")
    try:
        import psycopg

        for _ in range(50):
            try:
                with psycopg.connect(f"host=127.0.0.1 port={port} user={user} dbname=postgres", autocommit=True) as c:
                    c.execute("CREATE DATABASE optuna")
                break
            except psycopg.OperationalError:
                time.sleep(0.2)
        yield f"postgresql+psycopg://{user}@127.0.0.1:{port}/optuna"
    finally:
        subprocess.run([*run_as, pg_ctl, "-D", str(data), "-m", "fast", "stop"], capture_output=True)
        shutil.rmtree(base, ignore_errors=True)


def run_cli(*argv: str, env: dict | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "composer", *argv], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=timeout)
