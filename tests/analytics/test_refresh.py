"""The analytics views against a scripted history (plain SQL: stores, products, crawl runs and
snapshots), each figure computed by hand below; and their refresh (cannaspider/analytics/refresh.py)."""

from __future__ import annotations

import asyncio
from datetime import date
from decimal import Decimal

import psycopg
import pytest

from cannaspider import settings as defaults
from cannaspider.analytics.refresh import INCREMENTAL, ROLLED, VIEWS, analyze_if_grown, refresh_all

D1, D2, D4 = date(2026, 11, 1), date(2026, 11, 2), date(2026, 11, 4)


def script(conn: psycopg.Connection) -> dict[str, int]:
    """Stores A, B (AZ) and C (MI); their products; three days of crawls of A; snapshots of p1."""
    conn.execute("SELECT ensure_snapshot_partitions('2026-11-01', 1)")
    a, b, c = (
        conn.execute("INSERT INTO dispensaries (name, state) VALUES (%s, %s) RETURNING id", (n, s)).fetchone()[0]
        for n, s in (("A", "AZ"), ("B", "AZ"), ("C", "MI"))
    )
    ids = {}
    for key, store, brand, category, price, status in [
        ("p1", a, "X", "Flower", "10.00", "in_stock"),
        ("p2", a, "X", "Flower", "20.00", "in_stock"),
        ("p3", a, "X", "Flower", "30.00", "oos"),  # out of stock: counted, not priced
        ("p4", a, "Y", "Edible", "5.00", "in_stock"),
        ("p5", a, None, "Edible", "7.00", "in_stock"),  # no brand on the menu
        ("q1", b, "X", "Flower", "40.00", "in_stock"),
        ("r1", c, "X", "Flower", "50.00", "in_stock"),
    ]:
        ids[key] = conn.execute(
            "INSERT INTO store_products (dispensary_id, provider_product_id, name_raw, brand_name_raw, category, "
            "price_rec, stock_status, is_in_stock) VALUES (%s, %s, %s, %s, %s, %s, %s, %s) RETURNING id",
            (store, key, key, brand, category, Decimal(price), status, status == "in_stock"),
        ).fetchone()[0]
    # crawls of A: two complete on day 1 (and a failed one, which counts nowhere), one on day 2
    for started, status, seen, new, missed, oos, suspect in [
        ("2026-11-01 08:00Z", "complete", 4, 4, 0, 0, False),
        ("2026-11-01 14:00Z", "complete", 3, 0, 1, 0, True),
        ("2026-11-01 20:00Z", "failed", 0, 0, 0, 0, False),
        ("2026-11-02 06:00Z", "complete", 2, 0, 2, 1, False),
    ]:
        conn.execute(
            "INSERT INTO crawl_runs (dispensary_id, role, status, started_at, products_seen, products_new, "
            "products_missed, products_marked_oos, suspect) VALUES (%s, 'product_resync', %s, %s, %s, %s, %s, %s, %s)",
            (a, status, started, seen, new, missed, oos, suspect),
        )
    # p1: up and down, a special starts on day 1 and ends on day 2; day 3 unseen; down again on day 4
    for at, price, special in [
        ("2026-11-01 08:00Z", "10.00", False),
        ("2026-11-01 14:00Z", "12.00", False),
        ("2026-11-01 20:00Z", "11.00", True),
        ("2026-11-02 06:00Z", "11.00", True),
        ("2026-11-02 12:00Z", "11.00", False),
        ("2026-11-04 09:00Z", "9.00", False),
    ]:
        conn.execute(
            "INSERT INTO product_snapshots (store_product_id, captured_at, price_rec, is_on_special) "
            "VALUES (%s, %s, %s, %s)",
            (ids["p1"], at, Decimal(price), special),
        )
    # p2: one snapshot, no change
    conn.execute(
        "INSERT INTO product_snapshots (store_product_id, captured_at, price_rec) VALUES (%s, '2026-11-02 06:00Z', 20)",
        (ids["p2"],),
    )
    return {"a": a, "b": b, "c": c, **ids}


def refresh(db: str, parts: int = 1) -> list:
    async def run():
        async with await psycopg.AsyncConnection.connect(db, autocommit=True) as conn:
            return await refresh_all(conn, defaults.ANALYTICS_REFRESH_WORK_MEM, parts=parts, url=db)

    return asyncio.run(run())


@pytest.fixture
def history(db):
    with psycopg.connect(db, autocommit=True) as conn:
        # not among the tables the db fixture empties
        conn.execute(
            "TRUNCATE analytics_refreshes, analytics_product_daily, analytics_product_days, analytics_roll_state"
        )
        ids = script(conn)
    refresh(db)
    return ids


def rows(db: str, query: str, params=None) -> list[tuple]:
    with psycopg.connect(db) as conn:
        return conn.execute(query, params).fetchall()


