"""entry_point_discovery against the sandbox: slugs via ConsumerDispensaries, store websites
rendered with scrapy-playwright, and recorded reasons for stores that cannot be resolved."""

from __future__ import annotations

import shutil

import pytest

from cannaspider.settings import CHROMIUM_PATH
from tests.spiders.helpers import add_store

needs_chromium = pytest.mark.skipif(
    shutil.which(CHROMIUM_PATH) is None, reason=f"no Chromium at {CHROMIUM_PATH} (./dev setup installs it)"
)


def _resolution(sql, d):
    return sql(
        "SELECT platform_dispensary_id, slug, resolution_error, resolved_at IS NOT NULL "
        "FROM dispensaries WHERE id = %s",
        (d,),
    )[0]


def test_dutchie_menu_urls_resolve_through_consumer_dispensaries(crawl, db, sandbox, sql):
    stores = [s for s in sandbox.stores("AZ") if not s["menu_url"].split("/")[3] == "sites"]
    ids = {add_store(db, s, resolved=False): s for s in stores}
    assert crawl("entry_point_discovery", dispensary_id=",".join(map(str, ids))).returncode == 0
    for d, s in ids.items():
        assert _resolution(sql, d) == (s["id"], s["cName"], None, True)


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


@needs_chromium
def test_unresolvable_stores_get_a_recorded_reason(scrapy_env, db, sandbox, sql):
    from tests.conftest import run_scrapy

    store = sandbox.stores("AZ")[0]
    no_embed = add_store(db, store, resolved=False, menu_url=sandbox.urls.base + "/competitors/page-a.html")
    unknown_slug = add_store(
        db,
        {**sandbox.stores("AZ")[1], "id": None},
        resolved=False,
        menu_url=sandbox.urls.base + "/dispensary/no-such-store",
    )
    no_url = add_store(db, sandbox.stores("AZ")[2], resolved=False, menu_url="")
    import socket

    with socket.socket() as sock:  # a port nothing listens on (browsers refuse the classic port 9)
        sock.bind(("127.0.0.1", 0))
        free_port = sock.getsockname()[1]
    dead = add_store(db, sandbox.stores("AZ")[3], resolved=False, menu_url=f"http://127.0.0.1:{free_port}/site/")
    # (scrapy-playwright logs the refused navigation with its traceback: that is its warning, not a crash)
    result = run_scrapy(
        "crawl",
        "entry_point_discovery",
        "-a",
        f"dispensary_id={no_embed},{unknown_slug},{no_url},{dead}",
        env=scrapy_env,
    )
    assert result.returncode == 0 and "Error processing" not in result.stderr
    assert "no Dutchie embedded menu found" in _resolution(sql, no_embed)[2]
    assert "found no store for 'no-such-store'" in _resolution(sql, unknown_slug)[2]
    assert "no usable menu_url" in _resolution(sql, no_url)[2]
    assert "request failed" in _resolution(sql, dead)[2]
    assert all(_resolution(sql, d)[0] is None for d in (no_embed, unknown_slug, no_url, dead))


def test_a_second_row_for_the_same_store_is_reported_not_crashed(crawl, db, sandbox, sql):
    store = sandbox.stores("AZ")[0]
    first = add_store(db, store)  # already resolved
    duplicate = add_store(db, store, resolved=False)  # the same store, added again by hand
    result = crawl("entry_point_discovery", dispensary_id=str(duplicate))
    assert result.returncode == 0
    pid, _slug, error, _resolved = _resolution(sql, duplicate)
    assert pid is None and error == f"platform id {store['id']} already belongs to dispensary {first}"
