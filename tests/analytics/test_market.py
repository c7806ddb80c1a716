"""The market roll (cannaspider/analytics/market.py) against a scripted history: stores, products
linked to canonical brands, complete and failed crawls, snapshots and events in plain SQL; every
figure below is worked out by hand from that script."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

import psycopg
import pytest
from psycopg.types.json import Jsonb

from cannaspider.analytics import market
from tests.analytics.test_refresh import refresh, rows

D0, D28, D29 = date(2026, 11, 1), date(2026, 11, 29), date(2026, 11, 30)
D30 = D29  # the day of DAY30 (2026-11-30)
MARKET_TABLES = (
    "market_state_daily, market_brand_daily, market_category_daily, market_size_daily, market_movers, market_roll_state"
)
ROLLED_TABLES = "analytics_refreshes, analytics_product_daily, analytics_product_days, analytics_roll_state"


def crawl(conn: psycopg.Connection, store: int, at: str, status: str = "complete", empty: bool = False) -> int:
    return conn.execute(
        "INSERT INTO crawl_runs (dispensary_id, role, status, started_at, empty) "
        "VALUES (%s, 'product_resync', %s, %s, %s) RETURNING id",
        (store, status, at, empty),
    ).fetchone()[0]


def seen(conn: psycopg.Connection, product: int, run: int, at: str, price: str, special: bool = False) -> None:
    conn.execute(
        "INSERT INTO product_snapshots (store_product_id, captured_at, crawl_run_id, price_rec, is_on_special) "
        "VALUES (%s, %s, %s, %s, %s)",
        (product, at, run, Decimal(price), special),
    )


def event(conn: psycopg.Connection, run: int, at: str, store: int, product: int, kind: str, old: str | None, new: str):
    conn.execute(
        "INSERT INTO product_events (occurred_at, crawl_run_id, dispensary_id, store_product_id, type, "
        "price_rec_old, price_rec) VALUES (%s, %s, %s, %s, %s, %s, %s)",
        (at, run, store, product, kind, old and Decimal(old), Decimal(new)),
    )


def option(label: str, grams: float | None, price: float, basis: str = "g") -> dict:
    """An option as the normalizer stores it (store_products.options, identity.unit_prices)."""
    per = grams if basis == "g" and grams else 1.0
    return {
        "option": label,
        "size_value": grams,
        "size_unit": "g" if grams else None,
        "price_rec": price,
        "unit_price": round(price / per, 4),
        "unit_price_basis": basis,
    }


# the options of the script's products now: pa1's eighth (its price_rec), a 7 g and an 'N/A' piece
OPTIONS = {
    "pa1": Jsonb([option("1/8oz", 3.5, 28.0), option("1/4oz", 7.0, 50.0), option("N/A", None, 5.0, "unit")]),
    "pa2": Jsonb([option("10pk", None, 11.0, "unit")]),
    "pb1": Jsonb([option("1g", 1.0, 20.0)]),
    "pb2": Jsonb([option("10pk", None, 12.0, "unit")]),
    "pc1": Jsonb([option("1g", 1.0, 30.0)]),
    "pm1": Jsonb([option("1g", 1.0, 40.0)]),
}


def script(conn: psycopg.Connection) -> dict[str, int]:
    """AZ: stores A, B, C (Phoenix, Phoenix, Tucson); MI: M. Brands X and Y.

    Day 0: A, B, C crawled completely; X carried by all three, Y by A.
    Day 28: A and B crawled completely, C's crawl failed (its snapshot of X counts nowhere);
    X carried by A only, Y by A and B; in MI, M carries X."""
    conn.execute("SELECT ensure_snapshot_partitions('2026-11-01', 2)")
    stores = {}
    for key, state, city in (("a", "AZ", "Phoenix"), ("b", "AZ", "Phoenix"), ("c", "AZ", "Tucson"), ("m", "MI", "")):
        stores[key] = conn.execute(
            "INSERT INTO dispensaries (name, state, city) VALUES (%s, %s, %s) RETURNING id", (key.upper(), state, city)
        ).fetchone()[0]
    x, y = (
        conn.execute("INSERT INTO brands (key, name) VALUES (%s, %s) RETURNING id", (f"n:{n}", n)).fetchone()[0]
        for n in ("x", "y")
    )
    products = {}
    # (key, store, brand, category, price_rec now, unit_price now, basis): pa1 is an eighth (3.5 g),
    # also sold as 7 g and as 'N/A' (OPTIONS: each size its own SKU)
    for key, store, brand, category, price, unit, basis in [
        ("pa1", "a", x, "Flower", "28.00", "8.0000", "g"),
        ("pa2", "a", y, "Edible", "11.00", "11.0000", "unit"),
        ("pb1", "b", x, "Flower", "20.00", "20.0000", "g"),  # a 1 g option
        ("pb2", "b", y, "Edible", "12.00", "12.0000", "unit"),
        ("pc1", "c", x, "Flower", "30.00", "30.0000", "g"),
        ("pm1", "m", x, "Flower", "40.00", "40.0000", "g"),
    ]:
        products[key] = conn.execute(
            "INSERT INTO store_products (dispensary_id, provider_product_id, name_raw, category, price_rec, "
            "unit_price, unit_price_basis, canonical_brand_id, canonical_product_id, options) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING id",
            (stores[store], key, key, category, Decimal(price), Decimal(unit), basis, brand, None, OPTIONS[key]),
        ).fetchone()[0]
    day0 = "2026-11-01 08:00Z"
    runs = {k: crawl(conn, stores[k], day0) for k in ("a", "b", "c")}
    seen(conn, products["pa1"], runs["a"], day0, "35.00")
    seen(conn, products["pa2"], runs["a"], day0, "10.00")
    seen(conn, products["pb1"], runs["b"], day0, "20.00")
    seen(conn, products["pc1"], runs["c"], day0, "30.00")
    day28 = "2026-11-29 08:00Z"
    runs28 = {k: crawl(conn, stores[k], day28) for k in ("a", "b", "m")}
    failed = crawl(conn, stores["c"], day28, "failed")
    seen(conn, products["pa1"], runs28["a"], day28, "28.00", special=True)
    seen(conn, products["pa2"], runs28["a"], day28, "11.00")
    seen(conn, products["pb2"], runs28["b"], day28, "12.00")
    seen(conn, products["pc1"], failed, day28, "30.00")
    seen(conn, products["pm1"], runs28["m"], day28, "40.00")
    event(conn, runs28["a"], day28, stores["a"], products["pa1"], "price_changed", "35.00", "28.00")  # -20 %
    event(conn, runs28["a"], day28, stores["a"], products["pa2"], "price_changed", "10.00", "11.00")  # +10 %
    event(conn, runs28["a"], day28, stores["a"], products["pa1"], "special_started", None, "28.00")
    event(conn, runs28["b"], day28, stores["b"], products["pb2"], "listed", None, "12.00")
    return {**stores, **products, "x": x, "y": y, "run_a28": runs28["a"], "failed_c28": failed}


@pytest.fixture
def history(db: str) -> dict[str, int]:
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute(f"TRUNCATE {ROLLED_TABLES}, {MARKET_TABLES}")  # not among the tables the db fixture empties
        ids = script(conn)
    refresh(db)
    return ids


def test_stores_crawled_and_events_per_state_and_day(db, history):
    got = rows(
        db,
        "SELECT state, day, stores_crawled, products_seen, listed, price_changed, price_drops, price_rises, "
        "specials_started, out_of_stock FROM market_state_daily ORDER BY 1, 2",
    )
    assert got == [
        ("AZ", D0, 3, 4, 0, 0, 0, 0, 0, 0),
        ("AZ", D28, 2, 3, 1, 2, 1, 1, 1, 0),  # C's failed crawl: neither a store crawled nor its product
        ("MI", D28, 1, 1, 0, 0, 0, 0, 0, 0),
    ]


def test_brand_availability_is_carrying_stores_over_crawled_stores(db, history):
    x, y = history["x"], history["y"]
    got = rows(
        db,
        "SELECT state, day, canonical_brand_id, stores, stores_crawled, store_products, median_price "
        "FROM market_brand_daily ORDER BY 1, 2, 3",
    )
    assert got == [
        ("AZ", D0, x, 3, 3, 3, Decimal("30.00")),  # pa1 35, pb1 20, pc1 30
        ("AZ", D0, y, 1, 3, 1, Decimal("10.00")),
        ("AZ", D28, x, 1, 2, 1, Decimal("28.00")),  # pc1's snapshot came from a failed crawl
        ("AZ", D28, y, 2, 2, 2, Decimal("11.50")),
        ("MI", D28, x, 1, 1, 1, Decimal("40.00")),
    ]


def test_a_store_whose_menu_was_empty_all_day_is_not_in_availabilitys_denominator(db, history):
    """Issue #28, 1: C's menu is empty at both its crawls of day 30 (migrations/025_empty_menus.sql):
    not a store crawled that day; B's was empty at 04:00 and back at 08:00: crawled."""
    x = history["x"]
    with psycopg.connect(db, autocommit=True) as conn:
        run_a = crawl(conn, history["a"], DAY30)
        seen(conn, history["pa1"], run_a, DAY30, "28.00")
        crawl(conn, history["c"], "2026-11-30 04:00Z", empty=True)
        crawl(conn, history["c"], DAY30, empty=True)
        crawl(conn, history["b"], "2026-11-30 04:00Z", empty=True)
        run_b = crawl(conn, history["b"], DAY30)
        seen(conn, history["pb1"], run_b, DAY30, "20.00")
    refresh(db)
    assert rows(db, "SELECT stores_crawled FROM market_state_daily WHERE state = 'AZ' AND day = %s", (D30,)) == [(2,)]
    assert rows(
        db,
        "SELECT stores, stores_crawled FROM market_brand_daily WHERE state = 'AZ' AND day = %s "
        "AND canonical_brand_id = %s",
        (D30, x),
    ) == [(2, 2)]  # A and B of the two stores with a menu, not 2 of 3
    before = market_rows(db)
    refresh(db)  # the empty crawls do not make the day look changed to the next roll
    assert market_rows(db) == before


