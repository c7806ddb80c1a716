"""Brands as an analyst finds them (docs/analytics.md, "Finding a brand"), over a seeded market
rolled by the real analytics refresh (tests/web/analyst_market.py): search by name in any case or
accent, the stores that sell a brand with size and $/g, its availability over time, share of shelf
and events, checked against SQL; the brand pages in real headless Chromium."""

from __future__ import annotations

import psycopg
import pytest

from cannaspider.analytics import canonical
from cannaspider.web import brands
from tests.httpclient import http
from tests.web import analyst_market
from tests.web.test_dashboard import browser, shot  # noqa: F401 - fixtures

pytestmark = pytest.mark.integration  # spawns (tests/tiers.py)

market, page = analyst_market.market, analyst_market.page  # the seeded market; a phone-sized page


def _search(api, q: str) -> list[str]:
    reply = http("GET", api.base + "/api/brands?q=" + q)
    assert reply.status == 200, reply.text
    return [b["name"] for b in reply.json()]


def test_search_by_name_ignores_case_accents_punctuation_and_suffix(api, market):
    assert _search(api, "cafe") == _search(api, "CAF%C3%89") == _search(api, "caf%C3%A9%20nuit") == ["Café Nuit"]
    assert _search(api, "organics") == _search(api, "ABUNDANT%20ORGANICS") == ["Abundant Organics"]
    # 'Mohave Cannabis Co.' and 'MOHAVE CANABIS' both contain 'mohave'; the one carried by more stores first
    assert sorted(_search(api, "mohave")) == ["MOHAVE CANABIS", "Mohave Cannabis Co."]
    assert _search(api, "mohave%20cannabis%20company") == ["Mohave Cannabis Co."]
    assert _search(api, "zzz") == []
    brand = http("GET", api.base + "/api/brands?q=nuit").json()[0]
    assert (brand["id"], brand["stores"], brand["stores_by_state"]) == (market["cafe"], 3, {"AZ": 2, "NV": 1})
    for bad in ("q=", "q=%21%21", "q=%00"):
        reply = http("GET", api.base + "/api/brands?" + bad)
        assert reply.status == 422 and reply.json()["detail"][0]["loc"][-1] == "q", bad


def test_a_brands_stores_sizes_and_unit_prices_are_its_store_products(api, market, sql):
    body = http("GET", api.base + f"/api/brands/{market['cafe']}/stores?state=az").json()
    expected = sql(
        "SELECT sp.provider_product_id, cp.size_key, sp.unit_price::float8 FROM store_products sp "
        "JOIN dispensaries d ON d.id = sp.dispensary_id JOIN canonical_products cp ON cp.id = sp.canonical_product_id "
        "WHERE sp.canonical_brand_id = %s AND d.state = 'AZ' ORDER BY d.name, sp.name_raw",
        (market["cafe"],),
    )
    assert [(p["provider_product_id"], p["size_key"], p["unit_price"]) for p in body["products"]] == expected
    assert http("GET", api.base + "/api/brands/999999/stores").status == 404
    assert http("GET", api.base + f"/api/brands/{market['cafe']}/stores?stock=gone").status == 422


def test_a_brands_availability_shelf_share_and_events_are_the_market_tables(api, market, sql):
    body = http("GET", api.base + f"/api/brands/{market['cafe']}/market").json()
    expected = sql(
        "SELECT state, day::text, stores, stores_crawled FROM market_brand_daily WHERE canonical_brand_id = %s "
        "ORDER BY state, day",
        (market["cafe"],),
    )
    assert [(a["state"], a["day"], a["stores"], a["stores_crawled"]) for a in body["availability"]] == expected
    assert [a["availability"] for a in body["availability"] if a["state"] == "AZ"] == [1.0, 1.0]
    # AZ's Flower in stock: Café Nuit's a1, a2, b1 of the 5 (a5 Mohave's, b2); e1 is in an empty menu
    az = {s["category"]: s for s in body["shelf"] if s["state"] == "AZ"}
    ((shelf,),) = sql(
        "SELECT count(*) FROM store_products sp JOIN dispensaries d ON d.id = sp.dispensary_id "
        "WHERE d.state = 'AZ' AND sp.category = 'Flower' AND sp.stock_status = 'in_stock' "
        "AND d.menu_empty_since IS NULL"
    )
    assert (az["Flower"]["products"], az["Flower"]["category_products"]) == (3, shelf) == (3, 5)
    assert az["Flower"]["share"] == pytest.approx(3 / 5)
    assert [e["type"] for e in body["events"]] == ["special_started"]
    assert http("GET", api.base + "/api/brands/999999/market").status == 404


