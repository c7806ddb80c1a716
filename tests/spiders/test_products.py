"""product_discovery / product_resync: the parse logic in-process (recorded-shape pages fed to the
callback, items through the real pipelines and database), and end-to-end `scrapy crawl` runs
against the sandbox: complete crawls, the OOS story, and every fault that must leave a crawl
incomplete without marking anything missing."""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import urllib.error
import urllib.request
from urllib.parse import parse_qs, urlsplit

import psycopg
import pytest
from scrapy import Request
from scrapy.exceptions import DropItem
from scrapy.http import HtmlResponse, Response, TextResponse

from cannaspider.commands.crawl import EXIT_INCOMPLETE
from cannaspider.items import RawProduct
from cannaspider.pipelines.normalize import NormalizeProductPipeline
from cannaspider.pipelines.product_writer import ProductWriterPipeline
from cannaspider.platforms.dutchie.pagination import PageState
from cannaspider.spiders.products import ProductSpider, StoreCrawl
from cannaspider.units.crawl_close import StoreOutcome
from cannaspider.units.lifecycle import Unit
from sandbox.catalog import _product
from tests.helpers import NO_IMAGES, add_store, products_of, project_crawler, runs_of

GRAPHQL_URL = "http://127.0.0.1:1/graphql"
PLATFORM_ID = "e" * 24


def sandbox_products(n: int, start: int = 0) -> list[dict]:
    """Products shaped as the real payload (the sandbox's generator), without a server."""
    return [_product(42, "in-process", i, 0, "http://127.0.0.1:1") for i in range(start, start + n)]


def from_sandbox(request: Request) -> Response:
    """The sandbox's answer to `request` (its status, headers and body), as Scrapy would hand it over."""
    headers = {k.decode(): v[0].decode() for k, v in request.headers.items()}
    try:
        with urllib.request.urlopen(urllib.request.Request(request.url, headers=headers), timeout=30) as r:
            status, got, body = r.status, r.headers, r.read()
    except urllib.error.HTTPError as exc:
        status, got, body = exc.code, exc.headers, exc.read()
    cls = HtmlResponse if "html" in got.get("content-type", "") else TextResponse
    return cls(request.url, status=status, headers=dict(got.items()), body=body, request=request)


