"""The Dutchie-like GraphQL endpoint, over real HTTP on loopback."""

from __future__ import annotations

import hashlib
import io
import json
import time
from urllib.parse import urlencode

import pytest
from PIL import Image

from cannaspider.platforms.dutchie.operations import (
    DEFAULT_PERSISTED_HASHES,
    QUERIES,
    consumer_dispensaries_variables,
    dispensary_search_variables,
    products_variables,
)
from sandbox import month
from sandbox.catalog import Catalog, CatalogConfig
from tests.httpclient import http

pytestmark = pytest.mark.integration  # spawns (tests/tiers.py)

HEADERS = {"apollo-require-preflight": "true", "x-apollo-operation-name": "x"}


def get(sandbox, op, variables, *, sha=None, query=None, headers=HEADERS, path="/api-3/graphql"):
    params = {"operationName": op, "variables": json.dumps(variables)}
    if sha is not False:
        params["extensions"] = json.dumps(
            {"persistedQuery": {"version": 1, "sha256Hash": sha or DEFAULT_PERSISTED_HASHES[op]}}
        )
    if query:
        params["query"] = query
    return http("GET", f"{sandbox.urls.base}{path}?{urlencode(params)}", headers=headers)


def products(sandbox, store_id, page=0, per_page=100):
    return get(sandbox, "FilteredProducts", products_variables(store_id, page, per_page))


def test_get_and_post_return_the_same_products(sandbox):
    store = sandbox.stores("AZ")[0]
    got = products(sandbox, store["id"]).json()
    body = {
        "operationName": "FilteredProducts",
        "variables": products_variables(store["id"], 0, 100),
        "extensions": {"persistedQuery": {"version": 1, "sha256Hash": DEFAULT_PERSISTED_HASHES["FilteredProducts"]}},
    }
    posted = http("POST", sandbox.urls.base + "/graphql", body).json()
    assert got == posted
    assert len(got["data"]["filteredProducts"]["products"]) == 100


@pytest.mark.parametrize("path", ["/graphql", "/api-0/graphql", "/api-2/graphql", "/api-4/graphql"])
def test_every_endpoint_variant_serves_the_same_schema(sandbox, path):
    slug = sandbox.stores("AZ")[1]["cName"]
    reply = get(sandbox, "ConsumerDispensaries", consumer_dispensaries_variables(slug), path=path)
    assert reply.json()["data"]["filteredDispensaries"][0]["cName"] == slug


def test_stale_persisted_hash_is_http_200_with_persisted_query_not_found(sandbox):
    store = sandbox.stores("AZ")[0]
    reply = get(sandbox, "FilteredProducts", products_variables(store["id"], 0, 10), sha="0" * 64)
    assert reply.status == 200
    assert reply.json()["errors"][0]["message"] == "PersistedQueryNotFound"
    # the full query text is still accepted
    full = get(
        sandbox,
        "FilteredProducts",
        products_variables(store["id"], 0, 10),
        sha=False,
        query=QUERIES["FilteredProducts"],
    )
    assert len(full.json()["data"]["filteredProducts"]["products"]) == 10


def test_rotated_hash_makes_our_default_stale(sandbox):
    sandbox.call("POST", "/_sandbox/hashes", {"ConsumerDispensaries": hashlib.sha256(b"rotated").hexdigest()})
    slug = sandbox.stores("AZ")[0]["cName"]
    stale = get(sandbox, "ConsumerDispensaries", consumer_dispensaries_variables(slug))
    assert stale.json()["errors"][0]["extensions"]["code"] == "PERSISTED_QUERY_NOT_FOUND"
    fresh = get(
        sandbox,
        "ConsumerDispensaries",
        consumer_dispensaries_variables(slug),
        sha=hashlib.sha256(b"rotated").hexdigest(),
    )
    assert fresh.json()["data"]["filteredDispensaries"][0]["cName"] == slug


def test_apollo_csrf_rule_blocks_simple_get(sandbox):
    store = sandbox.stores("AZ")[0]
    blocked = get(sandbox, "FilteredProducts", products_variables(store["id"], 0, 5), headers={})
    assert blocked.status == 400 and "Cross-Site Request Forgery" in blocked.text
    with_ctype = get(
        sandbox, "FilteredProducts", products_variables(store["id"], 0, 5), headers={"content-type": "application/json"}
    )
    assert with_ctype.status == 200