def test_price_per_gram_per_category_for_the_state_and_its_cities(db, history):
    got = rows(
        db,
        "SELECT city, category, stores, products, on_special, price_per_g_median FROM market_category_daily "
        "WHERE state = 'AZ' AND day = %s ORDER BY 1, 2",
        (D28,),
    )
    # pa1 closed at 28.00 for its 3.5 g option: 8.00 a gram, and its 7 g (50.00 now, as 28.00 is
    # its eighth's price now) 50.00 / 7 = 7.1429: the median of the two SKUs 7.5714; its 'N/A' is
    # priced per unit, not per gram; edibles are priced per unit, not per gram
    assert got == [
        ("", "Edible", 2, 2, 0, None),
        ("", "Flower", 1, 1, 1, Decimal("7.5714")),
        ("Phoenix", "Edible", 2, 2, 0, None),
        ("Phoenix", "Flower", 1, 1, 1, Decimal("7.5714")),
    ]
    day0 = rows(
        db,
        "SELECT city, price_per_g_p25, price_per_g_median, price_per_g_p75 FROM market_category_daily "
        "WHERE state = 'AZ' AND day = %s AND category = 'Flower' ORDER BY 1",
        (D0,),
    )
    # per gram on day 0, every weighed size: pa1's eighth 35 / 3.5 = 10 and its 7 g 35 * 50 / 28 =
    # 62.50 / 7 = 8.9286, pb1 20, pc1 30; Phoenix has pa1's two and pb1
    assert day0 == [
        ("", Decimal("9.7321"), Decimal("15.0000"), Decimal("22.5000")),
        ("Phoenix", Decimal("9.4643"), Decimal("10.0000"), Decimal("15.0000")),
        ("Tucson", Decimal("30.0000"), Decimal("30.0000"), Decimal("30.0000")),
    ]
    assert rows(
        db,
        "SELECT skus_weighed, price_per_g_mean FROM market_category_daily "
        "WHERE state = 'AZ' AND day = %s AND category = 'Flower' AND city = ''",
        (D0,),
    ) == [(4, Decimal("17.2321"))]  # (10 + 8.9286 + 20 + 30) / 4


