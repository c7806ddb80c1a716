"""The dashboard in a real headless Chromium (Playwright) over a seeded database shaped like the
demo's (stores in AZ, products with brands and categories, a snapshot per crawl, crawl runs of
each outcome, a queued task) and a health report written by the real monitor suite. Screenshots
go to the test's tmp dir (kept by pytest: the last runs' are under /tmp/pytest-of-<user>/)."""

from __future__ import annotations

import json
import os
import re
import shutil
from contextlib import contextmanager
from pathlib import Path

import pytest

from cannaspider import settings as defaults
from tests.httpclient import http
from tests.monitors.conftest import run_health
from tests.web.conftest import Service

pytestmark = pytest.mark.integration  # spawns (tests/tiers.py)

playwright_api = pytest.importorskip("playwright.sync_api")
CHROMIUM = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")
SNAPSHOTS = 5  # crawls of the seeded history

SEED = """
INSERT INTO dispensaries (id, name, city, state, platform_dispensary_id, last_crawl_at) VALUES
  (1, 'Desert Bloom', 'Phoenix', 'AZ', 'p-1', now() - interval '1 hour'),
  (2, 'Mesa Greens', 'Mesa', 'AZ', 'p-2', now() - interval '2 hours'),
  (3, 'Lost Store', 'Tucson', 'AZ', NULL, NULL);
UPDATE dispensaries SET resolution_error = 'no Dutchie embed on the store''s website' WHERE id = 3;
SELECT setval('dispensaries_id_seq', 3);
INSERT INTO crawl_runs (dispensary_id, role, status, started_at, finished_at, products_seen, error) VALUES
  (1, 'product_resync', 'complete', now() - interval '70 minutes', now() - interval '69 minutes', 4, NULL),
  (2, 'product_resync', 'incomplete', now() - interval '2 hours', now() - interval '2 hours', 1,
   'page 2 of 3 failed: HTTP 503');
INSERT INTO store_products (dispensary_id, provider_product_id, name_raw, name, brand_name_raw, category,
                            price_rec, price_rec_special, is_on_special, stock_status, is_in_stock,
                            quantity_available, consecutive_misses) VALUES
  (1, 'a1', 'Gelato 1g', 'Gelato 1g', 'Alpine', 'Flower', 25, 20, true, 'in_stock', true, 7, 0),
  (1, 'a2', 'Mints 10pk', 'Mints 10pk', 'ALPINE', 'Edible', 18, NULL, false, 'in_stock', true, 3, 1),
  (1, 'b1', 'Live Resin', 'Live Resin', 'Boulder', 'Concentrate', 45, NULL, false, 'oos', false, 0, 3),
  (1, 'b2', 'Pre-roll', 'Pre-roll', 'Boulder', 'Flower', 10, NULL, false, 'in_stock', true, 20, 0),
  (2, 'c1', 'Gummies', 'Gummies', 'Cactus', 'Edible', 15, NULL, false, 'in_stock', true, 9, 0);
-- canonical brands: 'ALPINE' (a2) is another spelling of Alpine, one filter choice with it
INSERT INTO brands (id, key, provider_brand_id, name, normalized_name, canonical_brand_id) VALUES
  (1, 'n:alpine', NULL, 'Alpine', 'alpine', NULL), (2, 'n:boulder', NULL, 'Boulder', 'boulder', NULL),
  (3, 'n:cactus', NULL, 'Cactus', 'cactus', NULL), (4, 'd:alp', 'alp', 'ALPINE', 'alpine', 1);
UPDATE store_products SET canonical_brand_id = CASE WHEN brand_name_raw ILIKE 'alpine' THEN 1
                                                    WHEN brand_name_raw = 'Boulder' THEN 2 ELSE 3 END,
                          unit_price = CASE provider_product_id WHEN 'a1' THEN 25 WHEN 'b2' THEN 10 ELSE price_rec END,
                          unit_price_basis = CASE WHEN category = 'Flower' THEN 'g' ELSE 'unit' END;
INSERT INTO product_snapshots (store_product_id, crawl_run_id, captured_at, price_rec, price_rec_special,
                               is_on_special, is_in_stock, quantity_available)
SELECT sp.id, g, now() - make_interval(hours => 4 * (5 - g)), 30 - g, CASE WHEN g >= 4 THEN 20 END, g >= 4,
       g <> 2, g
  FROM generate_series(1, 5) g, store_products sp
 WHERE sp.dispensary_id = 1 AND sp.provider_product_id = 'a1';
INSERT INTO worker_tasks (role, dispensary_id, status) VALUES ('product_resync', 2, 'pending');
"""