def test_consumer_dispensaries_by_slug_and_by_id_is_shaped_like_the_real_fixture(sandbox):
    from sandbox.catalog import dispensary_template

    template_keys = set(dispensary_template())
    store = sandbox.stores("MI")[2]
    by_slug = get(sandbox, "ConsumerDispensaries", consumer_dispensaries_variables(store["cName"])).json()
    by_id = get(sandbox, "ConsumerDispensaries", consumer_dispensaries_variables(store["id"])).json()
    obj = by_slug["data"]["filteredDispensaries"][0]
    assert obj == by_id["data"]["filteredDispensaries"][0]
    assert set(obj) == template_keys and len(obj) > 100
    assert obj["id"] == store["id"] and len(obj["id"]) == 24
    assert obj["location"]["geometry"]["coordinates"] == [store["lng"], store["lat"]]  # [lng, lat]
    assert "menuTypes" not in obj and isinstance(obj["recDispensary"], bool)
    none = get(sandbox, "ConsumerDispensaries", consumer_dispensaries_variables("no-such-store")).json()
    assert none["data"]["filteredDispensaries"] == []


def test_dispensary_search_filters_by_distance_and_state(sandbox):
    az = sandbox.stores("AZ")
    anchor = az[0]
    near = get(sandbox, "DispensarySearch", dispensary_search_variables(anchor["lat"], anchor["lng"], 5, "AZ"))
    near = near.json()["data"]["filteredDispensaries"]
    assert anchor["id"] in {d["id"] for d in near}
    assert all(d["location"]["state"] == "AZ" and d["distance"] <= 5 for d in near)
    wide = get(
        sandbox, "DispensarySearch", dispensary_search_variables(anchor["lat"], anchor["lng"], 5000, "AZ")
    ).json()["data"]
    assert {d["id"] for d in wide["filteredDispensaries"]} == {s["id"] for s in az}
    other_state = get(
        sandbox, "DispensarySearch", dispensary_search_variables(anchor["lat"], anchor["lng"], 5000, "NV")
    ).json()["data"]
    assert all(d["location"]["state"] == "NV" for d in other_state["filteredDispensaries"])