def test_the_brand_pages_show_the_figures_sql_gives(api, market, page, sql):
    page.goto(api.base + "/dashboard/brands?q=CAFE")
    rows = page.locator("#brands tbody tr[data-brand]").all()
    assert [r.get_attribute("data-brand") for r in rows] == [str(market["cafe"])]
    shot(page, "brands-search")
    rows[0].locator("a").click()
    page.wait_for_url(f"**/dashboard/brands/{market['cafe']}")
    states = {r.get_attribute("data-state"): r for r in page.locator("#states tbody tr[data-state]").all()}
    ((az_stores, az_per_g),) = sql(
        "SELECT count(DISTINCT sp.dispensary_id), percentile_cont(0.5) WITHIN GROUP (ORDER BY sp.unit_price) "
        "FROM store_products sp JOIN dispensaries d ON d.id = sp.dispensary_id WHERE sp.canonical_brand_id = %s "
        "AND d.state = 'AZ' AND sp.stock_status = 'in_stock' AND d.menu_empty_since IS NULL",
        (market["cafe"],),
    )
    assert states["AZ"].locator('[data-k="stores"]').inner_text() == str(az_stores)
    assert states["AZ"].locator('[data-k="median_price_per_g"]').inner_text() == f"${az_per_g:,.2f}"
    sold = page.locator("#stores tbody tr[data-product]").all()
    ((listed,),) = sql("SELECT count(*) FROM store_products WHERE canonical_brand_id = %s", (market["cafe"],))
    assert len(sold) == listed == 5
    a1 = page.locator('#stores tr[data-product="a1"]')
    assert (a1.locator('[data-k="size"]').inner_text(), a1.locator('[data-k="unit_price"]').inner_text()) == (
        "3.5g",
        "$10.00/g",
    )
    shelf = page.locator('#shelf tr[data-state="AZ"][data-category="Flower"] [data-k="share"]').inner_text()
    assert shelf == "60.0 %"
    assert page.locator("svg.chart").count() == 1
    assert page.locator("#events tbody tr[data-event]").count() == 1
    shot(page, "brand")
    # a store's link opens its products filtered by this brand
    page.locator(f'#stores tr[data-product="a1"] a[href*="brand_id={market["cafe"]}"]').click()
    page.wait_for_url(f"**/dashboard/stores/{market['a']}?brand_id={market['cafe']}")
    listed_here = [r.get_attribute("data-product") for r in page.locator("#products tr[data-product]").all()]
    assert listed_here == ["a1", "a2"]