def test_each_weighed_size_is_priced_per_state_and_category(db, history):
    got = rows(
        db,
        "SELECT day, category, grams, stores, skus, price_mean, price_p25, price_median, price_p75, "
        "price_per_g_median, stores_by_platform FROM market_size_daily WHERE state = 'AZ' ORDER BY 1, 2, 3",
    )
    one = {"dutchie": 1}
    # day 0: the 1 g of B (20.00) and C (30.00), A's eighth (35.00) and its 7 g (62.50); day 28:
    # A's two sizes at its closing 28.00 (C's crawl failed, B sold only an edible); no 'N/A', no edible
    assert got == [
        (
            D0,
            "Flower",
            Decimal("1.000"),
            2,
            2,
            Decimal("25.00"),
            Decimal("22.50"),
            Decimal("25.00"),
            Decimal("27.50"),
            Decimal("25.0000"),
            {"dutchie": 2},
        ),
        (D0, "Flower", Decimal("3.500"), 1, 1, *[Decimal("35.00")] * 4, Decimal("10.0000"), one),
        (D0, "Flower", Decimal("7.000"), 1, 1, *[Decimal("62.50")] * 4, Decimal("8.9286"), one),
        (D28, "Flower", Decimal("3.500"), 1, 1, *[Decimal("28.00")] * 4, Decimal("8.0000"), one),
        (D28, "Flower", Decimal("7.000"), 1, 1, *[Decimal("50.00")] * 4, Decimal("7.1429"), one),
    ]


