"""entry_point_discovery: slugs via ConsumerDispensaries, store websites (rendered with
scrapy-playwright) and recorded reasons for stores that cannot be resolved. The spider runs
in-process on sandbox responses (its start() reads the test database); two end-to-end crawls keep
the browser rendering and the database writer honest."""

from __future__ import annotations

import shutil
import socket

import pytest
import scrapy
from twisted.python.failure import Failure

from cannaspider.items import EntryPointResolution
from cannaspider.settings import CHROMIUM_PATH
from cannaspider.spiders.entry_point_discovery import EntryPointDiscoverySpider
from tests.helpers import add_store, fetch, follow, make_spider, outputs, response_for, start_outputs

needs_chromium = pytest.mark.skipif(
    shutil.which(CHROMIUM_PATH) is None, reason=f"no Chromium at {CHROMIUM_PATH} (./dev setup installs it)"
)


def _resolution(sql, d):
    return sql(
        "SELECT platform_dispensary_id, slug, resolution_error, resolved_at IS NOT NULL "
        "FROM dispensaries WHERE id = %s",
        (d,),
    )[0]


def _spider(db, sandbox, *ids: int) -> EntryPointDiscoverySpider:
    spider = make_spider(
        EntryPointDiscoverySpider,
        {"DATABASE_URL": db, "DUTCHIE_GRAPHQL_URL": sandbox.urls.graphql},
        dispensary_id=",".join(map(str, ids)),
    )
    assert isinstance(spider, EntryPointDiscoverySpider)
    return spider


def _by_store(items: list) -> dict[int, EntryPointResolution]:
    assert all(isinstance(item, EntryPointResolution) for item in items), items
    by_store = {item.dispensary_id: item for item in items}
    assert len(by_store) == len(items), "one resolution per store"
    return by_store


def _rendered(html: str, base: str, store: dict) -> str:
    """The store's page as the browser leaves it: with the element its script injects."""
    if store["menu_style"] == "website-iframe":
        embed = f'<iframe id="dutchie--embed__iframe" src="{base}/embedded-menu/{store["cName"]}"></iframe>'
        return html.replace('<div id="menu"></div>', f'<div id="menu">{embed}</div>')
    embed = f'<script id="dutchie--embed__script" src="{base}/api/v2/embedded-menu/{store["id"]}.js"></script>'
    return html.replace("</head>", f"{embed}</head>")


# --- in-process -----------------------------------------------------------------------------------


def test_dutchie_menu_urls_resolve_through_consumer_dispensaries(db, sandbox):
    stores = [s for s in sandbox.stores("AZ") if "/sites/" not in s["menu_url"]]
    assert {s["menu_style"] for s in stores} >= {"dispensary", "embedded-menu", "stores"}
    ids = {add_store(db, s, resolved=False): s for s in stores}
    spider = _spider(db, sandbox, *ids)
    requests = start_outputs(spider)
    assert all(isinstance(r, scrapy.Request) and "operationName=ConsumerDispensaries" in r.url for r in requests)
    resolved = _by_store(follow(requests))
    assert resolved == {d: EntryPointResolution(d, s["id"], s["cName"], "graphql") for d, s in ids.items()}


def test_store_websites_are_read_once_rendered(db, sandbox):
    """A script embed gives the id at once; an iframe embed gives a slug, looked up next. The
    unrendered page has neither (the embed is injected by JavaScript): hence the browser."""
    sites = {add_store(db, s, resolved=False): s for s in sandbox.stores("AZ") if "/sites/" in s["menu_url"]}
    assert {s["menu_style"] for s in sites.values()} == {"website", "website-iframe"}
    spider = _spider(db, sandbox, *sites)
    requests = start_outputs(spider)
    assert all(r.meta.get("playwright") for r in requests)

    def render(request: scrapy.Request):
        response = fetch(request)
        if request.meta.get("playwright"):
            store = sites[request.meta["dispensary_id"]]
            return response_for(request, _rendered(response.text, sandbox.urls.base, store))
        return response

    resolved = _by_store(follow(requests, render))
    for d, s in sites.items():
        method = "iframe" if s["menu_style"] == "website-iframe" else "embedded-script"
        assert (resolved[d].platform_dispensary_id, resolved[d].method) == (s["id"], method)

    unrendered = _by_store(follow(start_outputs(_spider(db, sandbox, *sites))))
    assert all(r.platform_dispensary_id is None for r in unrendered.values())
    assert all("no Dutchie embedded menu found" in r.error for r in unrendered.values())


