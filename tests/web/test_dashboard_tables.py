"""The dashboard's tables as an analyst uses them (issue #32, 6), in real headless Chromium over the
dashboard's seeded database (tests/web/test_dashboard.py) with a few events: every table sorts by
a column and downloads as CSV (static/tables.js), both checked against SQL; the CSV is
formula-safe; times carry their zone; a store's products say since when they are out of stock;
price events their change in percent; brand names lead to the brand page. No request leaves
127.0.0.1 (a download is a blob: URL of the page's own origin)."""

from __future__ import annotations

import csv
import io
from datetime import UTC

import pytest

from tests.httpclient import http
from tests.web.test_dashboard import browser, recording_page, seeded, service, shot  # noqa: F401 - fixtures
from tests.web.test_dashboard_market import rolled  # noqa: F401 - fixture

pytestmark = pytest.mark.integration  # spawns (tests/tiers.py)

FORMULA = '=HYPERLINK("http://x","y")'
EVENTS = """
INSERT INTO brands (id, key, name) VALUES (501, 'd:alpine', 'Alpine');
UPDATE store_products SET canonical_brand_id = 501 WHERE brand_name_raw = 'Alpine';
UPDATE store_products SET canonical_brand_id = NULL WHERE provider_product_id = 'b1';  -- a brand not matched yet
SELECT ensure_snapshot_partitions((now() - interval '40 days')::date, 3);
INSERT INTO product_events (occurred_at, crawl_run_id, dispensary_id, store_product_id, type, price_rec_old, price_rec)
SELECT now() - make_interval(hours => h), (SELECT min(id) FROM crawl_runs), 1, sp.id, t, o, p
  FROM (VALUES ('a1', 30, 'price_changed', 25.00, 20.00), ('a2', 20, 'price_changed', 16.00, 18.00),
               ('b1', 10, 'out_of_stock', NULL, 45.00)) v(pid, h, t, o, p)
  JOIN store_products sp ON sp.dispensary_id = 1 AND sp.provider_product_id = v.pid;
INSERT INTO product_event_state (store_product_id, oos_since)
SELECT id, now() - interval '10 hours' FROM store_products WHERE dispensary_id = 1 AND provider_product_id = 'b1'
    ON CONFLICT (store_product_id) DO UPDATE SET oos_since = excluded.oos_since;
"""


@pytest.fixture
def page(browser, tmp_path):  # noqa: F811 - a desktop's width: every column shown
    with recording_page(browser, tmp_path, viewport={"width": 1200, "height": 900}, accept_downloads=True) as (
        pg,
        requests,
    ):
        yield pg
    origins = [u.removeprefix("blob:") for u in requests]
    assert requests and all(u.startswith("http://127.0.0.1:") for u in origins), requests


def column(page, table: str, name: str) -> list[str]:
    """The texts of a table's column, top to bottom, as shown."""
    headers = [
        h.strip().rstrip("↕▲▼ ").strip() for h in page.locator(f"{table} tr").first.locator("th").all_inner_texts()
    ]
    i = headers.index(name)
    return [r.locator("td").nth(i).inner_text().strip() for r in page.locator(f"{table} tr:has(td)").all()]


def sort_by(page, table: str, name: str) -> None:
    page.locator(f"{table} th", has_text=name).first.click()


def download(page, table: str, prefix: str = "stores") -> list[dict[str, str]]:
    with page.expect_download() as info:
        page.locator(f'button.csv[data-table="{table}"]').click()
    got = info.value
    assert got.suggested_filename == f"{prefix}-{table}.csv"
    text = open(got.path(), encoding="utf-8-sig").read()  # (a BOM: Excel reads the file as UTF-8)
    return list(csv.DictReader(io.StringIO(text)))


def money(value) -> str:
    return "–" if value is None else f"${value:,.2f}"