@pytest.fixture
def seeded(db, sql, tmp_path):
    sql(SEED)
    reports = tmp_path / "reports-root"
    # a real health report: the suite over a crawl that fell back to full queries 3 times
    run_health({"cannaspider/stale_hash_fallbacks": 3, "cannaspider/graphql_failure/blocked": 2}, reports, db)
    return reports / "reports"


@pytest.fixture
def service(db, seeded):
    from cannaspider.web.app import create_app

    svc = Service(db, None)
    # the reports are the rows the health run stored (crawl_health_reports), not its local files
    svc.server.config.app = create_app(db, None, pool_max_size=defaults.DB_POOL_MAX_SIZE)
    with svc:
        yield svc


@pytest.fixture(scope="module")
def browser():
    with playwright_api.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM if shutil.which(CHROMIUM) else None, headless=True)
        yield chromium
        chromium.close()


@contextmanager
def recording_page(browser, tmp_path, **context_options):
    """A page in a context of its own, recording every URL it requests; screenshots go to tmp_path."""
    context = browser.new_context(**context_options)
    requests: list[str] = []
    pg = context.new_page()
    pg.on("request", lambda r: requests.append(r.url))
    pg.shots = tmp_path / "screenshots"  # type: ignore[attr-defined]
    pg.shots.mkdir()  # type: ignore[attr-defined]
    try:
        yield pg, requests
    finally:
        context.close()


@pytest.fixture
def page(browser, tmp_path):
    with recording_page(browser, tmp_path, viewport={"width": 390, "height": 844}, device_scale_factor=1) as (
        pg,
        requests,
    ):  # a phone
        yield pg
    # nothing but the service itself was asked for (no CDN, no font, no script)
    assert all(u.startswith("http://127.0.0.1:") for u in requests), requests


def shot(page, name: str) -> Path:
    path = page.shots / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    assert path.stat().st_size > 1000
    return path


def test_overview_shows_the_figures(service, page):
    page.goto(service.base + "/dashboard/")
    figures = {el.get_attribute("data-k"): el.inner_text() for el in page.locator("#overview [data-k]").all()}
    assert figures == {
        "stores_crawled_24h": "2",
        "runs_complete_24h": "1",
        "runs_incomplete_24h": "1",
        "runs_failed_24h": "0",
        "products": "5",
        "in_stock": "4",
        "oos": "1",
        "blocks_24h": "2",
        "queue_pending": "1",
    }
    assert "alert" in page.locator("table").inner_text()  # the product_resync report failed a check
    shot(page, "overview")


def test_stores_list_last_crawl_status_and_error(service, page):
    page.goto(service.base + "/dashboard/stores")
    rows = {r.get_attribute("data-store"): r.inner_text() for r in page.locator("#stores tr[data-store]").all()}
    assert list(rows) == ["1", "3", "2"]  # by name
    assert "complete" in rows["1"] and "1 h ago" in rows["1"]
    assert "incomplete" in rows["2"] and "page 2 of 3 failed: HTTP 503" in rows["2"]
    assert "unresolved" in rows["3"] and "no Dutchie embed" in rows["3"]
    shot(page, "stores")
    page.click("text=Desert Bloom")
    assert page.url.endswith("/dashboard/stores/1")


def _listed(page) -> list[str]:
    return [r.get_attribute("data-product") for r in page.locator("#products tr[data-product]").all()]


def test_store_products_and_filters(service, page):
    page.goto(service.base + "/dashboard/stores/1")
    assert _listed(page) == ["a1", "b1", "a2", "b2"]  # by name: Gelato, Live Resin, Mints, Pre-roll
    row = page.locator('tr[data-product="a1"]').inner_text()
    assert "$25.00" in row and "$20.00" in row and "in stock" in row
    assert "out of stock" in page.locator('tr[data-product="b1"]').inner_text()
    shot(page, "store")
    # one choice per canonical brand: 'Alpine' and 'ALPINE' are one, its two products
    assert page.locator("select[name=brand_id] option").all_inner_texts() == [
        "all",
        "\u2068Alpine\u2069 (2)",
        "\u2068Boulder\u2069 (2)",
    ]
    page.select_option("select[name=brand_id]", "1")
    page.click("button[type=submit]")
    page.wait_for_url("**brand_id=1**")
    assert sorted(_listed(page)) == ["a1", "a2"]
    assert page.locator('tr[data-product="a1"] [data-k="unit_price"]').inner_text() == "$25.00/g"
    assert page.locator('tr[data-product="a1"] a[href="/dashboard/brands/1"]').count() == 1
    page.select_option("select[name=category]", "Flower")
    page.click("button[type=submit]")
    page.wait_for_url("**category=Flower**")
    assert _listed(page) == ["a1"]
    page.goto(service.base + "/dashboard/stores/1?stock=oos")
    assert _listed(page) == ["b1"]
    page.select_option("select[name=stock]", "missing")
    page.click("button[type=submit]")
    page.wait_for_url("**stock=missing**")
    assert _listed(page) == ["a2"]
    shot(page, "store-filtered")