def test_unresolvable_stores_get_a_recorded_reason(db, sandbox):
    stores = sandbox.stores("AZ")
    no_embed = add_store(db, stores[0], resolved=False, menu_url=sandbox.urls.base + "/competitors/page-a.html")
    unknown_slug = add_store(
        db, {**stores[1], "id": None}, resolved=False, menu_url=sandbox.urls.base + "/dispensary/no-such-store"
    )
    no_url = add_store(db, stores[2], resolved=False, menu_url="")
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        free_port = sock.getsockname()[1]
    dead = add_store(db, stores[3], resolved=False, menu_url=f"http://127.0.0.1:{free_port}/site/")
    spider = _spider(db, sandbox, no_embed, unknown_slug, no_url, dead)

    def download(request: scrapy.Request):
        if request.url.startswith(f"http://127.0.0.1:{free_port}/"):
            return Failure(ConnectionRefusedError(f"Connection was refused by other side: {request.url}"))
        return fetch(request)

    results = _by_store(follow(start_outputs(spider), download))

    assert set(results) == {no_embed, unknown_slug, no_url, dead}
    assert all(r.platform_dispensary_id is None and r.method == "unresolved" for r in results.values())
    assert "no Dutchie embedded menu found" in results[no_embed].error
    assert "found no store for 'no-such-store'" in results[unknown_slug].error
    assert "no usable menu_url" in results[no_url].error
    assert results[dead].error.startswith("request failed: ConnectionRefusedError")


def test_blocked_lookup_is_an_unresolved_store_not_a_crash(db, sandbox):
    store = sandbox.stores("AZ")[0]
    d = add_store(db, store, resolved=False)
    spider = _spider(db, sandbox, d)
    (request,) = start_outputs(spider)
    sandbox.faults({"kind": "block403", "operation": "ConsumerDispensaries"})
    response = fetch(request)
    assert response.status == 403 and b"Sorry, you have been blocked" in response.body
    (result,) = outputs(request.callback(response))
    assert isinstance(result, EntryPointResolution) and result.platform_dispensary_id is None
    assert result.error is not None and "ConsumerDispensaries failed: blocked" in result.error


# --- end to end: `scrapy crawl` with the browser, pipelines, database ---------------------------


@needs_chromium
def test_store_websites_are_rendered_to_find_the_injected_embed(crawl, db, sandbox, sql):
    sites = [s for s in sandbox.stores("AZ") if "/sites/" in s["menu_url"]]
    styles = {s["menu_style"] for s in sites}
    assert styles == {"website", "website-iframe"}  # a script embed and an iframe embed
    ids = {add_store(db, s, resolved=False): s for s in sites}
    result = crawl("entry_point_discovery", state="AZ")
    assert result.returncode == 0, result.stderr[-3000:]
    for d, s in ids.items():
        pid, _slug, error, resolved = _resolution(sql, d)
        assert (pid, error, resolved) == (s["id"], None, True)


def test_a_second_row_for_the_same_store_is_reported_not_crashed(crawl, db, sandbox, sql):
    store = sandbox.stores("AZ")[0]
    first = add_store(db, store)  # already resolved
    duplicate = add_store(db, store, resolved=False)  # the same store, added again by hand
    result = crawl("entry_point_discovery", dispensary_id=str(duplicate))
    assert result.returncode == 0
    pid, _slug, error, _resolved = _resolution(sql, duplicate)
    assert pid is None and error == f"platform id {store['id']} already belongs to dispensary {first}"
