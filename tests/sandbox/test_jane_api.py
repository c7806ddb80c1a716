"""The Jane-like Algolia host (sandbox/jane_api.py), over real HTTP on loopback: Algolia's answers
and refusals, stores in the Dutchie sandbox's cities, the same brands on both platforms."""

from __future__ import annotations

import pytest

from sandbox.catalog import BRANDS
from sandbox.faults import OVERSIZED_BYTES
from sandbox.jane_api import API_KEY, APP_ID
from tests.httpclient import http

pytestmark = pytest.mark.integration  # spawns (tests/tiers.py)

KEYS = {"x-algolia-application-id": APP_ID, "x-algolia-api-key": API_KEY}


def query(sandbox, index: str, params: dict, headers: dict = KEYS):
    return http("POST", f"{sandbox.urls.jane}/1/indexes/{index}/query", params, headers)


def test_a_menu_pages_as_algolia_does(sandbox):
    store = sandbox.call("GET", "/_sandbox/jane/stores?state=AZ")[0]
    params = {"query": "", "filters": f"store_id = {store['id']}", "hitsPerPage": 100, "page": 1}
    answer = query(sandbox, "menu-products-production", params).json()
    menu = sandbox.call("GET", f"/_sandbox/jane/menu/{store['id']}")["product_ids"]
    assert (answer["nbHits"], answer["nbPages"], answer["page"]) == (len(menu), -(-len(menu) // 100), 1)
    assert [str(h["product_id"]) for h in answer["hits"]] == menu[100:200]
    assert {h["store_id"] for h in answer["hits"]} == {store["id"]}


def test_a_bad_key_and_an_oversized_page_are_refused(sandbox):
    params = {"filters": "store_id = 4000", "hitsPerPage": 10}
    bad = query(sandbox, "menu-products-production", params, {**KEYS, "x-algolia-api-key": "nope"})
    assert bad.status == 403 and "Invalid Application-ID or API key" in bad.text
    big = query(sandbox, "menu-products-production", {**params, "hitsPerPage": 1001})
    assert big.status == 400


def test_stores_are_found_around_a_point_in_the_dutchie_sandboxs_cities(sandbox):
    jane_stores = sandbox.call("GET", "/_sandbox/jane/stores?state=AZ")
    dutchie_cities = {s["city"] for s in sandbox.stores("AZ")}
    assert jane_stores and {s["city"] for s in jane_stores} <= dutchie_cities
    first = jane_stores[0]
    point = f"{first['_geoloc']['lat']},{first['_geoloc']['lng']}"
    near = query(sandbox, "stores-production", {"aroundLatLng": point, "aroundRadius": 1000}).json()
    assert first["id"] in {h["id"] for h in near["hits"]}
    far = query(sandbox, "stores-production", {"aroundLatLng": "0,0", "aroundRadius": 1000}).json()
    assert far["hits"] == [] and far["nbHits"] == 0


def test_both_platforms_sell_the_same_brands(sandbox):
    store = sandbox.call("GET", "/_sandbox/jane/stores?state=AZ")[0]
    hits = query(sandbox, "menu-products-production", {"filters": f"store_id = {store['id']}", "hitsPerPage": 1000})
    brands = {h["brand"] for h in hits.json()["hits"]}
    assert len(brands & set(BRANDS)) >= 10  # the catalog's library: Dutchie's stores sell them too


def test_faults_fire_for_their_store_and_page_only(sandbox):
    store = sandbox.call("GET", "/_sandbox/jane/stores?state=AZ")[0]
    sandbox.call("POST", "/_sandbox/jane/faults", {"rules": [{"kind": "total_changed", "store": str(store["id"])}]})
    params = {"filters": f"store_id = {store['id']}", "hitsPerPage": 50}
    first = query(sandbox, "menu-products-production", {**params, "page": 0}).json()["nbHits"]
    second = query(sandbox, "menu-products-production", {**params, "page": 1}).json()["nbHits"]
    assert second == first + 7
    sandbox.call("POST", "/_sandbox/jane/faults", {"rules": [{"kind": "error500", "pages": [2]}]})
    assert query(sandbox, "menu-products-production", {**params, "page": 2}).status == 500
    assert query(sandbox, "menu-products-production", {**params, "page": 1}).status == 200
    sandbox.reset()  # the sandbox's reset clears Jane's faults too
    assert sandbox.call("GET", "/_sandbox/jane/state")["faults"] == []


def test_a_page_of_50_mb_one_cut_in_half_and_a_hit_without_its_id(sandbox):
    store = sandbox.call("GET", "/_sandbox/jane/stores?state=AZ")[0]
    params = {"filters": f"store_id = {store['id']}", "hitsPerPage": 20, "page": 0}
    good = query(sandbox, "menu-products-production", params).json()["hits"]
    for kind in ("oversized", "oversized_cut", "no_id"):
        sandbox.call("POST", "/_sandbox/jane/faults", {"rules": [{"kind": kind, "store": str(store["id"])}]})
        answer = query(sandbox, "menu-products-production", params)
        if kind == "oversized":
            assert len(answer.body) > OVERSIZED_BYTES
            hits = answer.json()["hits"]
            assert [h["product_id"] for h in hits] == [h["product_id"] for h in good]
            assert len(hits[0]["description"]) == OVERSIZED_BYTES
        elif kind == "oversized_cut":
            assert OVERSIZED_BYTES // 2 < len(answer.body) < OVERSIZED_BYTES
            with pytest.raises(ValueError):
                answer.json()
        else:
            hits = answer.json()["hits"]
            assert "product_id" not in hits[0] and [h["product_id"] for h in hits[1:]] == [
                h["product_id"] for h in good[1:]
            ]