def test_the_days_largest_price_moves_name_their_event(db, history):
    got = rows(
        db,
        "SELECT state, day, kind, rank, store_product_id, crawl_run_id, price_old, price_new, change_pct "
        "FROM market_movers ORDER BY 1, 2, 3, 4",
    )
    assert got == [
        (
            "AZ",
            D28,
            "drop",
            1,
            history["pa1"],
            history["run_a28"],
            Decimal("35.00"),
            Decimal("28.00"),
            Decimal("-20.00"),
        ),
        (
            "AZ",
            D28,
            "rise",
            1,
            history["pa2"],
            history["run_a28"],
            Decimal("10.00"),
            Decimal("11.00"),
            Decimal("10.00"),
        ),
    ]
    event_ids = rows(db, "SELECT event_id FROM market_movers EXCEPT SELECT id FROM product_events")
    assert event_ids == []


def test_a_later_refresh_rewrites_only_the_days_since_the_last_roll(db, history):
    with psycopg.connect(db, autocommit=True) as conn:
        # a day long rolled that a full recomputation would restore: the roll must leave it
        conn.execute("UPDATE market_state_daily SET products_seen = 99 WHERE day = %s", (D0,))
        # the first roll had rolled up to the day-28 crawls (08:00): that day is rewritten
        assert conn.execute("SELECT rolled_upto FROM market_roll_state").fetchone()[0].hour == 8
        run = crawl(conn, history["b"], "2026-11-30 08:00Z")
        seen(conn, history["pb1"], run, "2026-11-30 08:00Z", "19.00")
        # a row of day 28 written after the first roll: the day is rewritten with it
        seen(conn, history["pb1"], None, "2026-11-29 20:00Z", "20.00")
    results = refresh(db)
    assert results[-1].view == market.STEP and results[-1].method == "incremental"
    got = rows(db, "SELECT day, stores_crawled, products_seen FROM market_state_daily WHERE state = 'AZ' ORDER BY 1")
    assert got == [(D0, 3, 99), (D28, 2, 4), (D29, 1, 1)]
    x = rows(
        db,
        "SELECT day, stores, stores_crawled FROM market_brand_daily WHERE state = 'AZ' AND canonical_brand_id = %s "
        "ORDER BY 1",
        (history["x"],),
    )
    assert x == [(D0, 3, 3), (D28, 2, 2), (D29, 1, 1)]
    # emptied, the tables are rebuilt from the whole history
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute("TRUNCATE market_roll_state")
    refresh(db)
    assert rows(db, "SELECT products_seen FROM market_state_daily WHERE state = 'AZ' AND day = %s", (D0,)) == [(4,)]


def tamper(conn: psycopg.Connection) -> None:
    """Figures no roll writes: a day the next roll leaves stands with them, a day it rewrites loses them."""
    conn.execute("UPDATE market_state_daily SET products_seen = 99")


def products_seen(db: str) -> list[tuple]:
    return rows(db, "SELECT state, day, products_seen FROM market_state_daily ORDER BY 1, 2")