def test_a_brands_stores_come_in_stock_first_in_store_order_up_to_the_limit(api, market, sql):
    """brands.stores() reads the in-stock ones, then the out-of-stock ones while room is left: the
    same rows, in the same order, as one query ordered by stock, state, store and product."""
    sql("UPDATE store_products SET stock_status = 'oos', is_in_stock = false WHERE id = %s", (market["a1"],))
    ordered = [
        (pid, stock)
        for pid, stock in sql(
            "SELECT sp.provider_product_id, sp.stock_status FROM store_products sp "
            "JOIN dispensaries d ON d.id = sp.dispensary_id WHERE sp.canonical_brand_id = %s "
            "ORDER BY sp.stock_status, d.state, d.name, d.id, sp.name_raw, sp.provider_product_id",
            (market["cafe"],),
        )
    ]
    assert ordered[-1] == ("a1", "oos") and len(ordered) == 5
    for limit in range(1, 7):
        body = http("GET", api.base + f"/api/brands/{market['cafe']}/stores?limit={limit}").json()
        assert [(p["provider_product_id"], p["stock_status"]) for p in body["products"]] == ordered[:limit], limit
    for stock in ("in_stock", "oos"):
        body = http("GET", api.base + f"/api/brands/{market['cafe']}/stores?stock={stock}").json()
        assert [(p["provider_product_id"], p["stock_status"]) for p in body["products"]] == [
            row for row in ordered if row[1] == stock
        ]


def test_a_large_brands_events_are_found_by_the_brand_they_were_written_with(api, db, market, sql):
    """A brand of more store products than brands.SMALL_BRAND has its events read by the brand each
    event keeps (set when it is written: migration 046), its own and those of the brands an alias
    merged into it: the same list the small brand's way gave."""
    small = [e["id"] for e in http("GET", api.base + f"/api/brands/{market['cafe']}/market").json()["events"]]
    # every event keeps its product's canonical brand, whoever wrote it (the seed's SQL here)
    assert sql(
        "SELECT count(*), count(*) FILTER (WHERE e.canonical_brand_id = sp.canonical_brand_id) "
        "FROM product_events e JOIN store_products sp ON sp.id = e.store_product_id"
    ) == [(2, 2)]
    # Café Nuit grows past SMALL_BRAND (out of stock in store a: its figures stay as they were)
    sql(
        "INSERT INTO store_products (dispensary_id, provider_product_id, name_raw, stock_status, is_in_stock, "
        "canonical_brand_id) SELECT %s, 'x' || g, 'Product x' || g, 'oos', false, %s "
        "FROM generate_series(1, %s) g",
        (market["a"], market["cafe"], brands.SMALL_BRAND),
    )
    body = http("GET", api.base + f"/api/brands/{market['cafe']}/market").json()
    assert [e["id"] for e in body["events"]] == small and [e["type"] for e in body["events"]] == ["special_started"]
    # MOHAVE CANABIS (b2's brand, with its price_changed event) aliased to Café Nuit: its event is Café Nuit's
    with psycopg.connect(db, autocommit=True) as conn:
        canonical.alias(conn, "MOHAVE CANABIS", str(market["cafe"]))
    body = http("GET", api.base + f"/api/brands/{market['cafe']}/market").json()
    assert [(e["type"], e["provider_product_id"]) for e in body["events"]] == [
        ("price_changed", "b2"),
        ("special_started", "a1"),
    ]
    assert [e["id"] for e in body["events"]] == sorted((e["id"] for e in body["events"]), reverse=True)
    assert http("GET", api.base + f"/api/brands/{market['cafe']}/market?events=1").json()["events"][0]["type"] == (
        "price_changed"
    )


def test_the_brand_page_lists_its_first_store_products_and_says_where_the_rest_are(api, market, page, monkeypatch):
    monkeypatch.setattr(brands, "STORES_SHOWN", 2)  # read at each request; the brand has 5 store products
    page.goto(f"{api.base}/dashboard/brands/{market['cafe']}")
    assert page.locator("#stores tbody tr[data-product]").count() == 2
    note = page.locator("#stores-count")
    assert "the first 2 in store order" in note.inner_text()
    assert note.locator("a").get_attribute("href") == f"/api/brands/{market['cafe']}/stores?limit=10000"
    monkeypatch.setattr(brands, "STORES_SHOWN", 100)
    page.goto(f"{api.base}/dashboard/brands/{market['cafe']}")
    assert page.locator("#stores tbody tr[data-product]").count() == 5
    assert "the first" not in page.locator("#stores-count").inner_text()
