"""product_discovery / product_resync against the sandbox: complete crawls, the OOS story,
and every fault that must leave a crawl incomplete without marking anything missing."""

from __future__ import annotations

import json

import psycopg
import pytest

from tests.spiders.helpers import add_store, products_of, runs_of


@pytest.fixture
def store(sandbox):
    return sandbox.stores("AZ")[0]


def test_complete_crawl_stores_every_product_and_a_snapshot_each(crawl, db, sandbox, store, sql):
    d = add_store(db, store)
    result = crawl("product_discovery", dispensary_id=d)
    assert result.returncode == 0
    on_menu = set(sandbox.menu(store["id"], 0))
    assert set(products_of(db, d)) == on_menu
    assert sql("SELECT count(*) FROM store_product_snapshots WHERE dispensary_id = %s", (d,))[0][0] == len(on_menu)
    status, error, seen, new, missed, oos, pages = runs_of(db, d)[0]
    assert (status, error, seen, new, missed, oos) == ("complete", None, len(on_menu), len(on_menu), 0, 0)
    assert pages == -(-len(on_menu) // 100)
    assert sql("SELECT last_crawl_at IS NOT NULL FROM dispensaries WHERE id = %s", (d,))[0][0]
    row = sql(
        "SELECT name_raw, price_rec, options, thc_unit FROM store_products WHERE dispensary_id = %s "
        "AND price_rec IS NOT NULL LIMIT 1",
        (d,),
    )[0]
    assert row[0] and row[1] > 0 and isinstance(row[2], list) and row[2][0]["option"]


def test_three_misses_over_four_crawls_then_back_in_stock(crawl, db, sandbox, store):
    d = add_store(db, store)
    vanishing = set(sandbox.menu(store["id"], 0)) - set(sandbox.menu(store["id"], 3))  # gone at epochs 1..3
    once = set(sandbox.menu(store["id"], 0)) - set(sandbox.menu(store["id"], 2)) - vanishing
    assert vanishing and once
    history = []
    for epoch in range(5):
        sandbox.epoch(epoch)
        assert crawl("product_resync", dispensary_id=d).returncode == 0
        history.append(products_of(db, d))
    three_miss = next(iter(vanishing))
    assert [history[e][three_miss] for e in range(5)] == [
        (0, "in_stock", True),
        (1, "in_stock", True),
        (2, "in_stock", True),
        (3, "oos", False),
        (0, "in_stock", True),
    ]
    runs = runs_of(db, d)
    assert [r[0] for r in runs] == ["complete"] * 5
    assert runs[3][5] == len(vanishing)  # marked oos on the fourth crawl
    assert all(history[4][p][0] == 0 for p in once)  # products missing once came back, counters reset
    new = set(sandbox.menu(store["id"], 2)) - set(sandbox.menu(store["id"], 0))
    assert new and new <= set(history[2])  # new products were picked up


@pytest.mark.parametrize(
    "fault, log_fragment",
    [
        ({"kind": "malformed", "pages": [1]}, "malformed: body is not valid JSON"),
        ({"kind": "truncated", "pages": [1]}, "malformed: body is not valid JSON"),
        ({"kind": "graphql_errors", "pages": [1]}, "graphql_errors: Internal server error"),
        ({"kind": "block403", "pages": [1]}, "blocked: HTTP 403 Cloudflare block page"),
        ({"kind": "challenge503", "pages": [1]}, "challenge: HTTP 503 Cloudflare challenge page"),
        ({"kind": "error500", "pages": [1]}, "request failed: HttpError"),
        ({"kind": "lying_total", "factor": 2}, "of totalCount"),
        ({"kind": "duplicates"}, "of totalCount"),
        ({"kind": "endless"}, "repeated only products already seen"),
    ],
)
def test_faults_leave_the_crawl_incomplete_and_mark_nothing_missing(
    crawl, db, sandbox, store, sql, fault, log_fragment
):
    d = add_store(db, store)
    assert crawl("product_resync", dispensary_id=d).returncode == 0  # epoch 0, complete
    before = products_of(db, d)
    last_crawl = sql("SELECT last_crawl_at FROM dispensaries WHERE id = %s", (d,))[0][0]
    sandbox.epoch(3)  # products vanish: only a complete crawl may count them missing
    sandbox.faults({**fault, "store": store["id"]})
    result = crawl("product_resync", dispensary_id=d)
    assert result.returncode == 0
    assert log_fragment in result.stderr
    assert "crawl incomplete, no product will be marked missing" in result.stderr
    after = products_of(db, d)
    assert set(after) >= set(before)  # nothing lost
    assert all(after[p][0] == 0 and after[p][1] == "in_stock" for p in before)  # nothing marked missing
    status, error, *_ = runs_of(db, d)[-1]
    assert status == "incomplete" and error
    assert sql("SELECT last_crawl_at FROM dispensaries WHERE id = %s", (d,))[0][0] == last_crawl


def test_products_from_pages_before_a_failure_are_still_stored(crawl, db, sandbox, store):
    d = add_store(db, store)
    sandbox.faults({"kind": "block403", "store": store["id"], "pages": [1]})
    crawl("product_discovery", dispensary_id=d)
    first_page = sandbox.menu(store["id"], 0)[:100]
    assert set(first_page) <= set(products_of(db, d))
    assert runs_of(db, d)[0][0] == "incomplete"


def test_stale_persisted_hash_falls_back_to_full_query_with_a_warning(crawl, db, sandbox, store):
    d = add_store(db, store)
    sandbox.call("POST", "/_sandbox/hashes", {"FilteredProducts": "1" * 64})
    result = crawl("product_resync", dispensary_id=d)
    assert "persisted-query hash for FilteredProducts is stale" in result.stderr
    assert result.stderr.count("is stale") == 1  # warned once, then full query for the other pages
    assert runs_of(db, d)[0][0] == "complete"
    assert set(products_of(db, d)) == set(sandbox.menu(store["id"], 0))


def test_bad_products_are_skipped_with_a_warning_and_the_page_goes_on(crawl, db, sandbox, store, scrapy_env, tmp_path):
    # a store whose payload contains unusable products: we point the spider at a canned page via a
    # tiny GraphQL stand-in built on the sandbox's own products
    from aiohttp import web

    from cannaspider.sandbox.catalog import _product
    from tests.servers import serve_app

    good = [_product(42, "x", i, 0, "http://127.0.0.1:1") for i in range(5)]
    bad = [
        {"_id": None, "Name": "no id"},
        {"_id": "a" * 24, "Name": None},
        "garbage",
        {**good[0], "_id": "b" * 24, "Name": "<i>Html</i> &amp; name", "Prices": "x", "THCContent": 7},
    ]

    async def handler(request):
        return web.json_response(
            {
                "data": {
                    "filteredProducts": {
                        "products": good + bad,
                        "queryInfo": {"totalCount": len(good) + len(bad), "totalPages": 1},
                    }
                }
            }
        )

    app = web.Application()
    app.router.add_get("/graphql", handler)
    with serve_app(app) as base:
        d = add_store(db, store)
        env = {**scrapy_env, "DUTCHIE_GRAPHQL_URL": base + "/graphql"}
        from tests.conftest import run_scrapy

        result = run_scrapy("crawl", "product_resync", "-a", f"dispensary_id={d}", env=env)
    assert "Traceback" not in result.stderr
    assert result.stderr.count("product skipped") == 3
    stored = products_of(db, d)
    assert set(stored) == {p["_id"] for p in good} | {"b" * 24}
    assert runs_of(db, d)[0][0] == "complete"


def test_store_without_platform_id_is_a_clear_error(crawl, db, sandbox, store):
    d = add_store(db, store, resolved=False)
    result = crawl("product_resync", dispensary_id=d)
    assert f"dispensary {d} (" in result.stderr and "run entry_point_discovery first" in result.stderr
    assert runs_of(db, d) == []


def test_missing_arguments_is_a_usage_error(scrapy_env):
    from tests.conftest import run_scrapy

    result = run_scrapy("crawl", "product_resync", env=scrapy_env)
    assert result.returncode != 0 and "product_resync needs -a dispensary_id=N" in result.stderr


def test_output_feed_with_dash_O(crawl, db, sandbox, store, tmp_path):
    d = add_store(db, store)
    out = tmp_path / "products.json"
    crawl("product_resync", "-O", str(out), dispensary_id=d)
    items = json.loads(out.read_text())
    assert len(items) == len(sandbox.menu(store["id"], 0))
    assert {"provider_product_id", "name", "price_rec", "options", "thc", "dispensary_id"} <= set(items[0])
    assert not any("seen_product_ids" in i or "raw" in i for i in items)


def test_default_feed_is_json_lines_under_a_dated_path(crawl, db, sandbox, store, scrapy_env):
    from pathlib import Path

    d = add_store(db, store)
    crawl("product_resync", dispensary_id=d)
    feeds = list(Path(scrapy_env["CANNASPIDER_FEED_DIR"]).glob("product_resync/*/*.jsonl"))
    assert len(feeds) == 1
    assert feeds[0].parent.name[:4].isdigit() and len(feeds[0].parent.name) == 10  # YYYY-MM-DD
    lines = feeds[0].read_text().splitlines()
    assert len(lines) == len(sandbox.menu(store["id"], 0))
    assert json.loads(lines[0])["provider_product_id"]


def test_crawling_a_whole_state_does_every_resolved_store(crawl, db, sandbox, sql):
    stores = sandbox.stores("NV")
    ids = [add_store(db, s) for s in stores]
    result = crawl("product_discovery", state="NV")
    assert result.returncode == 0
    statuses = sql("SELECT dispensary_id, status FROM crawl_runs ORDER BY dispensary_id")
    assert statuses == [(i, "complete") for i in ids]
    with psycopg.connect(db) as conn:
        counts = dict(conn.execute("SELECT dispensary_id, count(*) FROM store_products GROUP BY 1").fetchall())
    assert all(counts[i] == len(sandbox.menu(s["id"], 0)) for i, s in zip(ids, stores, strict=True))
