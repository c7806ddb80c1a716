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

pytestmark = pytest.mark.integration  # spawns (tests/tiers.py)

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


# --- without Chromium: only the stores that need a browser fail ---------------------------------


def test_without_chromium_only_the_website_stores_fail_each_with_the_reason(
    crawl, scrapy_env, db, sandbox, sql, tmp_path
):
    """CHROMIUM_PATH at a file that does not exist (apt locked, a non-root user): the stores whose menu is
    on their own website get the reason, the others resolve, the crawl is not stopped; each website
    store is a unit that did not complete (its request failed: retrying on a node with a browser
    can resolve it), so the crawl exits 3, as a drained task of it would fail."""
    missing = tmp_path / "no-such" / "chromium"
    scrapy_env["CHROMIUM_PATH"] = str(missing)  # the environment variable, as an operator sets it
    stores = {add_store(db, s, resolved=False): s for s in sandbox.stores("AZ")}
    sites = {d for d, s in stores.items() if "/sites/" in s["menu_url"]}
    assert sites and len(sites) < len(stores)
    result = crawl("entry_point_discovery", state="AZ")
    assert result.returncode == 3, result.stderr[-3000:]
    assert f"error: {len(sites)} unit(s) of work incomplete" in result.stderr
    for d, s in stores.items():
        pid, _slug, error, _resolved = _resolution(sql, d)
        if d in sites:
            assert (pid, error) == (None, f"Chromium not found at CHROMIUM_PATH ({missing})"), d
        else:
            assert (pid, error) == (s["id"], None), d
    assert result.stderr.count("the stores whose menu is on their own website are not rendered") == 1
    assert "ALERT" not in result.stderr and "identity generation failed" not in result.stderr


def test_without_chromium_a_drained_website_store_fails_its_task_and_the_others_chain(
    crawl, db, sandbox, sql, tmp_path
):
    import asyncio

    import psycopg

    from cannaspider.tasks import queue

    site = next(s for s in sandbox.stores("AZ") if "/sites/" in s["menu_url"])
    plain = next(s for s in sandbox.stores("AZ") if "/sites/" not in s["menu_url"])
    ids = [add_store(db, s, resolved=False) for s in (site, plain)]

    async def enqueue_all() -> list[int]:
        async with await psycopg.AsyncConnection.connect(db, autocommit=True) as conn:
            return [(await queue.enqueue(conn, "entry_point_discovery", dispensary_id=d)).task.id for d in ids]

    site_task, plain_task = asyncio.run(enqueue_all())
    missing = tmp_path / "chromium"
    result = crawl("entry_point_discovery", "-s", f"CHROMIUM_PATH={missing}")
    assert result.returncode == 3, result.stderr[-3000:]  # a task it took did not complete: the node lacks a browser
    status = dict(sql("SELECT id, status FROM worker_tasks WHERE role = 'entry_point_discovery'"))
    assert status == {site_task: "pending", plain_task: "completed"}  # the site's retries after its backoff
    [(error,)] = sql("SELECT error FROM worker_tasks WHERE id = %s", (site_task,))
    assert error.endswith(f": Chromium not found at CHROMIUM_PATH ({missing})"), error  # "attempt 1/5: …"
    assert _resolution(sql, ids[0])[2] == f"Chromium not found at CHROMIUM_PATH ({missing})"
    assert sql("SELECT dispensary_id FROM worker_tasks WHERE role = 'product_discovery'") == [(ids[1],)]


def test_without_chromium_a_page_that_bypasses_the_stealth_middleware_fails_alone_too(
    crawl, db, sandbox, sql, tmp_path
):
    """The download handler checks again before Playwright would try to launch the missing browser."""
    import json

    site = next(s for s in sandbox.stores("AZ") if "/sites/" in s["menu_url"])
    d = add_store(db, site, resolved=False)
    off = json.dumps({"cannaspider.middlewares.stealth.StealthProxyMiddleware": None})
    missing = tmp_path / "chromium"
    settings = ("-s", f"CHROMIUM_PATH={missing}", "-s", f"DOWNLOADER_MIDDLEWARES={off}")
    result = crawl("entry_point_discovery", *settings, dispensary_id=str(d))
    assert result.returncode == 3, result.stderr[-3000:]  # its one unit did not complete
    assert _resolution(sql, d)[2] == f"Chromium not found at CHROMIUM_PATH ({missing})"