class InProcessCrawl:
    """A ProductSpider built with get_crawler whose pages are answered from lists of products, its
    items run through the real pipelines into the test database (no reactor, no subprocess)."""

    def __init__(self, db_url: str, **settings):
        self.crawler = project_crawler(
            ProductSpider,
            **{
                "DATABASE_URL": db_url,
                "DUTCHIE_GRAPHQL_URL": GRAPHQL_URL,
                "DUTCHIE_CLIENT_NAME": "test",
                "DUTCHIE_PER_PAGE": 100,
                "DUTCHIE_MAX_PAGES": 100,
                "OOS_GUARD_MIN_SHARE": 0.5,
                **settings,
            },
        )
        self.spider = ProductSpider.from_crawler(self.crawler, dispensary_id="1")
        self.normalize = NormalizeProductPipeline.from_crawler(self.crawler)
        self.writer = ProductWriterPipeline.from_crawler(self.crawler)
        self.completions: list[StoreOutcome] = []
        self.dropped: list[str] = []  # DropItem messages (Scrapy's log formatter would log them)
        self.requests: list[Request] = []
        self.menu: list = []
        self.total: int | None = None

    def response(self, request: Request, products: list, total: int | None) -> TextResponse:
        info = {"totalCount": total, "totalPages": -(-total // 100)} if total is not None else None
        body = {"data": {"filteredProducts": {"products": products, "queryInfo": info}}}
        return TextResponse(request.url, body=json.dumps(body).encode(), request=request)

    def answer(self, request: Request) -> Response:
        """The page `request` asks for, cut from the menu given to run() (a test may replace this)."""
        page, size = request.meta["page"], request.meta["store_crawl"].pages.per_page
        return self.response(request, self.menu[page * size : (page + 1) * size], self.total)

    async def run(
        self, dispensary_id: int, menu: list | None = None, total: int | None = None, platform_id: str = PLATFORM_ID
    ) -> None:
        """One crawl of a store whose menu is `menu` (served in pages of the size asked for)."""
        self.menu, self.total = menu or [], total
        run_id = await self.spider.store.start_run(dispensary_id, "product_resync")
        crawl = StoreCrawl(
            dispensary_id,
            platform_id,
            run_id,
            PageState(self.spider.settings.getint("DUTCHIE_PER_PAGE"), 100),
            self.spider.platform("dutchie"),
        )
        request: Request | None = self.spider._page_request(crawl, 0)
        while request is not None:
            self.requests.append(request)
            response = self.answer(request)
            request = None
            for out in self.spider.parse_products(response):
                if isinstance(out, Request):
                    request = out
                else:
                    await self.item(out)
        # nothing of the store's crawl outstanding: the lifecycle closes its unit
        unit = Unit(data={"crawl": crawl})
        assert await self.spider.unit_outcome(unit) is None  # closed by the spider's store close
        self.completions.append(unit.data["outcome"])

    async def item(self, item: RawProduct) -> None:
        try:
            result = self.writer.process_item(self.normalize.process_item(item))
            if inspect.isawaitable(result):
                await result
        except DropItem as exc:
            self.dropped.append(str(exc))

    async def close(self) -> None:
        await self.writer.close_spider()
        await self.spider.store.close()


@pytest.fixture
def in_process(db, monkeypatch):
    monkeypatch.setenv("DATABASE_URL", db)
    crawls: list[InProcessCrawl] = []

    def make(**settings) -> InProcessCrawl:
        crawls.append(InProcessCrawl(db, **settings))
        return crawls[-1]

    yield make


def store_row(db) -> int:
    return add_store(
        db,
        {
            "name": "In-process",
            "cName": "in-process",
            "menu_url": None,
            "state": "AZ",
            "city": "Phoenix",
            "id": PLATFORM_ID,
        },
    )


def test_a_page_of_products_without_an_id_is_an_incomplete_crawl_not_an_empty_menu(in_process, db, caplog):
    caplog.set_level(logging.WARNING)
    d = store_row(db)
    menu = sandbox_products(40)
    anonymous = [{k: v for k, v in p.items() if k not in ("_id", "id")} for p in menu]
    blank = [{**p, "_id": "  "} for p in sandbox_products(3, 100)]
    not_a_string = [{**p, "_id": 12345} for p in sandbox_products(3, 200)]

    async def scenario():
        crawl = in_process()
        await crawl.run(d, menu, total=40)
        for _ in range(3):  # the schema changed: ids are gone; three such crawls must not wipe the menu
            await crawl.run(d, anonymous + blank + not_a_string, total=46)
        await crawl.close()
        return crawl

    crawl = asyncio.run(scenario())
    assert {v for v in products_of(db, d).values()} == {(0, "in_stock", True)}
    runs = runs_of(db, d)
    assert [r[0] for r in runs] == ["complete"] + ["incomplete"] * 3
    assert all("46 product(s) had no usable id" in r[1] for r in runs[1:])
    assert crawl.crawler.stats.get_value("cannaspider/products_without_id") == 3 * 46
    assert "crawl incomplete, no product will be marked missing" in caplog.text


def test_one_product_without_an_id_among_good_ones_marks_nobody_missing(in_process, db):
    d = store_row(db)
    menu = sandbox_products(30)

    async def scenario():
        crawl = in_process()
        await crawl.run(d, menu, total=30)
        # the 30th product lost its id: it must not be counted as "seen" for anybody, nor miss
        damaged = menu[:29] + [{**menu[29], "_id": None, "id": None}]
        for _ in range(3):
            await crawl.run(d, damaged, total=30)
        await crawl.close()

    asyncio.run(scenario())
    assert products_of(db, d)[menu[29]["_id"]] == (0, "in_stock", True)
    assert [r[0] for r in runs_of(db, d)] == ["complete"] + ["incomplete"] * 3


def test_an_id_with_surrounding_whitespace_is_seen_under_its_stored_id(in_process, db):
    d = store_row(db)
    menu = sandbox_products(5)
    padded = [{**p, "_id": f"  {p['_id']}\n"} if i == 2 else p for i, p in enumerate(menu)]

    async def scenario():
        crawl = in_process()
        for _ in range(4):  # three misses would mark it oos
            await crawl.run(d, padded, total=5)
        await crawl.close()

    asyncio.run(scenario())
    stored = products_of(db, d)
    assert set(stored) == {p["_id"] for p in menu}  # stored stripped
    assert stored[menu[2]["_id"]] == (0, "in_stock", True)
    assert [r[0] for r in runs_of(db, d)] == ["complete"] * 4


def test_a_per_page_above_the_servers_cap_is_followed_without_skipping_or_repeating(in_process, db, caplog):
    caplog.set_level(logging.WARNING)
    d = store_row(db)
    menu = sandbox_products(230)

    async def scenario():
        crawl = in_process(DUTCHIE_PER_PAGE=250)
        original = crawl.response

        def capped(request, products, total):  # at most 100 a page, whatever perPage asks (as Dutchie)
            page = request.meta["page"]
            size = min(request.meta["store_crawl"].pages.per_page, 100)
            return original(request, menu[page * size : (page + 1) * size], total)

        crawl.response = capped
        await crawl.run(d, menu, total=230)
        await crawl.close()
        return crawl

    crawl = asyncio.run(scenario())
    asked = [json.loads(parse_qs(urlsplit(r.url).query)["variables"][0]) for r in crawl.requests]
    assert [(v["page"], v["perPage"]) for v in asked] == [(0, 250), (1, 100), (2, 100)]
    completion = crawl.completions[-1]
    assert completion.complete and sorted(completion.seen_product_ids) == sorted(p["_id"] for p in menu)
    assert set(products_of(db, d)) == {p["_id"] for p in menu}
    assert "the server caps perPage at 100 (DUTCHIE_PER_PAGE = 250)" in caplog.text
    assert crawl.crawler.stats.get_value("cannaspider/duplicate_products") is None


@pytest.fixture
def store(sandbox):
    return sandbox.stores("AZ")[0]


@pytest.mark.integration
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


@pytest.mark.integration
def test_three_misses_over_four_crawls_then_back_in_stock(crawl, db, sandbox, store):
    d = add_store(db, store)
    vanishing = set(sandbox.menu(store["id"], 0)) - set(sandbox.menu(store["id"], 3))  # gone at epochs 1..3
    once = set(sandbox.menu(store["id"], 0)) - set(sandbox.menu(store["id"], 2)) - vanishing
    assert vanishing and once
    history = []
    for epoch in range(5):
        sandbox.epoch(epoch)
        assert crawl("product_resync", *NO_IMAGES, dispensary_id=d).returncode == 0
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


@pytest.mark.integration
@pytest.mark.parametrize(
    "fault, reason",
    [
        ({"kind": "malformed", "pages": [1]}, "malformed: body is not valid JSON"),
        ({"kind": "truncated", "pages": [1]}, "malformed: body is not valid JSON"),
        ({"kind": "graphql_errors", "pages": [1]}, "graphql_errors: Internal server error"),
        ({"kind": "block403", "pages": [1]}, "blocked: HTTP 403 Cloudflare block page"),
        ({"kind": "challenge503", "pages": [1]}, "challenge: HTTP 503 Cloudflare challenge page"),
        ({"kind": "lying_total", "factor": 2}, "of totalCount"),
        ({"kind": "duplicates"}, "of totalCount"),
        ({"kind": "endless"}, "repeated only products already seen"),
    ],
)
def test_faults_leave_the_crawl_incomplete_and_mark_nothing_missing(in_process, db, sandbox, store, sql, fault, reason):
    # the sandbox's real answers, fed to the callback in-process (transport faults: see the
    # end-to-end test below)
    d = add_store(db, store)

    async def scenario():
        crawl = in_process(DUTCHIE_GRAPHQL_URL=sandbox.urls.graphql)
        crawl.answer = from_sandbox
        await crawl.run(d, platform_id=store["id"])  # epoch 0, complete
        before = products_of(db, d)
        last_crawl = sql("SELECT last_crawl_at FROM dispensaries WHERE id = %s", (d,))[0][0]
        sandbox.epoch(3)  # products vanish: only a complete crawl may count them missing
        sandbox.faults({**fault, "store": store["id"]})
        await crawl.run(d, platform_id=store["id"])
        await crawl.close()
        return before, last_crawl

    before, last_crawl = asyncio.run(scenario())
    after = products_of(db, d)
    assert set(after) >= set(before)  # nothing lost
    assert all(after[p][0] == 0 and after[p][1] == "in_stock" for p in before)  # nothing marked missing
    runs = runs_of(db, d)
    assert runs[0][:2] == ("complete", None)
    status, error, *_ = runs[-1]
    assert status == "incomplete" and reason in error
    assert sql("SELECT last_crawl_at FROM dispensaries WHERE id = %s", (d,))[0][0] == last_crawl


@pytest.mark.integration
def test_an_empty_menu_crawled_three_times_marks_nothing_and_a_returning_menu_ends_it(
    in_process, db, sandbox, store, sql
):
    """Issue #28, 1: the sandbox's empty menu (`products: []`, `totalCount: 0`) is a complete crawl,
    flagged empty, that counts no miss however often it comes; the store's state says since when,
    one store event says it emptied, one that it returned, and no product went out of stock."""
    d = add_store(db, store)
    on_menu = set(sandbox.menu(store["id"], 0))

    async def scenario():
        crawl = in_process(DUTCHIE_GRAPHQL_URL=sandbox.urls.graphql)
        crawl.answer = from_sandbox
        await crawl.run(d, platform_id=store["id"])  # the menu
        sandbox.faults({"kind": "empty_menu", "store": store["id"]})
        for _ in range(4):
            await crawl.run(d, platform_id=store["id"])
        empty_since = sql("SELECT menu_empty_since FROM dispensaries WHERE id = %s", (d,))[0][0]
        sandbox.faults()
        await crawl.run(d, platform_id=store["id"])  # the menu returns
        await crawl.close()
        return empty_since

    empty_since = asyncio.run(scenario())
    after = products_of(db, d)
    assert set(after) == on_menu and all(after[p] == (0, "in_stock", True) for p in on_menu)
    runs = sql(
        "SELECT id, status, error, empty, suspect, products_missed FROM crawl_runs WHERE dispensary_id = %s "
        "ORDER BY id",
        (d,),
    )
    assert [r[1:] for r in runs] == [("complete", None, False, False, 0)] + [("complete", None, True, False, 0)] * 4 + [
        ("complete", None, False, False, 0)
    ]
    assert empty_since == sql("SELECT started_at FROM crawl_runs WHERE id = %s", (runs[1][0],))[0][0]
    assert sql("SELECT menu_empty_since FROM dispensaries WHERE id = %s", (d,)) == [(None,)]
    assert sql("SELECT type, products, crawl_run_id FROM store_events WHERE dispensary_id = %s ORDER BY id", (d,)) == [
        ("menu_emptied", len(on_menu), runs[1][0]),
        ("menu_returned", len(on_menu), runs[5][0]),
    ]
    assert sql("SELECT count(*) FROM product_events WHERE dispensary_id = %s AND type = 'out_of_stock'", (d,)) == [(0,)]


@pytest.mark.integration
def test_a_server_error_after_retries_leaves_the_crawl_incomplete_end_to_end(crawl, db, sandbox, store):
    d = add_store(db, store)
    assert crawl("product_resync", *NO_IMAGES, dispensary_id=d).returncode == 0
    before = products_of(db, d)
    sandbox.epoch(3)
    sandbox.faults({"kind": "error500", "store": store["id"], "pages": [1]})
    result = crawl("product_resync", *NO_IMAGES, dispensary_id=d)
    assert result.returncode == EXIT_INCOMPLETE  # cron and Scrapyd see the store was not crawled
    assert "request failed: HttpError" in result.stderr
    assert "crawl incomplete, no product will be marked missing" in result.stderr
    after = products_of(db, d)
    assert all(after[p][:2] == (0, "in_stock") for p in before)
    assert runs_of(db, d)[-1][0] == "incomplete"


@pytest.mark.integration
def test_products_from_pages_before_a_failure_are_still_stored(crawl, db, sandbox, store):
    d = add_store(db, store)
    sandbox.faults({"kind": "block403", "store": store["id"], "pages": [1]})
    crawl("product_discovery", dispensary_id=d)
    first_page = sandbox.menu(store["id"], 0)[:100]
    assert set(first_page) <= set(products_of(db, d))
    assert runs_of(db, d)[0][0] == "incomplete"


@pytest.mark.integration
def test_stale_persisted_hash_falls_back_to_full_query_with_a_warning(crawl, db, sandbox, store):
    d = add_store(db, store)
    sandbox.call("POST", "/_sandbox/hashes", {"FilteredProducts": "1" * 64})
    result = crawl("product_resync", dispensary_id=d)
    assert "persisted-query hash for FilteredProducts is stale" in result.stderr
    assert result.stderr.count("is stale") == 1  # warned once, then full query for the other pages
    assert runs_of(db, d)[0][0] == "complete"
    assert set(products_of(db, d)) == set(sandbox.menu(store["id"], 0))


@pytest.mark.integration
def test_rate_limited_pages_are_waited_out_and_the_crawl_completes(crawl, db, sandbox, store):
    d = add_store(db, store)
    sandbox.faults({"kind": "rate_limited", "store": store["id"], "pages": [1], "times": 2, "retry_after": "1"})
    result = crawl("product_resync", dispensary_id=d)
    assert result.stderr.count("HTTP 429: retrying in 1.0 s") == 2
    assert runs_of(db, d)[0][0] == "complete"
    assert set(products_of(db, d)) == set(sandbox.menu(store["id"], 0))


@pytest.mark.integration
def test_rate_limiting_past_the_bound_leaves_the_crawl_incomplete(crawl, db, sandbox, store):
    d = add_store(db, store)
    assert crawl("product_resync", *NO_IMAGES, dispensary_id=d).returncode == 0
    sandbox.epoch(3)
    sandbox.faults({"kind": "rate_limited", "store": store["id"], "pages": [1], "retry_after": None})
    bound = ("-s", "RATE_LIMIT_MAX_RETRIES=2", "-s", "RATE_LIMIT_BACKOFF_S=0.1")
    result = crawl("product_resync", *bound, *NO_IMAGES, dispensary_id=d)
    assert "still rate limited after 2 retries" in result.stderr
    assert runs_of(db, d)[-1][0] == "incomplete"
    assert {v[0] for v in products_of(db, d).values()} == {0}  # nothing marked missing


@pytest.mark.integration
def test_per_page_above_the_sandbox_cap_still_completes(crawl, db, sandbox, store):
    d = add_store(db, store)
    on_menu = sandbox.menu(store["id"], 0)
    assert len(on_menu) > 100  # more than one capped page
    result = crawl("product_resync", "-s", "DUTCHIE_PER_PAGE=500", dispensary_id=d)
    assert "the server caps perPage at 100 (DUTCHIE_PER_PAGE = 500)" in result.stderr
    status, error, seen, *_ = runs_of(db, d)[0]
    assert (status, error, seen) == ("complete", None, len(on_menu))
    assert set(products_of(db, d)) == set(on_menu)


def test_bad_products_are_skipped_with_a_warning_and_the_page_goes_on(in_process, db):
    d = store_row(db)
    good = sandbox_products(5)
    bad = [
        {"_id": None, "Name": "no id"},
        {"_id": "a" * 24, "Name": None},
        "garbage",
        {**good[0], "_id": "b" * 24, "Name": "<i>Html</i> &amp; name", "Prices": "x", "THCContent": 7},
    ]

    async def scenario():
        crawl = in_process()
        await crawl.run(d, good + bad, total=len(good) + len(bad))
        await crawl.close()
        return crawl

    crawl = asyncio.run(scenario())
    assert sum("product skipped" in m for m in crawl.dropped) == 3
    assert set(products_of(db, d)) == {p["_id"] for p in good} | {"b" * 24}
    # the good rows are stored, but two products could not be identified: nothing may be judged missing
    status, error, *_ = runs_of(db, d)[0]
    assert status == "incomplete" and "2 product(s) had no usable id" in error


@pytest.mark.integration
def test_the_crawl_ends_once_its_last_store_closed_not_on_the_engines_next_heartbeat(crawl, db, sandbox, store):
    # the lifecycle holds the engine open while the store's close is pending; the engine itself only
    # looks at an idle crawl again every 5 s (its heartbeat). A store crawled again (nothing new to
    # insert) closes well within that first interval, and would otherwise wait out the rest of it.
    # The first crawl is not judged: it downloads and converts the store's images, which rightly hold
    # the crawl open after the store closed (the image pipeline's own wake-up is
    # tests/pipelines/test_images.py's); the crawls after it find every image stored.
    d = add_store(db, store)
    first = crawl("product_resync", dispensary_id=d)
    assert first.returncode == 0, first.stderr[-3000:]
    assert "'cannaspider/images_stored'" in first.stderr
    for _ in range(2):
        result = crawl("product_resync", dispensary_id=d)
        assert result.returncode == 0, result.stderr[-3000:]
        assert "'cannaspider/images_stored'" not in result.stderr  # nothing but the store's close held this crawl
        # ended by the lifecycle the moment the close settled (units/lifecycle.py, end_if_idle), not
        # by the engine's heartbeat up to 5 s later: a fact of the crawl, not a wall-clock bound
        assert "'cannaspider/ended_when_idle': 1" in result.stderr, result.stderr[-3000:]


@pytest.mark.integration
def test_a_crawl_without_the_product_writer_closes_its_stores_incomplete_at_once_and_marks_nothing(
    crawl, db, sandbox, store, sql
):
    # `-s ITEM_PIPELINES={}` (the ingest benchmark's ceiling): no row is written, so the close must
    # neither wait CRAWL_COMPLETION_WAIT_S for rows that never come nor judge the store's products
    d = add_store(db, store)
    assert crawl("product_resync", *NO_IMAGES, dispensary_id=d).returncode == 0
    result = crawl("product_resync", "-s", "ITEM_PIPELINES={}", "-s", "CRAWL_COMPLETION_WAIT_S=60", dispensary_id=d)
    assert result.returncode == EXIT_INCOMPLETE, result.stderr[-3000:]
    last = runs_of(db, d)[-1]
    assert last[0] == "incomplete" and "no product writer" in last[1] and last[4:6] == (0, 0)
    assert sql("SELECT count(*) FROM store_products WHERE dispensary_id = %s AND consecutive_misses > 0", (d,)) == [
        (0,)
    ]


@pytest.mark.integration
def test_store_without_platform_id_is_a_clear_error(crawl, db, sandbox, store):
    d = add_store(db, store, resolved=False)
    result = crawl("product_resync", dispensary_id=d)
    assert f"dispensary {d} (" in result.stderr and "run entry_point_discovery first" in result.stderr
    assert runs_of(db, d) == []


@pytest.mark.integration
def test_no_target_drains_the_queue_and_an_empty_queue_ends_at_once(scrapy_env, sql):
    from tests.helpers import run_scrapy

    result = run_scrapy("crawl", "product_resync", env=scrapy_env)
    assert result.returncode == 0 and "draining the product_resync queue" in result.stderr
    assert "0 task(s) claimed" in result.stderr and sql("SELECT count(*) FROM crawl_runs") == [(0,)]


@pytest.mark.integration
def test_output_feed_with_dash_O(crawl, db, sandbox, store, tmp_path):
    d = add_store(db, store)
    out = tmp_path / "products.json"
    crawl("product_resync", "-O", str(out), dispensary_id=d)
    items = json.loads(out.read_text())
    assert len(items) == len(sandbox.menu(store["id"], 0))
    assert {"provider_product_id", "name", "price_rec", "options", "thc", "dispensary_id"} <= set(items[0])
    assert not any("seen_product_ids" in i or "raw" in i for i in items)


@pytest.mark.integration
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


@pytest.mark.integration
def test_crawling_a_whole_state_does_every_resolved_store(crawl, db, sandbox, sql):
    stores = sandbox.stores("NV")
    ids = [add_store(db, s) for s in stores]
    result = crawl("product_discovery", *NO_IMAGES, state="NV")  # (its ~1,100 images: not the point)
    assert result.returncode == 0
    statuses = sql("SELECT dispensary_id, status FROM crawl_runs ORDER BY dispensary_id")
    assert statuses == [(i, "complete") for i in ids]
    with psycopg.connect(db) as conn:
        counts = dict(conn.execute("SELECT dispensary_id, count(*) FROM store_products GROUP BY 1").fetchall())
    assert all(counts[i] == len(sandbox.menu(s["id"], 0)) for i, s in zip(ids, stores, strict=True))