def test_price_and_stock_per_brand_category_state(db, history):
    got = rows(
        db,
        "SELECT state, brand, category, products, products_in_stock, stores, price_min, price_median, price_max "
        "FROM analytics_brand_category_state ORDER BY 1, 2, 3",
    )
    assert got == [
        # AZ flower of X: p1 10, p2 20, q1 40 in stock (p3 is out of stock): median 20
        ("AZ", "", "Edible", 1, 1, 1, Decimal("7.00"), Decimal("7.00"), Decimal("7.00")),
        ("AZ", "X", "Flower", 4, 3, 2, Decimal("10.00"), Decimal("20.00"), Decimal("40.00")),
        ("AZ", "Y", "Edible", 1, 1, 1, Decimal("5.00"), Decimal("5.00"), Decimal("5.00")),
        ("MI", "X", "Flower", 1, 1, 1, Decimal("50.00"), Decimal("50.00"), Decimal("50.00")),
    ]


def test_daily_price_changes_per_product(db, history):
    got = rows(
        db,
        "SELECT provider_product_id, day, snapshots, price_open, price_close, price_min, price_max, "
        "price_ups, price_downs, specials_started, specials_ended FROM analytics_product_daily ORDER BY 1, 2",
    )
    ten, eleven, twelve, nine, twenty = (Decimal(v) for v in ("10.00", "11.00", "12.00", "9.00", "20.00"))
    assert got == [
        ("p1", D1, 3, ten, eleven, ten, twelve, 1, 1, 1, 0),  # 10 → 12 up, → 11 down and on special
        ("p1", D2, 2, eleven, eleven, eleven, eleven, 0, 0, 0, 1),  # the special ended
        ("p1", D4, 1, nine, nine, nine, nine, 0, 1, 0, 0),  # 11 (day 2) → 9: counted on the day seen
        ("p2", D2, 1, twenty, twenty, twenty, twenty, 0, 0, 0, 0),
    ]


def test_store_stock_counts_and_oos_events_per_day(db, history):
    got = rows(
        db,
        "SELECT dispensary_id, day, crawls, products_in_stock, products_in_stock_max, products_in_stock_min, "
        "products_new, products_missed, oos_events, suspect_crawls FROM analytics_store_daily ORDER BY 1, 2",
    )
    a = history["a"]
    assert got == [(a, D1, 2, 3, 4, 3, 4, 1, 0, 1), (a, D2, 1, 2, 2, 2, 0, 2, 1, 0)]


def test_days_in_stock_per_product(db, history):
    got = rows(
        db,
        "SELECT provider_product_id, days_in_stock, first_day, last_day, days_tracked, stock_status_now "
        "FROM analytics_product_days_in_stock ORDER BY 1",
    )
    assert got == [("p1", 3, D1, D4, 4, "in_stock"), ("p2", 1, D2, D2, 1, "in_stock")]


def test_refresh_is_concurrent_once_populated_and_recorded(db, history):
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute("UPDATE store_products SET price_rec = 60 WHERE id = %s", (history["r1"],))
    results = refresh(db)
    assert [r.view for r in results] == list(VIEWS)
    # the views were populated by the migration: never a plain refresh
    assert {r.view: r.method for r in results} == {
        v: "incremental" if v in INCREMENTAL else "concurrently" for v in VIEWS
    }
    assert rows(db, "SELECT price_max FROM analytics_brand_category_state WHERE state = 'MI'") == [(Decimal("60.00"),)]
    recorded = rows(db, "SELECT view_name, count(*) FROM analytics_refreshes GROUP BY 1 ORDER BY 1")
    assert recorded == sorted((v, 2) for v in VIEWS)


def test_the_daily_table_rolls_forward_from_its_last_day_only(db, history):
    """A later refresh rewrites the last day written and the days after it; the first new snapshot
    compares with the product's last close before them, across a gap of days."""
    with psycopg.connect(db, autocommit=True) as conn:
        # an earlier day's row that a full recomputation would restore; the roll must leave it
        conn.execute("UPDATE analytics_product_daily SET snapshots = 99 WHERE day = %s", (D1,))
        conn.execute(
            "INSERT INTO product_snapshots (store_product_id, captured_at, price_rec, is_on_special) VALUES "
            "(%(p)s, '2026-11-04 21:00Z', 9.50, true), (%(p)s, '2026-11-06 10:00Z', 9.00, false)",
            {"p": history["p1"]},
        )
    results = {r.view: r for r in refresh(db)}
    assert results["analytics_product_daily"].rows == 2  # day 4 again, and day 6
    got = rows(
        db,
        "SELECT day, snapshots, price_open, price_close, price_ups, price_downs, specials_started, specials_ended "
        "FROM analytics_product_daily WHERE provider_product_id = 'p1' ORDER BY day",
    )
    assert got == [
        (D1, 99, Decimal("10.00"), Decimal("11.00"), 1, 1, 1, 0),  # not recomputed
        (D2, 2, Decimal("11.00"), Decimal("11.00"), 0, 0, 0, 1),
        (D4, 2, Decimal("9.00"), Decimal("9.50"), 1, 1, 1, 0),  # 11 → 9 down, → 9.50 up and on special
        (date(2026, 11, 6), 1, Decimal("9.00"), Decimal("9.00"), 0, 1, 0, 1),  # from day 4's close
    ]
    assert rows(
        db, "SELECT days_in_stock, days_tracked FROM analytics_product_days_in_stock WHERE provider_product_id = 'p1'"
    ) == [(4, 6)]


