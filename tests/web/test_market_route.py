"""GET /api/market over the scripted history of tests/analytics/test_market.py, rolled by the real
analytics refresh: availability, its change, the movers and the bad input it refuses."""

from __future__ import annotations

import psycopg
import pytest

from tests.analytics.test_market import MARKET_TABLES, ROLLED_TABLES, event, refresh, script
from tests.httpclient import http

pytestmark = pytest.mark.integration  # spawns (tests/tiers.py)


@pytest.fixture
def rolled(db):
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute(f"TRUNCATE {ROLLED_TABLES}, {MARKET_TABLES}")
        ids = script(conn)
        # a broken price on day 28 (#28, 16): counted apart, neither a drop nor a mover
        event(conn, ids["run_a28"], "2026-11-29 09:00Z", ids["a"], ids["pa2"], "price_changed", "10.00", "0.01")
    refresh(db)
    return ids


def test_a_states_brand_availability_its_change_and_the_movers(api, rolled):
    body = http("GET", f"{api.base}/api/market?state=az").json()
    assert (body["state"], body["day"], body["compared_with"]) == ("AZ", "2026-11-29", "2026-11-01")
    assert (body["stores_crawled"], body["stores_crawled_then"]) == (2, 3)
    brands = {b["id"]: b for b in body["brands"]}
    x, y = brands[rolled["x"]], brands[rolled["y"]]
    # X: 1 of 2 stores now, 3 of 3 four weeks before; Y: 2 of 2, 1 of 3
    assert (x["stores"], x["availability"], x["availability_then"], x["change"]) == (1, 0.5, 1.0, -0.5)
    assert (y["stores"], y["availability"], y["availability_then"], y["change"]) == (2, 1.0, 0.3333, 0.6667)
    assert [b["id"] for b in body["brands"]] == [rolled["y"], rolled["x"]]  # most stores first
    assert [b["id"] for b in body["brand_movers"]["gains"]] == [rolled["y"]]
    assert [b["id"] for b in body["brand_movers"]["losses"]] == [rolled["x"]]
    drop, rise = body["price_movers"]["drops"], body["price_movers"]["rises"]
    assert [(m["provider_product_id"], m["price_old"], m["price_new"], m["change_pct"]) for m in drop + rise] == [
        ("pa1", 35.0, 28.0, -20.0),
        ("pa2", 10.0, 11.0, 10.0),
    ]
    assert body["events"] == {
        "listed": 1,
        "price_changed": 3,
        "price_drops": 1,
        "price_rises": 1,
        "specials_started": 1,
        "specials_ended": 0,
        "out_of_stock": 0,
        "back_in_stock": 0,
        "price_changes_implausible": 1,
    }
    flower = next(c for c in body["categories"] if c["category"] == "Flower")
    assert (flower["stores"], flower["price_per_g_median"]) == (1, 7.5714)  # its 3.5 g and 7 g SKUs
    # an earlier day, and against one day before it (no crawl then: no change)
    day0 = http("GET", f"{api.base}/api/market?state=AZ&day=2026-11-10&compare_days=1").json()
    assert (day0["day"], day0["stores_crawled_then"]) == ("2026-11-01", None)
    assert {b["id"]: b["change"] for b in day0["brands"]} == {rolled["x"]: None, rolled["y"]: None}
    tucson = http("GET", f"{api.base}/api/market?state=AZ&day=2026-11-01&city=Tucson").json()
    assert [(c["category"], c["price_per_g_median"]) for c in tucson["categories"]] == [("Flower", 30.0)]


def test_unknown_states_are_404_and_bad_input_422(api, rolled):
    assert http("GET", f"{api.base}/api/market?state=NV").status == 404
    assert http("GET", f"{api.base}/api/market?state=AZ&day=2026-10-01").status == 404  # before any roll
    for bad in (
        "",
        "state=ZZZ",
        "state=A1",
        "state=AZ&day=2026-13-01",
        "state=AZ&day=0001-01-01",
        "state=AZ&limit=0",
        "state=AZ&limit=1001",
        "state=AZ&compare_days=0",
        "state=AZ&compare_days=367",
        "state=AZ&movers=21",
        "state=AZ&city=%00",
        "state=AZ&brand=x",
    ):
        reply = http("GET", f"{api.base}/api/market?{bad}")
        assert reply.status == 422 and reply.json()["detail"], bad


def test_documented_with_its_refusals(api):
    spec = http("GET", f"{api.base}/openapi.json").json()
    route = spec["paths"]["/api/market"]["get"]
    assert {"200", "404", "422", "503"} <= set(route["responses"])
    limit = next(p for p in route["parameters"] if p["name"] == "limit")
    assert limit["schema"]["maximum"] == 1000
