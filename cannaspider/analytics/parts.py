"""What the refresh's steps in parts share (docs/analytics.md, "Rolling in parts"): a part's
transaction, on the refresh's connection or on one of its own, and the split of weighed keys
(the market roll's states) into parts of about equal weight."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import psycopg


@asynccontextmanager
async def transaction(conn: psycopg.AsyncConnection, work_mem: str) -> AsyncIterator[psycopg.AsyncConnection]:
    """A transaction on `conn` (autocommit) with the refresh's work_mem."""
    async with conn.transaction():
        await conn.execute("SELECT set_config('work_mem', %s, true)", (work_mem,))
        yield conn


@asynccontextmanager
async def own_transaction(url: str, work_mem: str) -> AsyncIterator[psycopg.AsyncConnection]:
    """A transaction on a connection of its own, closed after it."""
    async with (
        await psycopg.AsyncConnection.connect(url, autocommit=True) as conn,
        transaction(conn, work_mem),
    ):
        yield conn


def needs_url(url: str | None) -> str:
    """The database URL a step in parts connects its other parts to."""
    if url is None:
        raise ValueError("a roll in parts needs the database URL for its other connections")
    return url


def split(weights: dict[str, int], parts: int) -> list[list[str]]:
    """The keys in at most `parts` non-empty shares, each key to the lightest share so far,
    heaviest first (about equal weights; deterministic: ties by key)."""
    shares: list[tuple[int, list[str]]] = [(0, []) for _ in range(max(1, parts))]
    for key in sorted(weights, key=lambda k: (-weights[k], k)):
        i = min(range(len(shares)), key=lambda n: (shares[n][0], n))
        shares[i] = (shares[i][0] + weights[key], [*shares[i][1], key])
    return [keys for _, keys in shares if keys]
