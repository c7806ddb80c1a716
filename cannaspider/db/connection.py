"""Where the database is, and connections to it that fail with one clear line; the crawl's pool,
which stops making each request wait for a connection once the server is found unreachable
(`FailFastPool`)."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import psycopg
from psycopg_pool import AsyncConnectionPool, PoolTimeout
from scrapy.settings import BaseSettings

from cannaspider import env
from cannaspider.db import embedded
from cannaspider.db.errors import DatabaseSetupError, DatabaseUnreachable, first_line, redact

logger = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 10
# how long one connection attempt's answer "unreachable" stands for the requests that come after it:
# short, since a request refused after the server came back is as if the outage had lasted longer
PROBE_FRESH_S = 0.5


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
    pool = FailFastPool(
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


class FailFastPool(AsyncConnectionPool[psycopg.AsyncConnection[Any]]):
    """A pool whose requests stop waiting for a connection while the server is unreachable.

    A request waits up to the pool's timeout (DB_POOL_TIMEOUT_S) for a connection: that is what
    carries a crawl through a database restart. When one such whole wait ends without a connection,
    one connection attempt of its own tells a busy pool (the attempt succeeds: nothing changes) from
    an unreachable server (a database dropped, a server down, a host gone). From then on, for as
    long as the server stays unreachable, a request is refused at once with DatabaseUnreachable (a
    PoolTimeout) instead of each waiting its own timeout: the per-item work of a crawl whose
    database is gone (image claims, writes) fails in a moment, not DB_POOL_TIMEOUT_S an item.

    Whether it still is unreachable is asked again by the request that comes more than
    PROBE_FRESH_S after the last attempt (one attempt at a time, its answer shared by the requests
    that come meanwhile): once one succeeds, requests wait for the pool's connections as before. An
    idle connection in the pool is handed out (checked) whatever the last attempt said.
    """

    unreachable: str | None = None  # why the last attempt could not connect; None: it could
    _down_since = 0.0
    _probed_at = float("-inf")
    _probing: asyncio.Task[str | None] | None = None

    async def getconn(self, timeout: float | None = None) -> psycopg.AsyncConnection[Any]:
        if self.unreachable is not None and not self.get_stats().get("pool_available"):
            reason = await self.reachability()
            if reason is not None:
                raise DatabaseUnreachable(f"the database is unreachable: {reason}")
        try:
            return await super().getconn(timeout)
        except PoolTimeout:
            # a request that waited less than the pool's own timeout (a heartbeat's) proves nothing
            if timeout is None or timeout >= self.timeout:
                await self.reachability()
            raise

    async def reachability(self) -> str | None:
        """Why the server cannot be connected to now, or None when it can: the last attempt's
        answer while it is fresh, else one attempt (shared with the requests that ask meanwhile)."""
        loop = asyncio.get_running_loop()
        probe = self._probing
        if probe is None:
            if loop.time() - self._probed_at < PROBE_FRESH_S:
                return self.unreachable
            probe = self._probing = asyncio.ensure_future(self._probe())
        try:
            return await asyncio.shield(probe)  # a request cancelled leaves the attempt to the others
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if probe.cancelled() and task is not None and not task.cancelling():
                return self.unreachable  # the pool closed meanwhile: its getconn says so
            raise

    async def _probe(self) -> str | None:
        loop = asyncio.get_running_loop()
        assert isinstance(self.conninfo, str)  # open_async_pool's URL
        try:
            conn = await psycopg.AsyncConnection.connect(self.conninfo, connect_timeout=CONNECT_TIMEOUT_S)
        except psycopg.Error as exc:
            if self.unreachable is None:
                self._down_since = loop.time()
                logger.warning(
                    "the database is unreachable (%s): its work fails at once, without waiting for a connection, "
                    "until a connection succeeds again",
                    first_line(exc),
                )
            self.unreachable = first_line(exc)
        else:
            await conn.close()
            if self.unreachable is not None:
                logger.warning("the database is reachable again, after %.0f s", loop.time() - self._down_since)
            self.unreachable = None
        finally:
            self._probed_at = loop.time()
            self._probing = None
        return self.unreachable

    async def close(self, timeout: float = 5.0) -> None:
        if self._probing is not None:  # an attempt to a host gone takes CONNECT_TIMEOUT_S: not waited for
            self._probing.cancel()
        await super().close(timeout)
