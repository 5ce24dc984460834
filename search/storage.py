"""Optuna storages for a search: SQLite in the output directory by default, any RDB URL, or a journal file.

RDB storages get heartbeats, so a trial whose worker was killed is marked failed after the grace period and
re-run once with the same pattern (``RetryFailedTrialCallback``). SQLite waits on its lock instead of failing
("database is locked") when several local workers write at once; for many workers or machines prefer
PostgreSQL/MySQL or a journal file on a shared filesystem.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import optuna
from optuna.storages import JournalStorage, RDBStorage
from optuna.storages.journal import JournalFileBackend

from composer.errors import ConfigError

HEARTBEAT_S = 30
GRACE_S = 120
JOURNAL_SUFFIXES = (".log", ".journal", ".jsonl")


def default_storage_url(out: str | Path) -> str:
    return f"sqlite:///{Path(out).resolve() / 'study.db'}"


def worker_lock_path(url: str | None, out: str | Path) -> Path | None:
    """Where the workers of a file-backed study hold their lock (``search.resume.StudyLock``): beside the SQLite
    or journal file. None for a database server, whose workers may be on any host."""
    url = url or default_storage_url(out)
    if url.startswith("journal:") or url.endswith(JOURNAL_SUFFIXES):
        return Path(url.removeprefix("journal:") + ".workers.lock")
    if url.startswith("sqlite:///") and url != "sqlite:///:memory:":
        return Path(url.removeprefix("sqlite:///") + ".workers.lock")
    return None


def _retry_stale_trials() -> dict:
    """Re-run (once) a trial whose worker stopped heart-beating; the callback was renamed in Optuna 4.9."""
    from optuna import storages

    if hasattr(storages, "RetryHeartbeatStaleTrialCallback"):
        return {"heartbeat_stale_trial_callback": storages.RetryHeartbeatStaleTrialCallback(max_retry=1)}
    return {"failed_trial_callback": storages.RetryFailedTrialCallback(max_retry=1)}


def is_journal(url: str) -> bool:
    return url.startswith("journal:") or url.endswith(JOURNAL_SUFFIXES)


def _check_form(url: str) -> None:
    if not is_journal(url) and "://" not in url:
        raise ConfigError(
            f"storage {url!r} is neither a database URL (sqlite:///study.db, postgresql://user@host/db) "
            f"nor a journal file ending in {', '.join(JOURNAL_SUFFIXES)}"
        )


def check_storage(url: str | None) -> None:
    """Reach ``--storage`` before a search writes its --out or prints a line (issue 69: an unreachable server was
    found after the search's first progress lines, with config.json left behind): a journal's or SQLite file's
    directory must be one this user can create or write, and a database server must accept a connection. Creates
    nothing. The default (SQLite in --out) is checked with --out."""
    from composer.files import check_output_dir

    if url is None:
        return
    _check_form(url)
    if is_journal(url) or url.startswith("sqlite:///"):
        path = Path(url.removeprefix("journal:").removeprefix("sqlite:///"))
        if str(path) != ":memory:":
            check_output_dir(path.parent, flag="--storage's directory")
        return
    import sqlalchemy

    shown = url
    try:
        shown = sqlalchemy.engine.make_url(url).render_as_string(hide_password=True)
        engine = sqlalchemy.create_engine(url, pool_pre_ping=True)
        try:
            with engine.connect():
                pass
        finally:
            engine.dispose()
    except Exception as err:  # noqa: BLE001 - driver missing, server unreachable, bad credentials: one line
        message = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ConfigError(f"cannot reach --storage {shown!r}: {message}; check the URL, that the server is up and "
                          "the credentials, or leave --storage out for SQLite in --out") from None


def make_storage(url: str | None, out: str | Path) -> optuna.storages.BaseStorage:
    url = url or default_storage_url(out)
    if is_journal(url):
        path = Path(url.removeprefix("journal:"))
        path.parent.mkdir(parents=True, exist_ok=True)
        return JournalStorage(JournalFileBackend(str(path)))
    _check_form(url)
    engine_kwargs = {"connect_args": {"timeout": 60}} if url.startswith("sqlite") else {"pool_pre_ping": True}
    if url.startswith("sqlite:///"):
        Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            return RDBStorage(
                url,
                engine_kwargs=engine_kwargs,
                heartbeat_interval=HEARTBEAT_S,
                grace_period=GRACE_S,
                **_retry_stale_trials(),
            )
    except Exception as err:  # driver missing, server unreachable, bad credentials
        message = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ConfigError(f"cannot open storage {url!r}: {message}") from err