def test_each_snapshot_is_rolled_once_and_a_late_write_still_counts(db, history):
    """A roll reads only what came after the last one: a same-day snapshot merges into its day
    (the open stays, the close moves), a second roll with nothing new changes nothing, and a
    write stamped before the newest rolled snapshot (it committed late) is still counted."""
    daily = (
        "SELECT provider_product_id, day, snapshots, price_open, price_close, price_max, price_ups, price_downs "
        "FROM analytics_product_daily ORDER BY 1, 2"
    )
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO product_snapshots (store_product_id, captured_at, price_rec) VALUES "
            "(%(p1)s, '2026-11-04 15:00Z', 13.00), (%(p2)s, '2026-11-04 08:30Z', 21.00)",
            {"p1": history["p1"], "p2": history["p2"]},  # p2's row is stamped before p1's rolled 09:00
        )
    assert {r.view: r.rows for r in refresh(db)}["analytics_product_daily"] == 2
    before = rows(db, daily)
    assert ("p1", D4, 2, Decimal("9.00"), Decimal("13.00"), Decimal("13.00"), 1, 1) in before  # 9 → 13 up
    assert ("p2", D4, 1, Decimal("21.00"), Decimal("21.00"), Decimal("21.00"), 1, 0) in before  # 20 → 21 up
    assert {r.view: r.rows for r in refresh(db)}["analytics_product_daily"] == 0
    assert rows(db, daily) == before
    assert rows(db, "SELECT provider_product_id, days_in_stock FROM analytics_product_days_in_stock ORDER BY 1") == [
        ("p1", 3),
        ("p2", 2),
    ]


def test_a_reader_does_not_wait_for_a_refresh(db, history):
    """A reader inside a refresh's transaction window reads the old rows at once."""
    with psycopg.connect(db) as refresher, psycopg.connect(db, autocommit=True) as reader:
        refresher.execute("REFRESH MATERIALIZED VIEW CONCURRENTLY analytics_store_daily")
        refresher.execute("SELECT analytics_roll_product_daily()")  # both still in the open transaction
        reader.execute("SET statement_timeout = '2s'")
        assert reader.execute("SELECT count(*) FROM analytics_store_daily").fetchone() == (2,)
        assert reader.execute("SELECT count(*) FROM analytics_product_days_in_stock").fetchone() == (2,)
        assert reader.execute("SELECT count(*) FROM analytics_product_daily").fetchone() == (4,)
        refresher.rollback()


def test_a_roll_that_grew_the_daily_table_leaves_it_analyzed_for_the_market_roll(db, history):
    """The market roll reads the product-days just written: without statistics the planner took 4
    million new ones for 25 a day and joined every store-day to a whole day (the first roll of
    benchmarks/history.py never finished); the refresh analyzes the table it grew."""
    counted, actual = rows(
        db,
        "SELECT c.reltuples, (SELECT count(*) FROM analytics_product_daily) FROM pg_class c WHERE c.oid = %s::regclass",
        (ROLLED,),
    )[0]
    assert actual > 0 and counted == actual  # TRUNCATEd by the fixture, then rolled and analyzed


def test_analyze_if_grown_analyzes_a_table_grown_by_a_tenth_or_never_analyzed(db):
    async def run():
        async with await psycopg.AsyncConnection.connect(db, autocommit=True) as conn:

            async def counted(table):
                cur = await conn.execute("SELECT reltuples FROM pg_class WHERE oid = %s::regclass", (table,))
                return (await cur.fetchone())[0]

            await conn.execute("CREATE TEMP TABLE grown AS SELECT generate_series(1, 1000) AS n")
            await conn.execute("ANALYZE grown")
            await conn.execute("INSERT INTO grown SELECT generate_series(1, 99)")
            small = await analyze_if_grown(conn, "grown", 99), await counted("grown")
            await conn.execute("INSERT INTO grown SELECT generate_series(1, 100)")
            big = await analyze_if_grown(conn, "grown", 100), await counted("grown")
            await conn.execute("CREATE TEMP TABLE fresh AS SELECT 1 AS n WITH NO DATA")
            await conn.execute("INSERT INTO fresh VALUES (1), (2)")
            new = await analyze_if_grown(conn, "fresh", 2), await counted("fresh")
            nothing = await analyze_if_grown(conn, "fresh", 0)
            return small, big, new, nothing

    small, big, new, nothing = asyncio.run(run())
    assert small == (False, 1000)  # 99 rows are not a tenth of 1,000: left to autovacuum
    assert big == (True, 1199)
    assert new == (True, 2)
    assert nothing is False
