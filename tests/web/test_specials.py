"""GET /api/specials and the specials page (docs/analytics.md, "Specials") over a seeded market
(tests/web/analyst_market.py): the deals running now by store, what they cover and since when, the
list against the discounted price per category, checked against SQL; the page in real headless
Chromium; bad filters are a 422 with the reason."""

from __future__ import annotations

import pytest

from tests.httpclient import http
from tests.web import analyst_market
from tests.web.test_dashboard import browser, shot  # noqa: F401 - fixtures

pytestmark = pytest.mark.integration  # spawns (tests/tiers.py)

market, page = analyst_market.market, analyst_market.page  # the seeded market; a phone-sized page

# every product on special now, as SQL says: in stock, menu not empty
RUNNING = """
SELECT sp.id FROM store_products sp JOIN dispensaries d ON d.id = sp.dispensary_id
 WHERE sp.is_on_special AND sp.stock_status = 'in_stock' AND d.menu_empty_since IS NULL
"""


def test_the_deals_running_now_by_store_with_their_products_and_start(api, market, sql):
    body = http("GET", api.base + "/api/specials").json()
    running = sql(RUNNING)
    assert body["products"] == len(running) == 6 and body["stores"] == 3
    deals = {(d["store"], d["name"]): d for d in body["deals"]}
    assert set(deals) == {
        ("Aloe Dispensary", "20% off Flower"),
        ("Aloe Dispensary", "Buy 2 get 1"),
        ("Aloe Dispensary", None),  # a5: a special price, no deal named
        ("Bloom", "20% off Flower"),
        ("Nevada Buds", "20% off Flower"),
    }
    sale = deals[("Aloe Dispensary", "20% off Flower")]
    assert (sale["type"], sale["discount"], sale["percent_discount"], sale["products"]) == ("sale", 20.0, True, 2)
    assert [p["provider_product_id"] for p in sale["covers"]] == ["a1", "a2"]
    assert [(p["price_rec"], p["price_rec_special"]) for p in sale["covers"]] == [(35.0, 28.0), (12.0, 9.6)]
    assert sale["brand_ids"] == [market["cafe"]] and sale["brand_names"] == ["Café Nuit"]
    # a2 has been on special since it was first seen, before a1's special started: the deal's start
    assert sale["since"].startswith("2026-11-01T08:00:00")
    bogo = deals[("Aloe Dispensary", "Buy 2 get 1")]
    assert (bogo["type"], bogo["required_quantity"], bogo["products"]) == ("bogo", 2, 2)
    assert sorted(bogo["brand_names"]) == ["Abundant Organics", "Café Nuit"]
    # the empty menu's deal is not running
    assert all(d["store"] != "Empty Menu" for d in body["deals"])


def test_list_against_discounted_price_per_category_is_the_sql_median(api, market, sql):
    body = http("GET", api.base + "/api/specials?state=az").json()
    expected = sql(
        "SELECT coalesce(sp.category, ''), count(*), percentile_cont(0.5) WITHIN GROUP (ORDER BY sp.price_rec), "
        "percentile_cont(0.5) WITHIN GROUP (ORDER BY sp.price_rec_special) "
        f"FROM store_products sp WHERE sp.id IN ({RUNNING}) "
        "AND sp.dispensary_id IN (SELECT id FROM dispensaries WHERE state = 'AZ') GROUP BY 1 ORDER BY 1"
    )
    got = [(c["category"], c["products"], c["list_price"], c["special_price"]) for c in body["categories"]]
    assert got == [(c, n, float(lp), float(spp)) for c, n, lp, spp in expected]
    flower = next(c for c in body["categories"] if c["category"] == "Flower")
    assert flower["unit_price_basis"] == "g" and flower["list_unit_price"] is not None
    # the market's and a state's from the view the refresh keeps; a store's from its rows, now
    assert body["categories_as_of"] is not None
    store = http("GET", api.base + f"/api/specials?store={market['a']}").json()
    assert store["categories_as_of"] is None
    assert [(c["category"], c["products"]) for c in store["categories"]] == [("Edible", 1), ("Flower", 3)]


