"""GET /api/events over the real database: filters, keyset pages and their cursor, every bad input
a 422 with its reason and a cursor that leads nowhere a 404 (never a 500), the route in
/openapi.json; and the events and out-of-stock intervals of the product history API."""

from __future__ import annotations

import base64
import urllib.parse

import pytest

from tests.helpers import seed_events
from tests.httpclient import http

pytestmark = pytest.mark.integration  # spawns (tests/tiers.py)

PID = "a" * 24


@pytest.fixture
def seeded(sql):
    return seed_events(sql)


def get(api, **params) -> tuple[int, dict]:
    query = urllib.parse.urlencode(params, doseq=True)
    reply = http("GET", f"{api.base}/api/events?{query}")
    return reply.status, reply.json()


def test_filters_select_the_events(api, seeded):
    status, body = get(api, state="az", since="2026-11-29")
    assert status == 200 and body["next_cursor"] is None
    assert [(e["provider_product_id"][0], e["type"]) for e in body["events"]] == [
        ("a", "price_changed"),
        ("b", "special_started"),
        ("a", "out_of_stock"),
        ("b", "special_ended"),
        ("a", "back_in_stock"),
        ("b", "price_changed"),
    ]
    _, body = get(api, brand="stiiizy", type=["price_changed", "out_of_stock"])
    assert [(e["store"], e["type"], e["price_rec_old"], e["price_rec"]) for e in body["events"]] == [
        ("Green AZ", "price_changed", 20.0, 18.0),
        ("Blue CA", "price_changed", 30.0, 33.0),
        ("Green AZ", "out_of_stock", None, 18.0),
        ("Blue CA", "out_of_stock", None, 33.0),
    ]
    _, body = get(api, dispensary_id=seeded["ca"], since="2026-11-30T00:00:00+00:00")
    assert [e["type"] for e in body["events"]] == ["out_of_stock"]
    assert body["events"][0]["state"] == "CA" and body["events"][0]["city"] == "Fresno"


def test_keyset_pages_walk_every_event_once(api, seeded):
    seen, cursor = [], None
    while True:
        params = {"limit": 4, "state": "AZ", **({"cursor": cursor} if cursor else {})}
        status, body = get(api, **params)
        assert status == 200
        seen += [e["id"] for e in body["events"]]
        cursor = body["next_cursor"]
        if cursor is None:
            break
    assert len(seen) == 8 and seen == sorted(set(seen))


def test_a_cursor_is_bound_to_its_filters_and_cannot_be_edited(api, seeded):
    _, body = get(api, limit=2, state="AZ")
    cursor = body["next_cursor"]
    status, other = get(api, limit=2, state="CA", cursor=cursor)
    assert status == 404 and "made for other filters" in other["detail"]
    after, digest = base64.urlsafe_b64decode(cursor + "==").decode().split(".")
    edited = base64.urlsafe_b64encode(f"{int(after) + 1}.{digest}".encode()).decode().rstrip("=")
    status, other = get(api, limit=2, state="AZ", cursor=edited)
    assert status == 404 and "altered" in other["detail"]


def b64(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


@pytest.mark.parametrize(
    ("cursor", "reason"),
    [
        ("0" * 200, "not a cursor"),  # schemathesis' ST202: a cursor the schema allowed, refused as malformed
        ("A", "does not decode"),  # a length base64 never has
        (b64("12.deadbeef"), "altered"),
        (b64("١٢.x"), "not a cursor"),
        (b64(f"{2**64}.x"), "not a cursor"),
    ],
)
def test_a_well_formed_cursor_that_leads_nowhere_is_a_404(api, seeded, cursor, reason):
    """A cursor of the documented form (base64url) that is no page of these filters is the
    documented 404, never a 422 for what the schema accepts, nor a 500."""
    status, body = get(api, limit=2, cursor=cursor)
    assert status == 404, body
    assert reason in body["detail"]


@pytest.mark.parametrize(
    ("params", "field", "reason"),
    [
        ({"sort": "id"}, "sort", "unknown filter"),
        ({"since": "yesterday"}, "since", "not a date"),
        ({"since": "2026-02-30"}, "since", "not a date"),
        ({"since": "2026-11-30\x00"}, "since", "not a date"),
        ({"state": "Arizona"}, "state", "two-letter"),
        ({"state": "A\x00"}, "state", "two-letter"),
        ({"brand": "Sti\x00iizy"}, "brand", "NUL"),
        ({"type": "restocked"}, "type", ""),
        ({"limit": "1001"}, "limit", ""),
        ({"limit": "9" * 40}, "limit", ""),
        ({"limit": "²"}, "limit", ""),
        ({"dispensary_id": str(2**63)}, "dispensary_id", ""),
        ({"cursor": "!!!"}, "cursor", "should match pattern"),
        ({"cursor": base64.urlsafe_b64encode(b"12.deadbeef").decode()}, "cursor", "should match pattern"),  # padded
        ({"cursor": "A" * 201}, "cursor", "at most 200 characters"),
    ],
)
def test_bad_input_is_a_422_with_its_reason(api, seeded, params, field, reason):
    status, body = get(api, **params)
    assert status == 422, body
    [error] = [e for e in body["detail"] if field in e["loc"]]
    assert reason in error["msg"]


def test_the_route_is_in_openapi(api):
    schema = http("GET", api.base + "/openapi.json").json()
    operation = schema["paths"]["/api/events"]["get"]
    assert {p["name"] for p in operation["parameters"]} == {
        "state",
        "dispensary_id",
        "brand",
        "type",
        "since",
        "cursor",
        "limit",
    }
    assert set(operation["responses"]) == {"200", "404", "422"}
    [cursor] = [p for p in operation["parameters"] if p["name"] == "cursor"]
    assert cursor["schema"]["anyOf"][0]["pattern"] == "^[A-Za-z0-9_-]+$"
    assert "EventsPage" in schema["components"]["schemas"]


def test_the_product_history_has_its_events_and_out_of_stock_intervals(api, seeded, sql):
    sql(
        "INSERT INTO product_event_state (store_product_id, oos_since) VALUES (%s, '2026-11-30T10:00:00Z')",
        (seeded["c"],),
    )
    history = http("GET", f"{api.base}/api/stores/{seeded['ca']}/products/{'c' * 24}/history").json()
    assert [e["type"] for e in history["events"]] == ["listed", "price_changed", "out_of_stock"]
    assert history["oos_intervals"] == [{"from": "2026-11-30T10:00:00Z", "until": None}]
    history = http("GET", f"{api.base}/api/stores/{seeded['az']}/products/{'a' * 24}/history").json()
    assert history["oos_intervals"] == [{"from": "2026-11-30T10:00:00Z", "until": "2026-11-30T10:00:00Z"}]