def test_product_chart_has_one_point_per_snapshot(service, page):
    page.goto(service.base + "/dashboard/stores/1/products/a1")
    assert page.locator("svg.chart circle.pt").count() == SNAPSHOTS
    assert page.locator("svg.chart rect.stock").count() == SNAPSHOTS
    assert page.locator("svg.chart rect.stock.out").count() == 1
    assert page.locator("#snapshots tr").count() == SNAPSHOTS + 1
    box = page.locator("svg.chart").bounding_box()
    assert box is not None and box["width"] <= 390  # fits the phone
    shot(page, "product")


def test_health_page_shows_the_monitors_last_results(service, seeded, page):
    # the suite's own report says how many checks passed: adding a check to the suite moves both
    (written,) = (seeded / "product_resync").glob("*.json")
    statuses = [m["status"] for m in json.loads(written.read_text())["monitors"]]
    assert statuses.count("failed") == 1 and statuses.count("passed") >= 9
    page.goto(service.base + "/dashboard/health")
    report = page.locator('section[data-spider="product_resync"]')
    text = report.inner_text()
    assert "alert" in text and "3 requests fell back to the full query" in text
    assert report.locator('li.check[data-status="failed"]').count() == 1
    assert report.locator('li.check[data-status="passed"]').count() == statuses.count("passed")
    failed_check = report.locator('li.check[data-status="failed"]')
    assert "Persisted hashes" in failed_check.inner_text() and failed_check.locator(".err").is_visible()
    shot(page, "health")


def test_the_json_api_is_documented_and_matches_the_pages(service):
    paths = http("GET", service.base + "/openapi.json").json()["paths"]
    for path in (
        "/api/stores",
        "/api/stores/{store_id}/products",
        "/api/stores/{store_id}/products/{provider_product_id}/history",
        "/api/health",
    ):
        assert "get" in paths[path], path
    assert not [p for p in paths if p.startswith("/dashboard")]
    stores = http("GET", service.base + "/api/stores").json()
    assert [s["id"] for s in stores] == [1, 3, 2] and stores[2]["last_run_status"] == "incomplete"
    products = http("GET", service.base + "/api/stores/1/products?brand=Boulder&stock=in_stock").json()
    assert [p["provider_product_id"] for p in products["products"]] == ["b2"]
    assert products["brands"] == [
        {"id": 1, "name": "Alpine", "products": 2},
        {"id": 2, "name": "Boulder", "products": 2},
    ]
    # by canonical brand, whatever the spelling asked for or sent; with unit prices
    alpine = http("GET", service.base + "/api/stores/1/products?brand=alpine").json()["products"]
    assert [(p["provider_product_id"], p["brand"], p["canonical_brand_id"]) for p in alpine] == [
        ("a1", "Alpine", 1),
        ("a2", "ALPINE", 1),
    ]
    assert (alpine[0]["unit_price"], alpine[0]["unit_price_basis"]) == (25, "g")
    by_id = http("GET", service.base + "/api/stores/1/products?brand_id=1").json()["products"]
    assert by_id == alpine
    history = http("GET", service.base + "/api/stores/1/products/a1/history").json()
    assert [s["price_rec"] for s in history["snapshots"]] == [29, 28, 27, 26, 25]
    health = http("GET", service.base + "/api/health").json()
    assert health["overview"]["queue_pending"] == 1 and health["crawls"][0]["ok"] is False
    assert http("GET", service.base + "/api/stores/99/products").status == 404
    assert http("GET", service.base + "/api/stores/1/products/zz/history").status == 404
    assert http("GET", service.base + "/api/stores/1/products?stock=gone").status == 422