def test_a_refresh_after_a_new_day_rewrites_that_day_only(db, history):
    with psycopg.connect(db, autocommit=True) as conn:
        tamper(conn)
        # day 28's events and crawls were written minutes before the first roll, within its margin,
        # and are what it rolled: day 28 stands
        run = crawl(conn, history["b"], "2026-11-30 08:00Z")
        seen(conn, history["pb1"], run, "2026-11-30 08:00Z", "19.00")
    refresh(db)
    assert products_seen(db) == [("AZ", D0, 99), ("AZ", D28, 99), ("AZ", D29, 1), ("MI", D28, 99)]
    refresh(db)  # nothing new: nothing rewritten
    assert rows(db, "SELECT count(*) FROM market_state_daily WHERE products_seen = 99") == [(3,)]


def test_events_recorded_after_a_roll_rewrite_their_day(db, history):
    with psycopg.connect(db, autocommit=True) as conn:
        tamper(conn)
        # a day-28 crawl's close after the roll: no snapshot of its own to roll, an event of day 28
        event(conn, history["run_a28"], "2026-11-29 08:00Z", history["a"], history["pa2"], "out_of_stock", None, "11")
    refresh(db)
    assert products_seen(db) == [("AZ", D0, 99), ("AZ", D28, 3), ("MI", D28, 1)]  # the day, every state
    assert rows(db, "SELECT out_of_stock FROM market_state_daily WHERE state = 'AZ' AND day = %s", (D28,)) == [(1,)]


def test_an_event_committed_after_a_roll_began_rewrites_its_day(db, history):
    with psycopg.connect(db, autocommit=True) as conn:
        tamper(conn)
        # stamped before the roll began (its transaction's start) but committed after it: unseen
        conn.execute(
            "INSERT INTO product_events (occurred_at, recorded_at, crawl_run_id, dispensary_id, store_product_id, "
            "type, price_rec) SELECT '2026-11-29 08:00Z', rolled_at - interval '30 minutes', %s, %s, %s, "
            "'back_in_stock', 11 FROM market_roll_state",
            (history["run_a28"], history["a"], history["pa2"]),
        )
    refresh(db)
    assert products_seen(db) == [("AZ", D0, 99), ("AZ", D28, 3), ("MI", D28, 1)]  # the day, every state
    assert rows(db, "SELECT back_in_stock FROM market_state_daily WHERE state = 'AZ' AND day = %s", (D28,)) == [(1,)]


def test_a_crawl_closed_complete_after_a_roll_rewrites_its_day(db, history):
    with psycopg.connect(db, autocommit=True) as conn:
        tamper(conn)
        # C's day-28 crawl, its snapshot rolled already, counted complete after the roll (past midnight)
        conn.execute(
            "UPDATE crawl_runs SET status = 'complete', finished_at = now() WHERE id = %s", (history["failed_c28"],)
        )
    refresh(db)
    got = rows(db, "SELECT day, stores_crawled, products_seen FROM market_state_daily WHERE state = 'AZ' ORDER BY 1")
    assert got == [(D0, 3, 99), (D28, 3, 4)]


# every market row, in one order, its day first
MARKET = {table: f"SELECT t.day, t.* FROM {table} t ORDER BY t" for table in market.DELETE}
MARKS = "SELECT rolled_upto, rolled_at, (SELECT market_from FROM analytics_roll_state) FROM market_roll_state"
# a day more: B and M crawled, B's price moved, M's product listed
DAY30 = "2026-11-30 08:00Z"


def market_rows(db: str) -> dict[str, list[tuple]]:
    return {table: rows(db, query) for table, query in MARKET.items()}


def rebuilt(db: str) -> dict[str, list[tuple]]:
    """The market tables rebuilt from the whole history by a one-part roll."""
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute("TRUNCATE market_roll_state")
    refresh(db)
    return market_rows(db)


def day30(conn: psycopg.Connection, history: dict[str, int]) -> None:
    runs = {k: crawl(conn, history[k], DAY30) for k in ("b", "m")}
    seen(conn, history["pb1"], runs["b"], DAY30, "18.00")
    seen(conn, history["pm1"], runs["m"], DAY30, "40.00")
    event(conn, runs["b"], DAY30, history["b"], history["pb1"], "price_changed", "20.00", "18.00")
    event(conn, runs["m"], DAY30, history["m"], history["pm1"], "listed", None, "40.00")


