"""The market pages and the product chart with its events, in real headless Chromium over the
scripted market history (tests/analytics/test_market.py) rolled by the real analytics refresh:
the numbers shown are checked against SQL, no request leaves 127.0.0.1, screenshots are kept."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import psycopg
import pytest

from tests.analytics.test_market import MARKET_TABLES, ROLLED_TABLES, refresh, script
from tests.httpclient import http
from tests.web.test_dashboard import browser, recording_page, shot  # noqa: F401 - fixtures

pytestmark = pytest.mark.integration  # spawns (tests/tiers.py)

PHONE = {"viewport": {"width": 390, "height": 844}, "device_scale_factor": 1}


@pytest.fixture
def rolled(db):
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute(f"TRUNCATE {ROLLED_TABLES}, {MARKET_TABLES}")
        ids = script(conn)
    # in a thread of its own: Playwright's sync API keeps an event loop running in this one
    with ThreadPoolExecutor(1) as pool:
        pool.submit(refresh, db).result()
    return ids


@pytest.fixture
def page(browser, tmp_path):  # noqa: F811 - a phone, like the dashboard's
    with recording_page(browser, tmp_path, **PHONE) as (pg, requests):
        yield pg
    assert requests and all(u.startswith("http://127.0.0.1:") for u in requests), requests


def test_the_market_index_lists_the_states_rolled(api, rolled, page, sql):
    page.goto(api.base + "/dashboard/market")
    states = [r.get_attribute("data-state") for r in page.locator("#states tr[data-state]").all()]
    assert states == [s for (s,) in sql("SELECT DISTINCT state FROM market_state_daily ORDER BY 1")] == ["AZ", "MI"]
    shot(page, "market-index")
    page.click("text=AZ")
    page.wait_for_url("**/dashboard/market/AZ")


def test_a_states_morning_page_shows_the_rolled_figures(api, rolled, page, sql):
    page.goto(api.base + "/dashboard/market/az")
    figures = {el.get_attribute("data-k"): el.inner_text() for el in page.locator("#figures [data-k]").all()}
    ((crawled, seen, listed, drops, rises, oos),) = sql(
        "SELECT stores_crawled, products_seen, listed, price_drops, price_rises, out_of_stock FROM market_state_daily "
        "WHERE state = 'AZ' ORDER BY day DESC LIMIT 1"
    )
    assert (figures["stores_crawled"], figures["products_seen"], figures["listed"]) == (
        str(crawled),
        str(seen),
        str(listed),
    )
    assert (figures["price_drops"], figures["price_rises"], figures["out_of_stock"]) == (
        str(drops),
        str(rises),
        str(oos),
    )
    # availability and its 4-week change, as the tables say
    expected = sql(
        "SELECT n.canonical_brand_id, round(100.0 * n.stores / n.stores_crawled, 1), "
        "       round(100.0 * (n.stores::numeric / n.stores_crawled "
        "                      - coalesce(t.stores, 0)::numeric / s.stores_crawled), 1) "
        "  FROM market_brand_daily n JOIN market_state_daily s ON s.state = n.state AND s.day = n.day - 28 "
        "  LEFT JOIN market_brand_daily t "
        "    ON t.state = n.state AND t.day = s.day AND t.canonical_brand_id = n.canonical_brand_id "
        " WHERE n.state = 'AZ' AND n.day = '2026-11-29' ORDER BY n.stores DESC"
    )
    rows = page.locator("#brands tr[data-brand]").all()
    assert [int(r.get_attribute("data-brand") or 0) for r in rows] == [b for b, _, _ in expected]
    for row, (_, availability, change) in zip(rows, expected, strict=True):
        assert row.locator('[data-k="availability"]').inner_text() == f"{availability:.1f} %"
        assert row.locator('[data-k="change"]').inner_text() == f"{change:+.1f} pt"
    movers = page.locator("#price-movers tr[data-event]").all()
    assert [m.get_attribute("data-event") for m in movers] == [
        str(e) for (e,) in sql("SELECT event_id FROM market_movers WHERE state = 'AZ' ORDER BY kind, rank")
    ]
    assert "-20.0 %" in movers[0].inner_text() and "$28.00" in movers[0].inner_text()
    flower = page.locator('#categories tr[data-category="Flower"]').inner_text()
    assert "$7.57" in flower  # pa1: 28.00 for 3.5 g ($8.00 a gram) and 50.00 for 7 g ($7.14): the median
    assert page.locator('svg.chart g.series[data-series="Flower"] circle').count() == len(
        sql("SELECT day FROM market_category_daily WHERE state = 'AZ' AND city = '' AND category = 'Flower'")
    )
    box = page.locator("svg.chart").bounding_box()
    assert box is not None and box["width"] <= 390
    shot(page, "market-az")
    page.locator("#price-movers a").first.click()
    page.wait_for_url("**/dashboard/stores/*/products/pa1")


def test_the_product_chart_marks_its_events_and_bands_its_out_of_stock(api, rolled, page, sql):
    store, product = rolled["a"], rolled["pa1"]
    sql(
        "INSERT INTO product_events (occurred_at, crawl_run_id, dispensary_id, store_product_id, type, price_rec) "
        "VALUES ('2026-11-10 08:00Z', %s, %s, %s, 'out_of_stock', 35), ('2026-11-20 08:00Z', %s, %s, %s, "
        "'back_in_stock', 35)",
        (rolled["run_a28"], store, product) * 2,
    )
    page.goto(f"{api.base}/dashboard/stores/{store}/products/pa1")
    events = sql("SELECT type FROM product_events WHERE store_product_id = %s ORDER BY id", (product,))
    assert [g.get_attribute("data-type") for g in page.locator("svg.chart g.event").all()] == [t for (t,) in events]
    assert page.locator("svg.chart rect.oos").count() == 1
    assert page.locator("svg.chart circle.pt").count() == 2
    assert page.locator("#events tr[data-type]").count() == len(events)
    shot(page, "product-events")


def test_a_store_page_lists_its_latest_events_as_sql_has_them(api, rolled, page, sql):
    store, product = rolled["a"], rolled["pa1"]
    sql(
        "INSERT INTO product_events (occurred_at, crawl_run_id, dispensary_id, store_product_id, type, price_rec_old, "
        "price_rec) VALUES ('2026-11-10 08:00Z', %s, %s, %s, 'price_changed', 40, 35), "
        "('2026-11-20 08:00Z', %s, %s, %s, 'out_of_stock', NULL, 35)",
        (rolled["run_a28"], store, product) * 2,
    )
    expected = sql(
        "SELECT e.id, e.type, coalesce(sp.name, sp.name_raw), sp.provider_product_id, e.price_rec_old, e.price_rec "
        "FROM product_events e JOIN store_products sp ON sp.id = e.store_product_id "
        "WHERE e.dispensary_id = %s ORDER BY e.id DESC LIMIT 50",
        (store,),
    )
    assert len(expected) >= 2
    assert sql("SELECT count(*) FROM product_events WHERE dispensary_id <> %s", (store,))[0][0] > 0  # not shown
    page.goto(f"{api.base}/dashboard/stores/{store}")
    rows = page.locator("#events tr[data-event]")
    assert rows.count() == len(expected)
    for row, (event_id, kind, name, provider_id, old, new) in zip(rows.all(), expected, strict=True):
        cells = [c.inner_text().strip() for c in row.locator("td").all()]
        assert (row.get_attribute("data-event"), row.get_attribute("data-type")) == (str(event_id), kind)
        assert cells[2] == name
        assert cells[3] == ("" if old is None else f"${old:,.2f}")
        assert cells[4] == f"${new:,.2f}"
        assert row.locator("a").get_attribute("href").endswith(f"/products/{provider_id}")
    assert page.locator("#events-count").inner_text().startswith(f"the latest {len(expected)}")
    shot(page, "store-events")


def test_unknown_states_are_404(api, rolled):
    assert http("GET", api.base + "/dashboard/market/NV").status == 404
    assert http("GET", api.base + "/dashboard/market/ZZZ").status == 422
    assert http("GET", api.base + "/dashboard/market/AZ?day=0001-01-01").status == 422