def test_filtered_products_pages_are_zero_based_and_capped(sandbox):
    store = max(sandbox.stores("AZ"), key=lambda s: s["product_count"])
    pages, ids = 0, []
    while True:
        block = products(sandbox, store["id"], page=pages, per_page=500).json()["data"]["filteredProducts"]
        assert len(block["products"]) <= 100  # perPage cap
        ids += [p["_id"] for p in block["products"]]
        pages += 1
        if pages >= block["queryInfo"]["totalPages"]:
            break
    on_menu = sandbox.menu(store["id"], 0)
    assert block["queryInfo"]["totalCount"] == len(on_menu) == len(set(ids)) == len(ids)
    assert set(ids) == set(on_menu)
    assert block["queryInfo"]["totalPages"] == -(-len(on_menu) // 100)
    # the control API counts the pages asked for (tests wait on "page n asked for")
    assert [sandbox.pages_asked(n) for n in range(pages + 1)] == [1] * pages + [0]
    nothing = get(
        sandbox,
        "FilteredProducts",
        {**products_variables(store["id"], 0, 50), "productsFilter": {"dispensaryId": store["id"], "Status": None}},
    )
    assert nothing.json()["data"]["filteredProducts"]["products"] == []


def test_products_carry_the_real_payload_quirks(sandbox):
    everything = []
    for store in sandbox.stores("AZ")[:3]:
        for page in range(3):
            everything += products(sandbox, store["id"], page=page).json()["data"]["filteredProducts"]["products"]
    assert all(len(p["_id"]) == 24 for p in everything)
    assert all(isinstance(p["medicalPrices"], list) for p in everything)  # [] when empty, never null
    assert any(p["medicalPrices"] == [] for p in everything)
    options = {o for p in everything for o in p["Options"]}
    assert {"1gC", "N/A", "1/8oz", ".5g"} <= options
    units = {p["THCContent"]["unit"] for p in everything}
    assert {"PERCENTAGE", "MILLIGRAMS", "MILLIGRAMS_PER_GRAM"} <= units
    assert any(p["THCContent"]["range"] is None for p in everything)
    assert all(p["THC"] is None for p in everything)
    assert any(p["POSMetaData"] is None for p in everything) and any(p["POSMetaData"] for p in everything)
    assert {p["special"] for p in everything} == {True, None}
    assert any(p["specialData"] is None for p in everything)
    assert {"High CBD", "1 to 1", "Indica-Hybrid", "N/A"} <= {p["strainType"] for p in everything}
    assert any("effects" in p for p in everything) and any("Effects" in p for p in everything)
    assert all(p["createdAt"].isdigit() for p in everything) and all("T" in p["updatedAt"] for p in everything)
    # a UUID, not 24-hex; a few products name their brand only (the matching's name fallback)
    assert all(len(p["brandId"]) == 36 for p in everything if p["brandId"] is not None)
    assert any(p["brandId"] is None and p["brandName"] for p in everything)
    # the same product in several stores: some carry Dutchie's enterpriseProductId
    assert any(len(p["enterpriseProductId"] or "") == 24 for p in everything)
    assert any("<b>" in p["Name"] for p in everything)


def test_menus_evolve_with_the_epoch(sandbox):
    store = sandbox.stores("AZ")[0]
    menus = {e: set(sandbox.menu(store["id"], e)) for e in range(5)}
    assert menus[0] - menus[1] and menus[0] - menus[3]  # products vanish
    assert (menus[0] - menus[3]) & menus[4]  # and come back
    assert menus[2] - menus[0]  # new products appear
    prices = {}
    for epoch in (0, 1):
        sandbox.epoch(epoch)
        block = products(sandbox, store["id"]).json()["data"]["filteredProducts"]["products"]
        prices[epoch] = {p["_id"]: (p["recPrices"], p["special"]) for p in block}
    common = prices[0].keys() & prices[1].keys()
    assert any(prices[0][k] != prices[1][k] for k in common)  # prices and specials change


def test_product_images_are_real_png_files(sandbox):
    store = sandbox.stores("AZ")[0]
    block = products(sandbox, store["id"]).json()["data"]["filteredProducts"]["products"]
    url = next(p["Image"] for p in block if p["Image"])
    reply = http("GET", url)
    assert reply.status == 200 and reply.headers["Content-Type"] == "image/png"
    image = Image.open(io.BytesIO(reply.body))
    assert image.format == "PNG" and image.size == (320, 320)


# --- fault switches ------------------------------------------------------------------------


def test_block403_serves_the_cloudflare_block_page(sandbox):
    store = sandbox.stores("AZ")[0]
    sandbox.faults({"kind": "block403", "store": store["cName"]})
    reply = products(sandbox, store["id"])
    assert reply.status == 403 and "Sorry, you have been blocked" in reply.text
    other = products(sandbox, sandbox.stores("AZ")[1]["id"])
    assert other.status == 200  # per store


def test_challenge503_is_a_just_a_moment_page(sandbox):
    sandbox.faults({"kind": "challenge503"})
    reply = products(sandbox, sandbox.stores("AZ")[0]["id"])
    assert reply.status == 503 and "Just a moment..." in reply.text


def test_error500_and_times_limit(sandbox):
    sandbox.faults({"kind": "error500", "times": 1})
    store = sandbox.stores("AZ")[0]["id"]
    assert products(sandbox, store).status == 500
    assert products(sandbox, store).status == 200


def test_rate_switch_fires_on_a_fraction_of_requests(sandbox):
    sandbox.faults({"kind": "error500", "rate": 0.5})
    store = sandbox.stores("AZ")[0]["id"]
    statuses = [products(sandbox, store, per_page=5).status for _ in range(60)]
    assert 10 < statuses.count(500) < 50 and statuses.count(200) > 10


def test_slow_responses(sandbox):
    sandbox.faults({"kind": "slow", "delay": 1.0})
    started = time.monotonic()
    assert products(sandbox, sandbox.stores("AZ")[0]["id"], per_page=5).status == 200
    assert time.monotonic() - started >= 1.0


@pytest.mark.parametrize("kind", ["malformed", "truncated"])
def test_malformed_and_truncated_json(sandbox, kind):
    sandbox.faults({"kind": kind, "pages": [1]})
    store = sandbox.stores("AZ")[0]["id"]
    assert products(sandbox, store, page=0).json()
    broken = products(sandbox, store, page=1)
    assert broken.status == 200
    with pytest.raises(ValueError):
        json.loads(broken.body)


def test_graphql_errors_arrive_with_http_200(sandbox):
    sandbox.faults({"kind": "graphql_errors", "operation": "FilteredProducts"})
    reply = products(sandbox, sandbox.stores("AZ")[0]["id"])
    assert reply.status == 200 and reply.json()["errors"] and reply.json()["data"] is None
    slug = sandbox.stores("AZ")[0]["cName"]
    assert get(sandbox, "ConsumerDispensaries", consumer_dispensaries_variables(slug)).json()["data"]


def test_lying_total_endless_and_duplicates(sandbox):
    store = sandbox.stores("AZ")[0]
    sandbox.faults({"kind": "lying_total", "factor": 3})
    info = products(sandbox, store["id"]).json()["data"]["filteredProducts"]["queryInfo"]
    assert info["totalCount"] == 3 * len(sandbox.menu(store["id"], 0))
    sandbox.faults({"kind": "endless"})
    far = products(sandbox, store["id"], page=500).json()["data"]["filteredProducts"]
    assert len(far["products"]) == 100 and far["queryInfo"]["totalPages"] > 10_000
    sandbox.faults({"kind": "duplicates"})
    p0 = [p["_id"] for p in products(sandbox, store["id"], page=0).json()["data"]["filteredProducts"]["products"]]
    p1 = [p["_id"] for p in products(sandbox, store["id"], page=1).json()["data"]["filteredProducts"]["products"]]
    assert set(p0) & set(p1)


def test_an_empty_menu_is_well_formed_and_only_for_the_stores_it_names(sandbox):
    dark, other = sandbox.stores("AZ")[:2]
    sandbox.faults({"kind": "empty_menu", "store": dark["id"]})
    reply = products(sandbox, dark["id"])
    assert reply.status == 200
    assert reply.json()["data"]["filteredProducts"] == {
        "products": [],
        "queryInfo": {"totalCount": 0, "totalPages": 0},
    }
    assert products(sandbox, other["id"]).json()["data"]["filteredProducts"]["products"]


def test_unknown_fault_kind_is_rejected(sandbox):
    reply = http("POST", sandbox.urls.base + "/_sandbox/faults", {"rules": [{"kind": "meteor"}]})
    assert reply.status == 400 and "unknown fault kind" in reply.json()["error"]


def test_the_demo_month_moves_menus_day_by_day(sandbox):
    # POST /_sandbox/day puts both platforms on a day of the month (sandbox/month.py); the menus
    # themselves: the day's epoch (GET /_sandbox/menu/{store}?epoch=)
    assert sandbox.call("POST", "/_sandbox/day", {"day": 3}) == {"day": 3, "epoch": month.epoch_of(3)}
    assert sandbox.call("GET", "/_sandbox/state")["day"] == 3
    assert sandbox.call("GET", "/_sandbox/jane/state")["epoch"] == month.epoch_of(3)
    reply = http("POST", f"{sandbox.urls.base}/_sandbox/day", {"day": 31})
    assert reply.status == 400 and b"day must be 1 to 30" in reply.body
    az = sandbox.stores("AZ")
    menus = {s["id"]: [set(sandbox.menu(s["id"], month.epoch_of(d))) for d in range(1, month.DAYS + 1)] for s in az[:4]}
    collapsing = menus[az[month.COLLAPSING_STORE]["id"]]
    before, during, after = (
        collapsing[d - 1] for d in (month.COLLAPSE_DAYS[0] - 1, month.COLLAPSE_DAYS[0], month.COLLAPSE_DAYS[-1] + 1)
    )
    assert len(during) < len(before) / 2 and during <= before and after >= during and len(after) > len(before) / 2
    for days in menus.values():
        gone = [days[d - 1] - days[d] for d in range(1, month.DAYS)]
        back = [days[d] - days[d - 1] for d in range(1, month.DAYS)]
        assert sum(map(len, gone)) and sum(map(len, back))  # products leave and return
    sandbox.call("POST", "/_sandbox/day", {"day": 1})
    first = {p["_id"]: p for p in products(sandbox, az[0]["id"]).json()["data"]["filteredProducts"]["products"]}
    sandbox.call("POST", "/_sandbox/day", {"day": month.DAYS})
    last = {p["_id"]: p for p in products(sandbox, az[0]["id"]).json()["data"]["filteredProducts"]["products"]}
    common = first.keys() & last.keys()
    assert any(first[k]["recPrices"] != last[k]["recPrices"] for k in common)  # repriced
    assert any(bool(first[k]["special"]) != bool(last[k]["special"]) for k in common)  # specials start and end
    discounts = {s["discount"] for p in last.values() if p["specialData"] for s in p["specialData"]["saleSpecials"]}
    assert discounts <= set(month.SPECIAL_DISCOUNTS) and len(discounts) > 1


def test_a_brand_spreads_and_another_retreats_over_the_month():
    catalog = Catalog(CatalogConfig(states=("AZ",), stores_per_state=8))
    stores = catalog.stores

    def carrying(brand: str, day: int) -> int:
        return sum(
            any(catalog.truth(s, i).brand == brand for i in catalog.product_indices(s, month.epoch_of(day)))
            for s in stores
        )

    assert carrying(month.SPREADING_BRAND, 1) < carrying(month.SPREADING_BRAND, month.DAYS)
    assert carrying(month.RETREATING_BRAND, 1) > carrying(month.RETREATING_BRAND, month.DAYS)
    assert month.day_of(3) is None and month.day_of(month.epoch_of(7)) == 7  # the tests' epochs keep their rules
