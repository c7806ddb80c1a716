"""GET /api/market and the market page across platforms (docs/analytics.md, "Across platforms"):
the Dutchie and Jane stores of a state crawled by the real crawl (the fixture of
tests/analytics/test_across_platforms.py), rolled by the real analytics refresh; each figure's
stores per platform, and the crawl runs it was made of."""

from __future__ import annotations

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


def test_a_canonical_product_lists_its_stores_of_both_platforms(both_platforms, api, sql):  # noqa: F811
    product = sql(
        "SELECT sp.canonical_product_id FROM store_products sp JOIN dispensaries d ON d.id = sp.dispensary_id "
        "GROUP BY 1 HAVING count(DISTINCT d.platform) = 2 ORDER BY 1 LIMIT 1"
    )[0][0]
    body = http("GET", f"{api.base}/api/products/{product}").json()
    stores = {(s["dispensary_id"], s["platform"]) for s in body["stores"]}
    assert {platform for _, platform in stores} == {"dutchie", "jane"}
    assert {d for d, _ in stores} <= set(both_platforms["dutchie"] + both_platforms["jane"])
    # its brand's stores per platform, live: they add up to its stores in the state
    brand = http("GET", f"{api.base}/api/brands/{body['brand_id']}").json()
    (az,) = [s for s in brand["states"] if s["state"] == "AZ"]
    assert set(az["stores_by_platform"]) == {"dutchie", "jane"}
    assert sum(az["stores_by_platform"].values()) == az["stores"]