def test_a_stores_tables_sort_and_download_as_sql_says(service, page, sql):  # noqa: F811
    sql(EVENTS)
    sql("UPDATE store_products SET name = %s WHERE dispensary_id = 1 AND provider_product_id = 'b2'", (FORMULA,))
    page.goto(service.base + "/dashboard/stores/1")
    shown = column(page, "#products", "product")
    names = [n for (n,) in sql("SELECT name FROM store_products WHERE dispensary_id = 1 ORDER BY name, id")]
    assert shown == names  # as served: by name

    # by price, up then down: SQL's order (ties keep the page's order)
    sort_by(page, "#products", "price")
    by_price = sql("SELECT name, price_rec::float8 FROM store_products WHERE dispensary_id = 1 ORDER BY price_rec")
    assert column(page, "#products", "product") == [n for n, _ in by_price]
    assert column(page, "#products", "price") == [money(p) for _, p in by_price]
    assert page.locator("#products th", has_text="price").first.get_attribute("aria-sort") == "ascending"
    sort_by(page, "#products", "price")
    assert column(page, "#products", "product") == [n for n, _ in reversed(by_price)]
    # a text column, the same way; then the out-of-stock column: the one date first, the empty ones last
    sort_by(page, "#products", "product")
    assert column(page, "#products", "product") == sorted(names, key=str.lower)
    sort_by(page, "#products", "out of stock since")
    ((oos_name, oos_since),) = sql(
        "SELECT sp.name, es.oos_since FROM store_products sp "
        "JOIN product_event_state es ON es.store_product_id = sp.id "
        "WHERE sp.dispensary_id = 1 AND sp.stock_status = 'oos'"
    )
    since = column(page, "#products", "out of stock since")
    assert column(page, "#products", "product")[0] == oos_name and since[1:] == ["", "", ""]
    assert since[0] == oos_since.astimezone(UTC).strftime("%b %d %H:%M UTC")  # the zone on every time
    shot(page, "store-sorted")

    # the download: the rows in the order shown, each cell as SQL has it
    rows = download(page, "products")
    want = sql(
        # the brand column shows the canonical brand's name where the product has one (analyst-brands)
        "SELECT sp.name, coalesce(b.display_name, b.name, sp.brand_name_raw), sp.category, sp.price_rec::float8, "
        "sp.stock_status, es.oos_since, sp.consecutive_misses FROM store_products sp "
        "LEFT JOIN product_event_state es ON es.store_product_id = sp.id "
        "LEFT JOIN brands b ON b.id = sp.canonical_brand_id WHERE sp.dispensary_id = 1"
    )
    by_name = {w[0]: w for w in want}
    assert [r["product"] for r in rows] == [
        n if n != FORMULA else "'" + n for n in column(page, "#products", "product")
    ]
    for row in rows:
        name, brand, category, price, stock, oos, misses = by_name[row["product"].removeprefix("'")]
        assert (row["brand"], row["category"], row["price"], row["misses"]) == (
            brand,
            category,
            money(price),
            str(misses),
        )
        assert row["out of stock since"] == (oos.astimezone(UTC).isoformat() if stock == "oos" and oos else "")
    assert list(rows[0]) == [
        "product",
        "brand",
        "category",
        "size",
        "price",
        "special",
        "unit price",
        "stock",
        "out of stock since",
        "misses",
    ]
    # a name a spreadsheet would run as a formula is text; a negative change stays a number
    assert "'" + FORMULA in [r["product"] for r in rows]

    # the events: when with its zone, the price change in percent, as SQL computes it
    events = download(page, "events")
    changes = sql(
        "SELECT e.occurred_at, sp.name, round((e.price_rec - e.price_rec_old) / e.price_rec_old * 100, 2)::text "
        "FROM product_events e JOIN store_products sp ON sp.id = e.store_product_id "
        "WHERE e.dispensary_id = 1 ORDER BY e.id DESC"
    )
    assert [(r["when"], r["product"].removeprefix("'"), r["change"]) for r in events] == [
        (at.astimezone(UTC).isoformat(), name, change or "") for at, name, change in changes
    ]
    assert "-20.00" in [r["change"] for r in events]
    shown_change = column(page, "#events", "change")
    assert "-20.0 %" in shown_change and "+12.5 %" in shown_change
    assert all(w.endswith(" UTC") for w in column(page, "#events", "when"))
    sort_by(page, "#events", "change")
    assert column(page, "#events", "change") == ["-20.0 %", "+12.5 %", ""]

    # the brand leads to the brand page (its route: another part of issue #32)
    link = page.locator('#products tr[data-product="a1"] a[href^="/dashboard/brands/"]')
    assert link.get_attribute("href") == "/dashboard/brands/501" and link.inner_text() == "Alpine"
    assert page.locator('#products tr[data-product="b1"] a[href^="/dashboard/brands/"]').count() == 0


