"""Helpers for the task-queue tests: run the async queue API on a real connection."""

from __future__ import annotations

import asyncio
import uuid

import psycopg
import pytest


@pytest.fixture
def q(db):
    """q(fn, *args, **kwargs): await fn(conn, *args, **kwargs) on a fresh connection to the test database."""

    def call(fn, *args, **kwargs):
        async def main():
            async with await psycopg.AsyncConnection.connect(db, autocommit=True) as conn:
                return await fn(conn, *args, **kwargs)

        return asyncio.run(main())

    return call


def add_store(sql, name="s", *, state="AZ", platform_id: str | None = "auto", enabled=True, last_crawl_at=None) -> int:
    if platform_id == "auto":
        platform_id = uuid.uuid4().hex[:24]
    return sql(
        "INSERT INTO dispensaries (name, state, platform_dispensary_id, crawl_enabled, last_crawl_at) "
        "VALUES (%s, %s, %s, %s, %s) RETURNING id",
        (name, state, platform_id, enabled, last_crawl_at),
    )[0][0]


def add_stores(sql, n, **kwargs) -> list[int]:
    return [add_store(sql, f"s{i}", **kwargs) for i in range(n)]
