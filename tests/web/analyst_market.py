"""A small market for the analyst's pages (specials, brands, a store's products): three AZ stores and
one NV, one store's menu empty, brands spelled several ways (one with an accent, one with a
near-duplicate only a fuzzy score finds), products on special with the deals the normalizers keep,
two days of crawls (so the market tables have an availability over time), rolled by the real
analytics refresh."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal

import psycopg
import pytest

from tests.analytics.test_market import MARKET_TABLES, ROLLED_TABLES, crawl, event, refresh, seen
from tests.web.test_dashboard import recording_page

SALE = {"name": "20% off Flower", "type": "sale", "discount": 20, "percent_discount": True, "bundle_price": None,
        "required_quantity": None}  # fmt: skip
BOGO = {"name": "Buy 2 get 1", "type": "bogo", "discount": None, "percent_discount": None, "bundle_price": None,
        "required_quantity": 2}  # fmt: skip

# (key, store, brand, category, size_key, price, special price or None, deals, unit price, basis)
PRODUCTS = [
    ("a1", "a", "cafe", "Flower", "3.5g", "35.00", "28.00", [SALE], "10.0000", "g"),
    ("a2", "a", "cafe", "Flower", "1g", "12.00", "9.60", [SALE, BOGO], "12.0000", "g"),
    ("a3", "a", "abundant", "Edible", None, "20.00", "15.00", [BOGO], "20.0000", "unit"),
    ("a4", "a", "abundant2", "Edible", None, "18.00", None, [], "18.0000", "unit"),
    ("a5", "a", "mohave", "Flower", "7g", "60.00", "50.00", [], "8.5714", "g"),
    ("b1", "b", "cafe", "Flower", "3.5g", "40.00", "32.00", [SALE], "11.4286", "g"),
    ("b2", "b", "mohave2", "Flower", "3.5g", "30.00", None, [], "8.5714", "g"),
    ("b3", "b", "abundant", "Edible", None, "22.00", None, [], "22.0000", "unit"),
    ("n1", "n", "cafe", "Flower", "3.5g", "45.00", "36.00", [SALE], "12.8571", "g"),
    ("e1", "e", "cafe", "Flower", "3.5g", "33.00", "20.00", [SALE], "9.4286", "g"),  # menu empty: not running
]


def seed(conn: psycopg.Connection) -> dict[str, int]:
    conn.execute(f"TRUNCATE {ROLLED_TABLES}, {MARKET_TABLES}")
    conn.execute("SELECT ensure_snapshot_partitions('2026-11-01', 2)")
    ids: dict[str, int] = {}
    for key, name, state, platform in (
        ("a", "Aloe Dispensary", "AZ", "dutchie"),
        ("b", "Bloom", "AZ", "jane"),
        ("e", "Empty Menu", "AZ", "dutchie"),
        ("n", "Nevada Buds", "NV", "dutchie"),
    ):
        ids[key] = conn.execute(
            "INSERT INTO dispensaries (name, state, city, platform) VALUES (%s, %s, 'Town', %s) RETURNING id",
            (name, state, platform),
        ).fetchone()[0]
    conn.execute("UPDATE dispensaries SET menu_empty_since = '2026-11-29 08:00Z' WHERE id = %s", (ids["e"],))
    # canonical brands; 'abundant2' is the same brand sent in capitals (a second brand row of it)
    for key, bkey, name, norm, provider in (
        ("cafe", "n:cafe nuit", "Café Nuit", "cafe nuit", None),
        ("abundant", "d:ab1", "Abundant Organics", "abundant organics", "ab1"),
        ("mohave", "d:mo1", "Mohave Cannabis Co.", "mohave cannabis", "mo1"),
        ("mohave2", "n:mohave canabis", "MOHAVE CANABIS", "mohave canabis", None),
    ):
        ids[key] = conn.execute(
            "INSERT INTO brands (key, provider_brand_id, name, normalized_name) VALUES (%s, %s, %s, %s) RETURNING id",
            (bkey, provider, name, norm),
        ).fetchone()[0]
    ids["abundant2"] = conn.execute(
        "INSERT INTO brands (key, name, normalized_name, canonical_brand_id) "
        "VALUES ('n:abundant organics', 'ABUNDANT ORGANICS', 'abundant organics', %s) RETURNING id",
        (ids["abundant"],),
    ).fetchone()[0]
    canonical = {"abundant2": ids["abundant"]}
    for key, store, brand, category, size, price, special, deals, unit, basis in PRODUCTS:
        brand_id = canonical.get(brand, ids[brand])
        product = conn.execute(
            "INSERT INTO canonical_products (key, canonical_brand_id, category, name, name_key, size_key) "
            "VALUES (%s, %s, %s, %s, %s, %s) RETURNING id",
            (f"b{brand_id}|{category}|{key}|{size}", brand_id, category, f"Product {key}", key, size or ""),
        ).fetchone()[0]
        raw = conn.execute("SELECT name FROM brands WHERE id = %s", (ids[brand],)).fetchone()[0]
        ids[key] = conn.execute(
            "INSERT INTO store_products (dispensary_id, provider_product_id, name_raw, brand_name_raw, category, "
            "price_rec, price_rec_special, is_on_special, specials, unit_price, unit_price_special, unit_price_basis, "
            "brand_ref_id, canonical_brand_id, canonical_product_id, first_seen_at) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, '2026-11-01 08:00Z') RETURNING id",
            (
                ids[store],
                key,
                f"Product {key}",
                raw,
                category,
                Decimal(price),
                Decimal(special) if special else None,
                special is not None,
                json.dumps(deals),
                Decimal(unit),
                round(Decimal(unit) * Decimal(special) / Decimal(price), 4) if special else None,
                basis,
                ids[brand],
                brand_id,
                product,
            ),
        ).fetchone()[0]
    # two days: on day 0 only store a carries Café Nuit and Abundant; on day 28, a, b and n crawled
    day0, day28 = "2026-11-01 08:00Z", "2026-11-29 08:00Z"
    run_a0 = crawl(conn, ids["a"], day0)
    for key in ("a1", "a3"):
        seen(conn, ids[key], run_a0, day0, "35.00")
    runs = {s: crawl(conn, ids[s], day28) for s in ("a", "b", "n")}
    for key, store, *_rest in PRODUCTS:
        if store in runs:
            price = next(p[5] for p in PRODUCTS if p[0] == key)
            seen(conn, ids[key], runs[store], day28, price, special=any(p[0] == key and p[6] for p in PRODUCTS))
    # the special of a1 started at day 28's crawl; a2's has run since it was first seen
    event(conn, runs["a"], day28, ids["a"], ids["a1"], "special_started", None, "28.00")
    event(conn, runs["b"], day28, ids["b"], ids["b2"], "price_changed", "33.00", "30.00")
    ids.update({f"run_{k}": v for k, v in runs.items()})
    return ids


def seeded(db: str) -> dict[str, int]:
    with psycopg.connect(db, autocommit=True) as conn:
        ids = seed(conn)
    # in a thread of its own: a test's Playwright keeps an event loop running in this one
    with ThreadPoolExecutor(1) as pool:
        pool.submit(refresh, db).result()
    return ids


@pytest.fixture
def market(db):
    """The market seeded and rolled; its ids by key ('a', 'cafe', 'a1', …)."""
    return seeded(db)


@pytest.fixture
def page(browser, tmp_path):
    """A phone-sized page, like the dashboard's; no request of it may leave 127.0.0.1."""
    with recording_page(browser, tmp_path, viewport={"width": 390, "height": 844}) as (pg, requests):
        yield pg
    assert requests and all(u.startswith("http://127.0.0.1:") for u in requests), requests
