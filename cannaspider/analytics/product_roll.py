"""The product roll in parts (docs/analytics.md, "Rolling in parts"; migrations/024_roll_parts.sql).

PostgreSQL runs a query that writes on one core: the roll of a day at 2,000 stores is one
INSERT … SELECT of 4.65 million snapshots, CPU-bound on one core. Split over the products
(store_product_id modulo `parts`), `parts` statements run at once, each on its own connection and
in its own transaction; every figure of a product comes from its own snapshots, so the parts'
union is the one-part roll, row for row. The roll's mark (where the next roll starts reading)
advances only once every part committed: a part killed or failed is read again by the next roll,
and a committed part's products are not (each product's rows and where it was left commit
together).
"""

from __future__ import annotations

import asyncio
from contextlib import AbstractAsyncContextManager
from datetime import datetime

import psycopg

from cannaspider.analytics.parts import needs_url, own_transaction, transaction

PART = "SELECT written, upto FROM analytics_roll_product_part(%s, %s, %s)"
Rolled = tuple[int, datetime | None]  # a part's rows written, and its newest snapshot rolled


async def _part(
    parting: AbstractAsyncContextManager[psycopg.AsyncConnection], scan_from: datetime | None, part: int, parts: int
) -> Rolled:
    """One part in the transaction `parting` opens."""
    async with parting as conn:
        row = await (await conn.execute(PART, (scan_from, part, parts))).fetchone()
    assert row is not None  # a function with OUT parameters returns one row
    return int(row[0]), row[1]


async def roll(conn: psycopg.AsyncConnection, work_mem: str, parts: int = 1, url: str | None = None) -> int:
    """Roll analytics_product_daily forward; the rows (re)written. `conn` in autocommit.

    One part: analytics_roll_product_daily() in one transaction on `conn`. More: part 0 on `conn`,
    each other on a connection of its own to `url`, all at once; any failure fails the roll (the
    parts still running are cancelled) and leaves the mark where it was."""
    if parts < 1:
        raise ValueError(f"the roll takes at least one part, not {parts}")
    if parts == 1:
        async with transaction(conn, work_mem):
            row = await (await conn.execute("SELECT analytics_roll_product_daily()")).fetchone()
        return int((row or (0,))[0])
    url = needs_url(url)
    # the mark read once: every part reads from the same point (a rebuild clears it first, committed)
    row = await (await conn.execute("SELECT analytics_roll_begin()")).fetchone()
    scan_from = row[0] if row else None
    async with asyncio.TaskGroup() as group:
        tasks = [group.create_task(_part(transaction(conn, work_mem), scan_from, 0, parts))]
        tasks += [
            group.create_task(_part(own_transaction(url, work_mem), scan_from, n, parts)) for n in range(1, parts)
        ]
    rolled = [t.result() for t in tasks]
    newest = [upto for _, upto in rolled if upto is not None]
    await conn.execute("SELECT analytics_roll_done(%s)", (max(newest) if newest else None,))
    return sum(written for written, _ in rolled)
