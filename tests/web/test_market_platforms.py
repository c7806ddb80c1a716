"""GET /api/market and the market page across platforms (docs/analytics.md, "Across platforms"):
the Dutchie and Jane stores of a state crawled by the real crawl (the fixture of
tests/analytics/test_across_platforms.py), rolled by the real analytics refresh; each figure's
stores per platform, and the crawl runs it was made of."""

from __future__ import annotations

from urllib.parse import quote

import pytest

from tests.analytics.test_across_platforms import both_platforms  # noqa: F401 - a fixture
from tests.analytics.test_refresh import refresh
from tests.httpclient import http

pytestmark = pytest.mark.integration  # spawns (tests/tiers.py)


def test_the_market_counts_the_stores_of_both_platforms_per_platform(both_platforms, api, db, sql):  # noqa: F811
    refresh(db)
    body = http("GET", f"{api.base}/api/market?state=AZ").json()
    assert body["stores_crawled"] == 4
    assert body["stores_by_platform"] == {"dutchie": 2, "jane": 2}
    assert body["crawl_runs_by_platform"] == {"dutchie": 2, "jane": 2}  # the runs the figures are made of
    # a brand carried through both platforms counts its stores of each
    shared = [b for b in body["brands"] if len(b["stores_by_platform"]) == 2]
    assert shared
    for brand in body["brands"]:
        assert sum(brand["stores_by_platform"].values()) == brand["stores"]
        assert set(brand["stores_by_platform"]) <= {"dutchie", "jane"}
    flower = {c["category"]: c for c in body["categories"]}["Flower"]
    assert flower["stores_by_platform"] == {"dutchie": 2, "jane": 2}
    assert sum(c["stores_by_platform"].get("jane", 0) for c in body["categories"]) > 0
    # the same in the tables, and the brand's figure from the same store products
    row = sql(
        "SELECT stores, stores_by_platform FROM market_brand_daily WHERE canonical_brand_id = %s", (shared[0]["id"],)
    )
    assert row == [(shared[0]["stores"], shared[0]["stores_by_platform"])]
    page = http("GET", f"{api.base}/dashboard/market/AZ")
    assert page.status == 200 and "<bdi>dutchie</bdi> 2 · <bdi>jane</bdi> 2" in page.text


def test_a_canonical_product_lists_its_stores_of_both_platforms(both_platforms, api, db, sql):  # noqa: F811
    product = sql(
        "SELECT sp.canonical_product_id FROM store_products sp JOIN dispensaries d ON d.id = sp.dispensary_id "
        "GROUP BY 1 HAVING count(DISTINCT d.platform) = 2 ORDER BY 1 LIMIT 1"
    )[0][0]
    body = http("GET", f"{api.base}/api/products/{product}").json()
    stores = {(s["dispensary_id"], s["platform"]) for s in body["stores"]}
    assert {platform for _, platform in stores} == {"dutchie", "jane"}
    assert {d for d, _ in stores} <= set(both_platforms["dutchie"] + both_platforms["jane"])
    # its brand's stores per platform, as of the analytics refresh (market_brands_now, migration 046):
    # they add up to its stores in the state
    refresh(db)
    brand = http("GET", f"{api.base}/api/brands/{body['brand_id']}").json()
    (az,) = [s for s in brand["states"] if s["state"] == "AZ"]
    assert set(az["stores_by_platform"]) == {"dutchie", "jane"}
    assert sum(az["stores_by_platform"].values()) == az["stores"]


def test_the_brands_list_and_its_search_count_the_stores_of_both_platforms(both_platforms, api, db, sql):  # noqa: F811
    refresh(db)
    listed = http("GET", f"{api.base}/api/brands?limit=1000").json()
    shared = [b for b in listed if set(b["stores_by_platform"]) == {"dutchie", "jane"}]
    assert shared  # the sandbox's Jane stores sell brands its Dutchie stores sell
    for brand in listed:  # the last crawls are of the rolled day: they add up to the stores now
        assert sum(brand["stores_by_platform"].values()) == brand["stores"], brand
    # against the store products themselves: a brand carried through both platforms
    brand = shared[0]
    truth = sql(
        "SELECT d.platform, count(DISTINCT sp.dispensary_id) FROM store_products sp "
        "JOIN dispensaries d ON d.id = sp.dispensary_id "
        "WHERE sp.canonical_brand_id = %s AND sp.stock_status = 'in_stock' GROUP BY 1",
        (brand["id"],),
    )
    assert brand["stores_by_platform"] == dict(truth)
    # the same per state, and through the search by name
    in_az = {b["id"]: b for b in http("GET", f"{api.base}/api/brands?state=az&limit=1000").json()}
    assert in_az[brand["id"]]["stores_by_platform"] == brand["stores_by_platform"]
    found = {b["id"]: b for b in http("GET", f"{api.base}/api/brands?q={quote(brand['name'])}").json()}
    assert found[brand["id"]]["stores_by_platform"] == brand["stores_by_platform"]
    # the OpenAPI model says so
    model = http("GET", f"{api.base}/openapi.json").json()["components"]["schemas"]["BrandSummaryOut"]
    assert "stores_by_platform" in model["properties"] and "stores_by_platform" in model["required"]
