"""Sizes as SKUs and a canonical product across stores over time (issue 32, points 1 and 4), over
the scripted market history of tests/analytics/test_market.py rolled by the real analytics refresh:
GET /api/products/{id}/history, the product's sizes in GET /api/products/{id}, the market's sizes
and its states side by side (GET /api/market, GET /api/market/states), the 422s; then the product
page and the market pages in real headless Chromium, their numbers checked against the API and
SQL, no request leaving 127.0.0.1."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

import psycopg
import pytest

from tests.analytics.test_market import MARKET_TABLES, ROLLED_TABLES, refresh, script
from tests.httpclient import http
from tests.web.test_dashboard import browser, recording_page, shot  # noqa: F401 - fixtures

pytestmark = pytest.mark.integration  # spawns (tests/tiers.py)

D0, D28 = "2026-11-01", "2026-11-29"


@pytest.fixture
def rolled(db):
    """The script's flower, pa1 (A: 3.5 g, 7 g, 'N/A'), pb1, pc1 and pm1 (B, C, M: 1 g), is one
    canonical product; its edibles another."""
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute(f"TRUNCATE {ROLLED_TABLES}, {MARKET_TABLES}")
        ids = script(conn)
        flower, edible = (
            conn.execute(
                "INSERT INTO canonical_products (key, canonical_brand_id, category, name, name_key, size_key) "
                "VALUES (%s, %s, %s, %s, %s, %s) RETURNING id",
                (key, ids[brand], category, name, name.lower(), sizes),
            ).fetchone()[0]
            for key, brand, category, name, sizes in (
                ("bx|Flower|blue dream|1g,3.5g,7g", "x", "Flower", "Blue Dream", "1g,3.5g,7g"),
                ("by|Edible|gummies|", "y", "Edible", "Gummies", ""),
            )
        )
        conn.execute(
            "UPDATE store_products SET canonical_product_id = CASE WHEN category = 'Flower' THEN %s ELSE %s END",
            (flower, edible),
        )
    with ThreadPoolExecutor(1) as pool:  # Playwright's sync API keeps an event loop in this thread
        pool.submit(refresh, db).result()
    return {**ids, "flower": flower, "edible": edible}


def sizes_of(day: dict) -> dict[str, tuple]:
    return {z["size"]: (z["stores"], z["price_min"], z["price_median"], z["price_max"]) for z in day["sizes"]}


def test_a_canonical_products_days_across_stores_per_size(api, rolled, sql):
    body = http("GET", f"{api.base}/api/products/{rolled['flower']}/history").json()
    # the last rolled day and the 30 days up to it
    assert (body["since"], body["until"], body["name"]) == ("2026-10-31", D28, "Blue Dream")
    assert [d["day"] for d in body["days"]] == [D0, D28]
    day0, day28 = body["days"]
    # day 0: A, B and C crawled completely; A's eighth closed at 35.00, so its 7 g (50.00 against the
    # eighth's 28.00 now) at 62.50 and its 'N/A' (5.00) at 6.25; B's 1 g 20.00, C's 30.00
    assert (day0["stores"], day0["store_products"]) == (3, 3)
    assert sizes_of(day0) == {
        "1g": (2, 20.0, 25.0, 30.0),
        "3.5g": (1, 35.0, 35.0, 35.0),
        "7g": (1, 62.5, 62.5, 62.5),
        "N/A": (1, 6.25, 6.25, 6.25),
    }
    # day 28: C's crawl failed (its snapshot counts nowhere), B did not list it; A at 28.00, M's 1 g 40.00
    assert (day28["stores"], day28["store_products"]) == (2, 2)
    assert sizes_of(day28) == {
        "1g": (1, 40.0, 40.0, 40.0),
        "3.5g": (1, 28.0, 28.0, 28.0),
        "7g": (1, 50.0, 50.0, 50.0),
        "N/A": (1, 5.0, 5.0, 5.0),
    }
    units = {z["size"]: (z["unit_price_median"], z["unit_price_basis"]) for z in day28["sizes"]}
    assert units == {"1g": (40.0, "g"), "3.5g": (8.0, "g"), "7g": (7.1429, "g"), "N/A": (5.0, "unit")}
    # traceable: the figures are the product-days of complete crawls, as SQL has them
    listed = sql(
        "SELECT p.day::text, count(DISTINCT sp.dispensary_id), count(*), sum(p.snapshots) "
        "FROM analytics_product_daily p JOIN store_products sp ON sp.id = p.store_product_id "
        "JOIN analytics_store_daily a ON a.dispensary_id = sp.dispensary_id AND a.day = p.day "
        "WHERE sp.canonical_product_id = %s AND a.crawls > a.empty_crawls GROUP BY 1 ORDER BY 1",
        (rolled["flower"],),
    )
    assert [(d["day"], d["stores"], d["store_products"], d["snapshots"]) for d in body["days"]] == listed
    # a range: one day
    one = http("GET", f"{api.base}/api/products/{rolled['flower']}/history?since={D28}&until={D28}").json()
    assert [d["day"] for d in one["days"]] == [D28]
    # since alone: up to its last rolled day; until alone: the `days` before it
    only_since = http("GET", f"{api.base}/api/products/{rolled['flower']}/history?since=2026-11-02").json()
    assert (only_since["until"], [d["day"] for d in only_since["days"]]) == (D28, [D28])
    only_until = http("GET", f"{api.base}/api/products/{rolled['flower']}/history?until=2026-11-10&days=10").json()
    assert (only_until["since"], [d["day"] for d in only_until["days"]]) == (D0, [D0])


@pytest.mark.parametrize(
    "query, field",
    [
        ("since=2026-11-29&until=2026-11-01", "since"),  # reversed
        ("since=2025-01-01&until=2026-11-29", "until"),  # more than 366 days
        ("since=1999-12-31", "since"),
        ("until=3000-01-01", "until"),
        ("days=0", "days"),
        ("days=367", "days"),
        ("since=yesterday", "since"),
        ("from=2026-11-01", "from"),  # unknown
    ],
)
def test_a_bad_range_is_a_422_with_the_reason(api, rolled, query, field):
    answer = http("GET", f"{api.base}/api/products/{rolled['flower']}/history?{query}")
    assert answer.status == 422, answer.text
    assert answer.json()["detail"][0]["loc"][-1] == field


def test_an_unknown_product_is_a_404_and_the_schema_documents_the_history(api, rolled, sql):
    assert http("GET", f"{api.base}/api/products/999999/history").status == 404
    # a product never rolled: no day, up to today, or the span from since
    ((lone,),) = sql("INSERT INTO canonical_products (key, name) VALUES ('lone', 'Lone') RETURNING id")
    body = http("GET", f"{api.base}/api/products/{lone}/history").json()
    assert body["days"] == [] and body["until"] == str(datetime.now(UTC).date())
    body = http("GET", f"{api.base}/api/products/{lone}/history?since=2026-11-01&days=5").json()
    assert (body["since"], body["until"], body["days"]) == ("2026-11-01", "2026-11-05", [])
    schema = http("GET", f"{api.base}/openapi.json").json()
    history = schema["paths"]["/api/products/{canonical_id}/history"]["get"]
    assert {"200", "404", "422"} <= set(history["responses"])
    assert {p["name"] for p in history["parameters"]} == {"canonical_id", "since", "until", "days"}
    assert "/api/market/states" in schema["paths"]


def test_the_products_sizes_now_each_their_own_sku(api, rolled):
    body = http("GET", f"{api.base}/api/products/{rolled['flower']}").json()
    assert [(z["size"], z["stores"], z["price_min"], z["price_median"], z["price_max"]) for z in body["sizes"]] == [
        ("1g", 3, 20.0, 30.0, 40.0),
        ("3.5g", 1, 28.0, 28.0, 28.0),
        ("7g", 1, 50.0, 50.0, 50.0),
        ("N/A", 1, 5.0, 5.0, 5.0),
    ]
    a = next(s for s in body["stores"] if s["provider_product_id"] == "pa1")
    assert [(o["option"], o["unit_price"], o["unit_price_basis"]) for o in a["options"]] == [
        ("1/8oz", 8.0, "g"),
        ("1/4oz", 7.1429, "g"),
        ("N/A", 5.0, "unit"),  # per unit, never mixed into flower's per-gram figures
    ]


def test_the_market_prices_each_size_and_sets_the_states_side_by_side(api, rolled, sql):
    body = http("GET", f"{api.base}/api/market?state=AZ").json()
    flower = next(c for c in body["categories"] if c["category"] == "Flower")
    assert (flower["skus_weighed"], flower["price_per_g_mean"], flower["price_per_g_median"]) == (2, 7.5714, 7.5714)
    assert [(z["category"], z["grams"], z["stores"], z["price_median"]) for z in body["sizes"]] == [
        ("Flower", 3.5, 1, 28.0),
        ("Flower", 7.0, 1, 50.0),
    ]
    table = http("GET", f"{api.base}/api/market/states?category=Flower").json()
    assert table["sizes"] == [1.0, 3.5, 7.0, 14.0, 28.0]
    rows = {r["state"]: r for r in table["states"]}
    assert sorted(rows) == ["AZ", "MI"]
    az, mi = rows["AZ"], rows["MI"]
    assert (az["day"], az["price_per_g_median"], az["skus_weighed"]) == (D28, 7.5714, 2)
    assert [z.get("price_median") for z in az["sizes"]] == [None, 28.0, 50.0, None, None]
    assert [z.get("price_median") for z in mi["sizes"]] == [40.0, None, None, None, None]
    # each figure as the rolled tables hold it
    assert sql(
        "SELECT price_median::float8 FROM market_size_daily WHERE state = 'AZ' AND day = %s AND grams = 3.5",
        (D28,),
    ) == [(28.0,)]
    then = http("GET", f"{api.base}/api/market/states?category=Flower&day=2026-11-10").json()
    assert [(r["state"], r["day"], r["sizes"][0].get("price_median")) for r in then["states"]] == [("AZ", D0, 25.0)]
    for bad in ("day=2026-13-01", "day=1999-01-01", "state=AZ", "category="):
        assert http("GET", f"{api.base}/api/market/states?{bad}").status == 422, bad


@pytest.fixture
def page(browser, tmp_path):  # noqa: F811 - a phone, like the dashboard's
    with recording_page(browser, tmp_path, viewport={"width": 390, "height": 844}) as (pg, requests):
        yield pg
    assert requests and all(u.startswith("http://127.0.0.1:") for u in requests), requests


def test_the_product_page_shows_its_sizes_and_days_as_the_api_has_them(api, rolled, page):
    history = http("GET", f"{api.base}/api/products/{rolled['flower']}/history").json()
    now = http("GET", f"{api.base}/api/products/{rolled['flower']}").json()
    page.goto(f"{api.base}/dashboard/products/{rolled['flower']}")
    assert page.locator("h1").inner_text() == "Blue Dream"
    rows = page.locator("#history tr[data-day]").all()
    expected = [(d["day"], z) for d in reversed(history["days"]) for z in d["sizes"]]
    assert len(rows) == len(expected) == 8
    for row, (day, z) in zip(rows, expected, strict=True):
        assert (row.get_attribute("data-day"), row.get_attribute("data-size")) == (day, z["size"])
        cells = {k: row.locator(f'[data-k="{k}"]').inner_text() for k in ("size_stores", "min", "median", "max")}
        assert cells == {
            "size_stores": str(z["stores"]),
            "min": f"${z['price_min']:,.2f}",
            "median": f"${z['price_median']:,.2f}",
            "max": f"${z['price_max']:,.2f}",
        }
    sizes = page.locator("#sizes tr[data-size]").all()
    assert [r.get_attribute("data-size") for r in sizes] == [z["size"] for z in now["sizes"]]
    assert sizes[0].locator('[data-k="median"]').inner_text() == "$30.00"
    # one line per size, a dot per day it was listed
    assert page.locator("svg.chart g.series").count() == 4
    assert page.locator('svg.chart g.series[data-series="1g"] circle').count() == 2
    assert page.locator("#stores tr[data-store]").count() == 4
    shot(page, "canonical-product")
    page.locator("#stores a").first.click()
    page.wait_for_url("**/dashboard/stores/*/products/*")
    page.click("#across-stores")  # and back, from the store's product
    page.wait_for_url(f"**/dashboard/products/{rolled['flower']}")


def test_the_market_pages_show_the_sizes_and_the_states_table(api, rolled, page, sql):
    page.goto(api.base + "/dashboard/market/AZ")
    sizes = page.locator("#sizes tr[data-grams]").all()
    expected = sql(
        "SELECT grams::float8, price_median, price_mean FROM market_size_daily "
        "WHERE state = 'AZ' AND day = %s ORDER BY category, grams",
        (D28,),
    )
    assert [float(r.get_attribute("data-grams") or 0) for r in sizes] == [g for g, _, _ in expected]
    for row, (_, median, mean) in zip(sizes, expected, strict=True):
        assert row.locator('[data-k="median"]').inner_text() == f"${median:,.2f}"
        assert row.locator('[data-k="mean"]').inner_text() == f"${mean:,.2f}"
    shot(page, "market-az-sizes")
    page.goto(api.base + "/dashboard/market")
    rows = page.locator("#states-table tr[data-state]").all()
    assert [r.get_attribute("data-state") for r in rows] == ["AZ", "MI"]
    ((median_per_g,),) = sql(
        "SELECT price_per_g_median FROM market_category_daily "
        "WHERE state = 'AZ' AND day = %s AND city = '' AND category = 'Flower'",
        (D28,),
    )
    assert rows[0].locator('td[data-k="median"]').inner_text() == f"${median_per_g:,.2f}"
    assert rows[0].locator('td[data-grams="3.5"] [data-k="median"]').inner_text() == "$28.00"
    assert rows[1].locator('td[data-grams="1"] [data-k="median"]').inner_text() == "$40.00"
    assert rows[0].locator('td[data-grams="1"]').inner_text() == "–"
    shot(page, "market-states-table")