def test_the_roll_in_parts_by_state_writes_what_one_part_writes(db, history):
    one_part = market_rows(db)
    assert {row[1] for row in one_part["market_state_daily"]} == {"AZ", "MI"}  # a part each
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute("TRUNCATE market_roll_state")  # a rebuild of every day
    results = {r.view: r for r in refresh(db, parts=2)}
    assert results[market.STEP].rows == sum(len(v) for v in one_part.values())
    assert market_rows(db) == one_part
    with psycopg.connect(db, autocommit=True) as conn:
        tamper(conn)  # the days before stand as they are, tampered: only day 30 is rewritten
        before = market_rows(db)
        day30(conn, history)
    refresh(db, parts=2)
    got, want = market_rows(db), rebuilt(db)
    assert {t: [r for r in v if r[0] != D29] for t, v in got.items()} == before
    assert {t: [r for r in v if r[0] == D29] for t, v in got.items()} == {
        t: [r for r in v if r[0] == D29] for t, v in want.items()
    }
    assert [r[1:5] for r in got["market_state_daily"] if r[0] == D29] == [("AZ", D29, 1, 1), ("MI", D29, 1, 1)]
    assert [r[1:4] for r in got["market_movers"] if r[0] == D29] == [("AZ", D29, "drop")]


FAIL_MI = """
CREATE FUNCTION market_part_fails() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'part killed'; END $$;
CREATE TRIGGER market_part_fails BEFORE INSERT ON market_brand_daily
   FOR EACH ROW WHEN (NEW.state = 'MI') EXECUTE FUNCTION market_part_fails();
"""
MEND_MI = "DROP TRIGGER IF EXISTS market_part_fails ON market_brand_daily; DROP FUNCTION IF EXISTS market_part_fails()"


def test_a_failed_part_of_the_market_roll_leaves_its_days_to_the_next_roll(db, history):
    with psycopg.connect(db, autocommit=True) as conn:
        day30(conn, history)
        marks = conn.execute(MARKS).fetchall()
        conn.execute(FAIL_MI)
    try:
        # the MI part fails (the AZ part may commit): neither mark moves, market_from stays
        with pytest.raises(ExceptionGroup, match="unhandled errors in a TaskGroup"):
            refresh(db, parts=2)
        after = rows(db, MARKS)
        assert after[0][:2] == marks[0][:2] and after[0][2] == D29  # the product roll's since, kept
    finally:
        with psycopg.connect(db, autocommit=True) as conn:
            conn.execute(MEND_MI)
    refresh(db, parts=2)
    got = market_rows(db)
    assert rows(db, "SELECT market_from FROM analytics_roll_state") == [(None,)]
    assert got == rebuilt(db)


def test_a_store_whose_menu_is_empty_now_carries_nothing_and_lacks_nothing(db, history):
    """Issue #28, 1 (migrations/031_empty_menus_now.sql): while C's menu is empty its products keep
    the stock they had (025), but the views of the market now leave C out: it is neither a store
    carrying brand X nor one in the brand-category figures; its menu back, it counts again."""
    x = history["x"]

    def now_figures() -> tuple[list[tuple], list[tuple]]:
        brands = rows(db, "SELECT state, stores FROM market_brands_now WHERE brand_id = %s ORDER BY 1", (x,))
        flower = rows(
            db,
            "SELECT products, products_in_stock, stores FROM analytics_brand_category_state "
            "WHERE state = 'AZ' AND category = 'Flower'",
        )
        return brands, flower

    assert now_figures() == ([("AZ", 3), ("MI", 1), (None, 4)], [(3, 3, 3)])
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute("UPDATE dispensaries SET menu_empty_since = '2026-11-30 04:00Z' WHERE id = %s", (history["c"],))
    refresh(db)
    assert now_figures() == ([("AZ", 2), ("MI", 1), (None, 3)], [(2, 2, 2)])
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute("UPDATE dispensaries SET menu_empty_since = NULL WHERE id = %s", (history["c"],))
    refresh(db)
    assert now_figures() == ([("AZ", 3), ("MI", 1), (None, 4)], [(3, 3, 3)])