def test_every_table_of_every_page_gets_its_tools_and_the_script_is_ours(service, page, sql):  # noqa: F811
    sql(EVENTS)
    for path, tables in (
        ("/dashboard/", 1),
        ("/dashboard/stores", 1),
        ("/dashboard/stores/1", 2),
        ("/dashboard/stores/1/products/a1", 2),
    ):
        page.goto(service.base + path)
        assert page.locator("main table").count() == tables, path
        assert page.locator("button.csv").count() == tables, path
        assert page.locator("main table th.sortable").count() == page.locator("main table th").count(), path
    reply = http("GET", service.base + "/dashboard/tables.js")
    assert reply.status == 200 and reply.headers["content-type"].startswith("text/javascript")
    # the stores list sorts by its last crawl's time, not by the words "1 h ago"
    page.goto(service.base + "/dashboard/stores")
    sort_by(page, "#stores", "last crawl")
    order = [
        n
        for (n,) in sql(
            "SELECT d.name FROM dispensaries d LEFT JOIN LATERAL (SELECT max(started_at) AS at FROM crawl_runs c "
            "WHERE c.dispensary_id = d.id) r ON true ORDER BY r.at NULLS LAST, d.name"
        )
    ]
    assert [c.split("\n")[0] for c in column(page, "#stores", "store")] == order


def test_the_market_pages_brands_sort_download_and_link_and_its_legend_in_colour(api, rolled, page, sql):  # noqa: F811
    page.goto(api.base + "/dashboard/market/az")
    day = sql("SELECT max(day) FROM market_state_daily WHERE state = 'AZ'")[0][0]
    brands = sql(
        "SELECT n.canonical_brand_id, b.name, n.stores, n.stores::float8 / n.stores_crawled "
        "FROM market_brand_daily n JOIN brands b ON b.id = n.canonical_brand_id "
        "WHERE n.state = 'AZ' AND n.day = %s",
        (day,),
    )
    served = [int(r.get_attribute("data-brand") or 0) for r in page.locator("#brands tr[data-brand]").all()]
    assert sorted(served) == sorted(b for b, _, _, _ in brands) and len(served) >= 2
    # by availability, up: SQL's figures, ties in the page's order
    sort_by(page, "#brands", "availability")
    share = {b: a for b, _, _, a in brands}
    want = sorted(served, key=lambda b: share[b])
    assert [int(r.get_attribute("data-brand") or 0) for r in page.locator("#brands tr[data-brand]").all()] == want
    rows = download(page, "brands", prefix="market")
    names = {b: n for b, n, _, _ in brands}
    assert [r["brand"] for r in rows] == [names[b] for b in want]
    assert [r["availability"] for r in rows] == [f"{100 * share[b]:.1f} %" for b in want]
    # every brand leads to its brand page, in both tables it is named in
    for link in page.locator("#brands a, #brand-movers a").all():
        brand = link.locator("xpath=ancestor::tr").get_attribute("data-brand")
        assert link.get_attribute("href") == f"/dashboard/brands/{brand}"
    # the chart's legend: each name in its series' colour, as the browser draws it
    for series in page.locator("svg.chart g.series").all():
        stroke = series.evaluate("g => getComputedStyle(g).stroke")
        legend = series.locator("text.legend")
        assert legend.evaluate("t => getComputedStyle(t).fill") == stroke
        assert series.locator("rect.swatch").evaluate("r => getComputedStyle(r).fill") == stroke
    shot(page, "market-sorted")
