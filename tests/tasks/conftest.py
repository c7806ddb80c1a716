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


def row(sql, task_id, cols="status, attempts, error, crawl_run_id"):
    return sql(f"SELECT {cols} FROM worker_tasks WHERE id = %s", (task_id,))[0]


def start_run(sql, dispensary_id, role="product_resync", task_id=None):
    return sql(
        "INSERT INTO crawl_runs (dispensary_id, role, task_id) VALUES (%s, %s, %s) RETURNING id",
        (dispensary_id, role, task_id),
    )[0][0]
