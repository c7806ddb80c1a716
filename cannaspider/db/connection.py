"""Where the database is, and connections to it that fail with one clear line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
from psycopg_pool import AsyncConnectionPool
from scrapy.settings import BaseSettings

from cannaspider import env
from cannaspider.db import embedded
from cannaspider.db.errors import DatabaseSetupError, first_line, redact

CONNECT_TIMEOUT_S = 10


def embedded_pgdata(data_dir: str | Path | None = None) -> Path:
    return Path(data_dir or env.data_dir()) / "postgres"


def configured_url(settings: BaseSettings | None = None) -> str | None:
    """DATABASE_URL (`-s` > environment > settings.py, see cannaspider/env.py), or None: embedded."""
    return env.configured(settings, "DATABASE_URL")


def with_dbname(url: str, name: str) -> str:
    """The same server as `url`, another database."""
    return psycopg.conninfo.make_conninfo(url, dbname=name)


def database_url(settings: BaseSettings | None = None) -> str:
    """The configured DATABASE_URL, else the embedded server's (started when needed)."""
    url = configured_url(settings)
    if url:
        return url
    return embedded.ensure_running(embedded_pgdata(env.configured(settings, "CANNASPIDER_DATA_DIR")))


def _unavailable(url: str, exc: BaseException) -> DatabaseSetupError:
    return DatabaseSetupError(
        f"cannot connect to PostgreSQL at {redact(url)}: {first_line(exc)} "
        "(check DATABASE_URL, or unset it to use the embedded server)"
    )


def connect(url: str, **kwargs: Any) -> psycopg.Connection[Any]:
    try:
        return psycopg.connect(url, connect_timeout=CONNECT_TIMEOUT_S, **kwargs)
    except psycopg.Error as exc:
        raise _unavailable(url, exc) from exc


async def open_async_pool(url: str, *, min_size: int = 1, max_size: int, timeout: float) -> AsyncConnectionPool:
    """An open pool, or DatabaseSetupError right away when the server is unreachable."""
    try:
        probe = await psycopg.AsyncConnection.connect(url, connect_timeout=CONNECT_TIMEOUT_S)
        await probe.close()
    except psycopg.Error as exc:
        raise _unavailable(url, exc) from exc
    pool = AsyncConnectionPool(
        url,
        min_size=min_size,
        max_size=max_size,
        open=False,
        timeout=timeout,  # how long a request for a connection waits (a server down, all in use)
        kwargs={"connect_timeout": CONNECT_TIMEOUT_S},
        # a restarted server leaves dead connections in the pool: check before handing one out
        check=AsyncConnectionPool.check_connection,
    )
    await pool.open(wait=True, timeout=CONNECT_TIMEOUT_S)
    return pool
