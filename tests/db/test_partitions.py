"""Monthly partitions (db/partitions.py): a row refused for its month's missing partition is told
apart from a row refused for its values, and ensure_ahead makes this month's and the next one's."""

from __future__ import annotations

import asyncio

import psycopg
import pytest

from cannaspider.db import partitions
from tests.helpers import month_without_partitions


def _refusal(db: str, statement: str) -> psycopg.Error:
    with psycopg.connect(db, autocommit=True) as conn, pytest.raises(psycopg.Error) as caught:
        conn.execute(statement)
    return caught.value


def test_a_missing_month_is_told_apart_from_a_refused_value(db):
    with month_without_partitions(db):
        missing = _refusal(db, "INSERT INTO product_snapshots (store_product_id, crawl_run_id) VALUES (1, 1)")
    # a CHECK constraint refuses a value with the same SQLSTATE (23514), naming its constraint
    bad_value = _refusal(db, "INSERT INTO crawl_runs (dispensary_id, role, status) VALUES (1, 'r', 'nonsense')")
    assert missing.sqlstate == bad_value.sqlstate == "23514"
    assert partitions.missing_partition(missing) and not partitions.missing_partition(bad_value)


def test_ensure_ahead_makes_this_month_and_the_next(db, sql):
    async def ensure() -> int:
        async with await psycopg.AsyncConnection.connect(db, autocommit=True) as conn:
            return await partitions.ensure_ahead(conn)

    with month_without_partitions(db) as name:
        assert sql("SELECT to_regclass(%s)", (name,)) == [(None,)]
        assert asyncio.run(ensure()) == 1  # this month's snapshots (the next one's existed)
        assert sql("SELECT to_regclass(%s)::text", (name,)) == [(name,)]
        assert asyncio.run(ensure()) == 0


def test_every_interval_is_due_at_first_then_once_per_interval():
    timer = partitions.EveryInterval(every_s=3600)
    assert timer.due() and not timer.due()
    assert partitions.EveryInterval(every_s=0).due()