def test_an_implausible_price_move_is_counted_not_a_drop_rise_or_mover(db, history):
    """Issue #28, 16 (cannaspider/analytics/plausible.py): on day 30, B's 20.00 → 0.01 and M's
    40.00 → 40,000.00 are wrong prices: price_changes_implausible counts them, price_drops and
    price_rises do not, and the movers are only B's plausible 12.00 → 10.00 (-16.67 %)."""
    with psycopg.connect(db, autocommit=True) as conn:
        runs = {k: crawl(conn, history[k], DAY30) for k in ("b", "m")}
        seen(conn, history["pb2"], runs["b"], DAY30, "10.00")
        event(conn, runs["b"], DAY30, history["b"], history["pb1"], "price_changed", "20.00", "0.01")
        event(conn, runs["b"], DAY30, history["b"], history["pb2"], "price_changed", "12.00", "10.00")
        event(conn, runs["m"], DAY30, history["m"], history["pm1"], "price_changed", "40.00", "40000.00")
    refresh(db)
    got = rows(
        db,
        "SELECT state, price_changed, price_drops, price_rises, price_changes_implausible FROM market_state_daily "
        "WHERE day = %s ORDER BY 1",
        (D30,),
    )
    assert got == [("AZ", 2, 1, 0, 1), ("MI", 1, 0, 0, 1)]
    movers = rows(db, "SELECT state, kind, store_product_id, change_pct FROM market_movers WHERE day = %s", (D30,))
    assert movers == [("AZ", "drop", history["pb2"], Decimal("-16.67"))]
    assert rows(db, "SELECT sum(price_changes_implausible) FROM market_state_daily WHERE day < %s", (D30,)) == [(0,)]


def test_a_canonical_products_days_are_rolled_alike_in_one_part_or_by_product_share(db, history):
    """pa1 (3.5 g, 7 g, 'N/A') and pc1, pm1 (1 g) are one canonical product, pb1 another: their
    days across stores, rolled in one part, then rebuilt in 3 parts by product share."""
    with psycopg.connect(db, autocommit=True) as conn:
        one, other = (
            conn.execute(
                "INSERT INTO canonical_products (key, category, name, name_key, size_key) "
                "VALUES (%s, 'Flower', %s, %s, '') RETURNING id",
                (key, key, key),
            ).fetchone()[0]
            for key in ("one", "other")
        )
        conn.execute(
            "UPDATE store_products SET canonical_product_id = CASE provider_product_id WHEN 'pb1' THEN %s ELSE %s END "
            "WHERE category = 'Flower'",
            (other, one),
        )
        conn.execute("TRUNCATE market_roll_state")
    refresh(db)
    tables = {t: f"SELECT * FROM {t} ORDER BY 1, 2, 3" for t in market.PRODUCT_TABLES}
    rolled = {t: rows(db, q) for t, q in tables.items()}
    assert rolled["product_listed_daily"] == [
        (one, D0, 2, 2, 2),  # A and C (C's day 28 crawl failed: not then), M on day 28
        (one, D28, 2, 2, 2),
        (other, D0, 1, 1, 1),
    ]
    assert [r[:8] for r in rolled["product_size_daily"] if r[0] == one] == [
        (one, D0, "1g", Decimal("1.000"), 1, *[Decimal("30.00")] * 3),
        (one, D0, "3.5g", Decimal("3.500"), 1, *[Decimal("35.00")] * 3),
        (one, D0, "7g", Decimal("7.000"), 1, *[Decimal("62.50")] * 3),
        (one, D0, "N/A", None, 1, *[Decimal("6.25")] * 3),
        (one, D28, "1g", Decimal("1.000"), 1, *[Decimal("40.00")] * 3),
        (one, D28, "3.5g", Decimal("3.500"), 1, *[Decimal("28.00")] * 3),
        (one, D28, "7g", Decimal("7.000"), 1, *[Decimal("50.00")] * 3),
        (one, D28, "N/A", None, 1, *[Decimal("5.00")] * 3),
    ]
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute("TRUNCATE market_roll_state")
        conn.execute("UPDATE product_size_daily SET stores = 99")  # a rebuild rewrites every day
    refresh(db, parts=3)
    assert {t: rows(db, q) for t, q in tables.items()} == rolled