def test_filters_by_store_brand_and_category(api, market):
    by_store = http("GET", api.base + f"/api/specials?store={market['b']}").json()
    assert [d["store"] for d in by_store["deals"]] == ["Bloom"] and by_store["products"] == 1
    by_brand = http("GET", api.base + f"/api/specials?brand={market['abundant']}").json()
    assert [(d["name"], d["products"]) for d in by_brand["deals"]] == [("Buy 2 get 1", 1)]
    by_category = http("GET", api.base + "/api/specials?category=Edible").json()
    assert by_category["products"] == 1
    assert http("GET", api.base + "/api/specials?state=NV&limit=1&covers=0").json()["deals"][0]["covers"] == []


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("state=Arizona", "state"),
        ("store=0", "store"),
        ("brand=abc", "brand"),
        ("limit=0", "limit"),
        ("category=%00", "category"),
        ("colour=red", "colour"),
    ],
)
def test_a_bad_filter_is_a_422_saying_which(api, market, query, field):
    reply = http("GET", api.base + "/api/specials?" + query)
    assert reply.status == 422, reply.text
    assert reply.json()["detail"][0]["loc"][-1] == field


def test_a_store_or_brand_that_names_nothing_is_a_404_saying_which(api, market):
    for query, detail in (("store=999999", "no store 999999"), ("brand=999999", "no canonical brand 999999")):
        reply = http("GET", api.base + "/api/specials?" + query)
        assert reply.status == 404 and reply.json()["detail"].startswith(detail), reply.text


def test_the_specials_page_shows_the_deals_and_categories_as_sql_says(api, market, page, sql):
    page.goto(api.base + "/dashboard/specials?state=AZ")
    figures = {el.get_attribute("data-k"): el.inner_text() for el in page.locator("#figures [data-k]").all()}
    ((products, stores),) = sql(
        f"SELECT count(*), count(DISTINCT sp.dispensary_id) FROM store_products sp WHERE sp.id IN ({RUNNING}) "
        "AND sp.dispensary_id IN (SELECT id FROM dispensaries WHERE state = 'AZ')"
    )
    assert (figures["products"], figures["stores"]) == (str(products), str(stores))
    rows = page.locator("#deals tbody tr[data-store]").all()
    assert len(rows) == 4
    names = [r.locator('[data-k="name"]').inner_text() for r in rows]
    assert "20% off Flower" in names and "Buy 2 get 1" in names
    ((flower_list, flower_special),) = sql(
        "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY price_rec), "
        "percentile_cont(0.5) WITHIN GROUP (ORDER BY price_rec_special) FROM store_products "
        f"WHERE id IN ({RUNNING}) AND category = 'Flower' "
        "AND dispensary_id IN (SELECT id FROM dispensaries WHERE state = 'AZ')"
    )
    flower = page.locator('#categories tr[data-category="Flower"]')
    assert flower.locator('[data-k="list_price"]').inner_text() == f"${flower_list:,.2f}"
    assert flower.locator('[data-k="special_price"]').inner_text() == f"${flower_special:,.2f}"
    shot(page, "specials")
    # a deal's products unfold without a script; a brand leads to its page
    row = page.locator("#deals tbody tr", has_text="Buy 2 get 1")
    row.locator("summary").click()
    assert "Product a3" in row.inner_text()
    row.locator("a", has_text="Abundant Organics").click()
    page.wait_for_url(f"**/dashboard/brands/{market['abundant']}")


def test_the_page_lists_its_first_deals_and_says_where_the_rest_are(api, market, page, monkeypatch):
    from cannaspider.web import specials

    running = len(http("GET", api.base + "/api/specials").json()["deals"])
    assert running > 2
    monkeypatch.setattr(specials, "DEALS_SHOWN", 2)  # read at each request
    page.goto(api.base + "/dashboard/specials")
    assert page.locator("#deals tbody tr[data-store]").count() == 2
    assert "The first 2 deals in store order" in page.locator("#deals-shown").inner_text()
    monkeypatch.setattr(specials, "DEALS_SHOWN", 50)
    page.goto(api.base + "/dashboard/specials")
    assert page.locator("#deals tbody tr[data-store]").count() == running
    assert page.locator("#deals-shown").count() == 0