def test_a_store_whose_menu_is_empty_says_so_with_its_menu_events(service, sql):
    """Issue #28, 1: Mesa Greens' menu emptied (two days ago, 2 products left in stock as they were),
    returned, and emptied again an hour ago: the API gives menu_empty_since (in its documented
    schema) and the store's menu events newest first; the store page says so and lists them."""
    sql("UPDATE dispensaries SET menu_empty_since = now() - interval '1 hour' WHERE id = 2")
    for run, ago, kind, products in ((11, "2 days", "menu_emptied", 2), (12, "1 day", "menu_returned", 1)) + (
        (13, "1 hour", "menu_emptied", 1),
    ):
        sql(
            "INSERT INTO store_events (occurred_at, crawl_run_id, dispensary_id, type, products) "
            "VALUES (now() - %s::interval, %s, 2, %s, %s)",
            (ago, run, kind, products),
        )
    schema = http("GET", service.base + "/openapi.json").json()
    assert "menu_empty_since" in schema["components"]["schemas"]["StoreOut"]["required"]
    assert "get" in schema["paths"]["/api/stores/{store_id}"]
    stores = {s["id"]: s for s in http("GET", service.base + "/api/stores").json()}
    assert stores[1]["menu_empty_since"] is None and stores[2]["menu_empty_since"] is not None
    detail = http("GET", service.base + "/api/stores/2").json()
    assert detail["menu_empty_since"] == stores[2]["menu_empty_since"] and detail["name"] == "Mesa Greens"
    assert [(e["crawl_run_id"], e["type"], e["products"]) for e in detail["menu_events"]] == [
        (13, "menu_emptied", 1),
        (12, "menu_returned", 1),
        (11, "menu_emptied", 2),
    ]
    assert http("GET", service.base + "/api/stores/1").json()["menu_events"] == []
    assert http("GET", service.base + "/api/stores/99").status == 404
    page = http("GET", service.base + "/dashboard/stores/2").text
    assert 'id="menu-empty"' in page and "Menu empty since" in page
    assert re.findall(r'<tr data-type="(menu_\w+)" data-run="(\d+)"', page) == [
        ("menu_emptied", "13"),
        ("menu_returned", "12"),
        ("menu_emptied", "11"),
    ]
    assert 'id="menu-empty"' not in http("GET", service.base + "/dashboard/stores/1").text


RLO = "\u202e"  # RIGHT-TO-LEFT OVERRIDE: reverses what follows it, up to the end of its paragraph


def outside_isolation(html: str) -> str:
    """The page's shown text outside its isolated runs (<bdi> elements, FSI … PDI; attribute values
    are not shown)."""
    html = re.sub(r'="[^"]*"', "", html)
    return re.sub("\u2068[^\u2069]*\u2069", "", re.sub(r"<bdi>[^<]*</bdi>", "", html))


def test_names_with_a_right_to_left_override_are_isolated(service, sql):
    sql(
        "INSERT INTO dispensaries (id, name, city, state, platform_dispensary_id) VALUES (4, %s, %s, 'AZ', 'p-4')",
        (f"{RLO}Evil Store", f"{RLO}Town"),
    )
    sql("INSERT INTO brands (id, key, name, normalized_name) VALUES (5, 'n:brand', %s, 'brand')", (f"{RLO}Brand",))
    sql(
        "INSERT INTO store_products (dispensary_id, provider_product_id, name_raw, name, brand_name_raw, category, "
        "price_rec, stock_status, is_in_stock, canonical_brand_id) VALUES (4, 'e1', %s, %s, %s, %s, 10, 'in_stock', "
        "true, 5)",
        (f"{RLO}gpj.exe", f"{RLO}gpj.exe", f"{RLO}Brand", f"{RLO}Flower"),
    )
    for path in ("/dashboard/stores", "/dashboard/stores/4", "/dashboard/stores/4/products/e1"):
        reply = http("GET", service.base + path)
        assert reply.status == 200, reply.text
        assert f"<bdi>{RLO}" in reply.text, path
        assert RLO not in outside_isolation(reply.text), path
    store = http("GET", service.base + "/dashboard/stores/4").text
    for name in ("Evil Store", "Town", "gpj.exe", "Brand", "Flower"):
        assert f"<bdi>{RLO}{name}</bdi>" in store
    assert f'<option value="5">\u2068{RLO}Brand\u2069 (1)</option>' in store  # the filter sends the brand's id
