"""store_discovery: its arguments and callback in-process, on sandbox and recorded responses, plus
an end-to-end crawl (twice: discovery, then rediscovery) into the database."""

from __future__ import annotations

import copy
import json
import logging

import pytest

from cannaspider.items import DispensaryRecord
from cannaspider.spiders.store_discovery import StoreDiscoverySpider
from tests.helpers import ROOT, fetch, make_spider, outputs, response_for, start_outputs

pytestmark = pytest.mark.integration  # spawns (tests/tiers.py)

RECORDED = json.loads((ROOT / "tests" / "fixtures" / "dutchie" / "consumer-dispensaries.real.json").read_text())


def _spider(sandbox, **args) -> StoreDiscoverySpider:
    spider = make_spider(StoreDiscoverySpider, {"DUTCHIE_GRAPHQL_URL": sandbox.urls.graphql}, **args)
    assert isinstance(spider, StoreDiscoverySpider)
    return spider


def _discover(spider: StoreDiscoverySpider) -> list:
    """Every search point of the spider, fetched from the sandbox and parsed: its items."""
    requests = start_outputs(spider)
    assert requests, "no search point"
    return [out for request in requests for out in outputs(request.callback(fetch(request)))]


# --- end to end: `scrapy crawl`, pipelines, database ---------------------------------------------


def test_discovers_every_store_of_the_state_and_rediscovery_updates(crawl, db, sandbox, sql):
    expected = {s["id"]: s for s in sandbox.stores("AZ")}
    result = crawl("store_discovery", state="AZ")
    assert result.returncode == 0
    rows = sql("SELECT platform_dispensary_id, name, slug, menu_url, state, lat, lng, timezone FROM dispensaries")
    assert {r[0] for r in rows} == set(expected)
    for pid, name, slug, menu_url, state, lat, lng, tz in rows:
        s = expected[pid]
        assert (name, slug, menu_url, state) == (s["name"], s["cName"], s["menu_url"], "AZ")
        assert (round(lat, 6), round(lng, 6)) == (s["lat"], s["lng"])
        assert tz.startswith("America/")
    locations = sql(
        "SELECT platform_dispensary_id, dispensary_id IS NOT NULL, raw->>'cName', platform FROM discovery_locations"
    )
    assert len(locations) == len(expected) and all(linked and p == "dutchie" for _, linked, _, p in locations)
    # the seed's table name reads Dutchie's rows (a view since migration 040)
    assert sql("SELECT count(*) FROM dutchie_discovery_locations")[0][0] == len(expected)

    sql("UPDATE dispensaries SET name = 'renamed by hand'")
    assert crawl("store_discovery", state="arizona").returncode == 0  # a state name works too
    assert sql("SELECT count(*) FROM dispensaries")[0][0] == len(expected)  # updated, never duplicated
    assert sql("SELECT count(*) FROM dispensaries WHERE name = 'renamed by hand'")[0][0] == 0
    assert sql("SELECT count(*) FROM discovery_locations WHERE last_seen_at > first_seen_at")[0][0] == len(expected)


# --- in-process: the spider's arguments, its requests and its callback ---------------------------


def test_unknown_state_is_a_clear_error(sandbox):
    # (`scrapy crawl` turns this into a non-zero exit with the message: Scrapy's own behaviour)
    with pytest.raises(ValueError, match="unknown US state 'XX'"):
        _spider(sandbox, state="XX")


def test_every_store_of_the_state_once_with_its_fields(sandbox):
    expected = {s["id"]: s for s in sandbox.stores("AZ")}
    items = _discover(_spider(sandbox, state="AZ"))
    assert all(isinstance(item, DispensaryRecord) for item in items)
    ids = [item.platform_dispensary_id for item in items]
    assert sorted(ids) == sorted(expected)  # every store, each once although search circles overlap
    for item in items:
        s = expected[item.platform_dispensary_id]
        assert (item.name, item.slug, item.menu_url, item.state, item.city) == (
            s["name"],
            s["cName"],
            s["menu_url"],
            "AZ",
            s["city"],
        )
        assert (item.lat, item.lng) == pytest.approx((s["lat"], s["lng"]))


def test_city_filter(sandbox):
    city = sandbox.stores("AZ")[0]["city"]
    spider = _spider(sandbox, state="AZ", city=city)
    items = _discover(spider)
    assert {item.platform_dispensary_id for item in items} == {
        s["id"] for s in sandbox.stores("AZ") if s["city"] == city
    }


def test_the_recorded_dispensary_object_becomes_a_record(sandbox):
    """The real ConsumerDispensaries object (DispensarySearch returns the same shape): coordinates
    are [lng, lat], the menu is on the store's own site, rec/med are booleans; and other states,
    objects without id or name, and stores already seen are dropped."""
    spider = _spider(sandbox, state="AZ")
    request = start_outputs(spider)[0]
    real = RECORDED["data"]["filteredDispensaries"][0]
    assert real["location"]["state"] == "ON"  # a Canadian store: not ours when we search AZ
    in_az = copy.deepcopy(real)
    in_az["location"]["state"] = "AZ"
    nameless = {**copy.deepcopy(in_az), "id": "0" * 24, "name": None}
    no_id = {**copy.deepcopy(in_az), "id": None}
    body = {"data": {"filteredDispensaries": [real, in_az, nameless, no_id, in_az]}}

    items = outputs(spider.parse_search(response_for(request, json.dumps(body))))

    assert len(items) == 1
    (record,) = items
    lng, lat = real["location"]["geometry"]["coordinates"]
    assert record.platform_dispensary_id == real["id"]
    assert (record.name, record.slug, record.timezone) == (real["name"], real["cName"], real["timezone"])
    assert (record.lat, record.lng) == (lat, lng)
    assert record.menu_url == real["embeddedMenuUrl"]
    assert (record.is_recreational, record.is_medical) == (real["recDispensary"], real["medicalDispensary"])
    assert (record.city, record.zip) == (real["location"]["city"], real["location"]["zipcode"])
    # the same store in a later search circle: already seen
    assert outputs(spider.parse_search(response_for(request, json.dumps(body)))) == []


def test_a_malformed_payload_is_logged_and_yields_nothing(sandbox, caplog):
    spider = _spider(sandbox, state="AZ")
    request = start_outputs(spider)[0]
    with caplog.at_level(logging.ERROR):
        assert outputs(spider.parse_search(response_for(request, '{"data": {"filteredDispensaries": null}}'))) == []
        assert outputs(spider.parse_search(response_for(request, '{"data": {"filteredDisp'))) == []
    assert "malformed payload (no filteredDispensaries list)" in caplog.text
    assert "failed: malformed: body is not valid JSON" in caplog.text


def test_blocked_search_points_are_logged_and_the_rest_continue(sandbox, caplog):
    sandbox.faults({"kind": "block403", "operation": "DispensarySearch", "times": 1})
    spider = _spider(sandbox, state="AZ")
    with caplog.at_level(logging.INFO):
        items = _discover(spider)
        spider.closed("finished")
    assert "failed: blocked: HTTP 403 Cloudflare block page" in caplog.text
    assert "1 search points failed" in caplog.text
    assert items  # the other search points went on
