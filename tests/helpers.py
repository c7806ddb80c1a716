"""Helpers the tests import (fixtures live in conftest.py): where the project is, `scrapy` run as
a subprocess exactly as users run it, spiders driven in-process (Scrapy's own testing pattern), a
client for the sandbox's control API, and shortcuts that put sandbox stores in the test database
without running discovery each time."""

from __future__ import annotations

import asyncio
import importlib.util
import inspect
import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

import psycopg
import scrapy
from scrapy import signals
from scrapy.crawler import Crawler
from scrapy.http import Response
from scrapy.responsetypes import responsetypes
from scrapy.settings import SETTINGS_PRIORITIES, BaseSettings, Settings
from scrapy.utils.test import get_crawler
from twisted.python.failure import Failure

from cannaspider.db.connection import with_dbname as with_dbname  # tests take it from here
from cannaspider.settings import PRODUCT_PIPELINES
from sandbox.server import Sandbox, SandboxURLs
from tests.httpclient import http

ROOT = Path(__file__).resolve().parent.parent
TEST_DATA_DIR = ROOT / ".data" / "test"
TEST_PGDATA = TEST_DATA_DIR / "postgres"


def holds_for(seconds: float, check: Callable[[], bool], what: str) -> None:
    """Assert that something does NOT happen for a while (a drainer claims nothing, a cancelled job
    stays cancelled): `check` must hold at every look, ten times a second, so a transient breach is
    caught too. The only waits on the clock in the suite are these windows of absence; anything
    that happens is waited for as a condition."""
    end = time.monotonic() + seconds
    while True:
        assert check(), f"no longer true: {what}"
        if time.monotonic() >= end:
            return
        time.sleep(0.1)


def leases_lapsed(db_url: str) -> bool:
    """Every running task's lease has run out by the database's clock (the one claims judge by)."""
    with psycopg.connect(db_url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FILTER (WHERE lease_expires_at >= now()) FROM worker_tasks WHERE status = 'running'"
        ).fetchone()
    return row is not None and row[0] == 0


def wait_for(check: Callable[[], bool], what: str, timeout: float = 60) -> None:
    """Wait until `check` holds (looked at ten times a second); fail naming `what` past `timeout`,
    a bound against a hang, far above any wait it stands for."""
    end = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < end, f"still not true after {timeout:g} s: {what}"
        time.sleep(0.1)


# `-s` options of a crawl whose test is not about images: the product pipelines without the images
# one. A store's first crawl downloads and converts its ~200 product images, most of the crawl's
# time (a state of 12 stores: 1,100 images); the images are the tests of tests/pipelines/ and
# tests/images/, and of the crawls that keep them.
IMAGES_PIPELINE = "cannaspider.pipelines.images.ProductImagesPipeline"
assert IMAGES_PIPELINE in PRODUCT_PIPELINES, "NO_IMAGES would leave the images pipeline on"
NO_IMAGES = (
    "-s",
    "PRODUCT_PIPELINES=" + json.dumps({k: v for k, v in PRODUCT_PIPELINES.items() if k != IMAGES_PIPELINE}),
)


def run_scrapy(*args: str, env: dict, timeout: float = 180, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "scrapy", *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout
    )


# --- spiders in-process: build the spider, give a callback a real response, look at its output ---


def make_spider(spidercls: type[scrapy.Spider], settings: dict | None = None, **spider_args: Any) -> scrapy.Spider:
    """The spider as `scrapy crawl` would build it (project settings, then `settings`, as `-s`
    would), without starting the engine: call its callbacks with `fetch()`ed responses."""
    project = BaseSettings()  # not Settings(): Scrapy's defaults would override get_crawler's reactor choice
    project.setmodule(settings_module_now(), priority="project")
    project.setdict(settings or {}, priority="cmdline")
    crawler = get_crawler(spidercls, project.copy_to_dict())
    return spidercls.from_crawler(crawler, **spider_args)


def fetch(request: scrapy.Request) -> Response:
    """Download `request` (loopback only: the sandbox) and wrap the reply as Scrapy's downloader
    would: the response class its headers call for, carrying the request (and so its meta)."""
    headers = {key.decode(): b", ".join(values).decode() for key, values in request.headers.items()}
    reply = http(request.method, request.url, body=request.body or None, headers=headers)
    return response_for(request, reply.body, status=reply.status, headers=reply.headers)


def response_for(
    request: scrapy.Request, body: bytes | str, status: int = 200, headers: dict | None = None
) -> Response:
    """A recorded or hand-made body as the response to `request`."""
    body = body.encode() if isinstance(body, str) else body
    headers = headers or {}
    cls = responsetypes.from_args(headers=headers, url=request.url, body=body)
    return cls(url=request.url, status=status, headers=headers, body=body, request=request)


def outputs(result: Any) -> list:
    """Everything a callback, errback or `start()` produced: items and requests, in order, whether
    it is a plain or async generator, a coroutine, or a single value."""
    if inspect.isasyncgen(result):
        return asyncio.run(_collect(result))
    if inspect.iscoroutine(result):
        result = asyncio.run(result)
    if result is None:
        return []
    if isinstance(result, (scrapy.Request, dict)) or not hasattr(result, "__iter__"):
        return [result]
    return list(result)


async def _collect(agen) -> list:
    return [x async for x in agen]


def start_outputs(spider: scrapy.Spider) -> list:
    """What `spider.start()` yields, then the spider_closed signal, so the components that opened
    something for the crawl (the database pool) close it in the same event loop."""

    async def run() -> list:
        try:
            return [x async for x in spider.start()]
        finally:
            assert spider.crawler is not None
            await spider.crawler.signals.send_catch_log_async(signals.spider_closed, spider=spider, reason="finished")

    return asyncio.run(run())


def follow(callback_output: list, handle: Callable[[scrapy.Request], Response | Failure] = fetch) -> list:
    """Items of `callback_output`, with every request in it handled (fetched, by default) and the
    output of its callback (or, for a Failure, its errback) expanded in its place, recursively: a
    tiny engine, for spiders whose callbacks chain requests."""
    done: list = []
    for out in callback_output:
        if not isinstance(out, scrapy.Request):
            done.append(out)
            continue
        got = handle(out)
        if isinstance(got, Failure):
            assert out.errback is not None
            got.request = out  # type: ignore[attr-defined]  # as Scrapy does for errbacks
            done += follow(outputs(out.errback(got)), handle)
        else:
            assert out.callback is not None
            done += follow(outputs(out.callback(got)), handle)
    return done


class SandboxClient:
    """The sandbox's control API (/_sandbox/…): faults, menu epochs, catalog views, counters."""

    def __init__(self, server: Sandbox):
        self.server = server
        assert server.urls is not None, "start the sandbox first"
        self.urls: SandboxURLs = server.urls

    def call(self, method: str, path: str, body: object | None = None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(
            self.urls.base + path, data=data, method=method, headers={"content-type": "application/json"}
        )
        with urllib.request.urlopen(req, timeout=30) as resp:
            return json.loads(resp.read())

    def reset(self) -> None:
        self.call("POST", "/_sandbox/reset", {})

    def faults(self, *rules: dict) -> None:
        self.call("POST", "/_sandbox/faults", {"rules": list(rules)})

    def epoch(self, n: int) -> None:
        self.call("POST", "/_sandbox/epoch", {"epoch": n})

    def stores(self, state: str | None = None) -> list[dict]:
        return self.call("GET", "/_sandbox/stores" + (f"?state={state}" if state else ""))

    def menu(self, store: str, epoch: int) -> list[str]:
        return self.call("GET", f"/_sandbox/menu/{store}?epoch={epoch}")["product_ids"]

    def requests(self) -> dict:
        return self.call("GET", "/_sandbox/state")["requests"]

    def pages_asked(self, page: int) -> int:
        """How many FilteredProducts requests asked for this page (every store together)."""
        return int(self.call("GET", "/_sandbox/state")["pages"].get(str(page), 0))


def scrapy_environment(db_url: str, urls: SandboxURLs, tmp_path: Path) -> dict:
    """The environment of a `scrapy` subprocess aimed at the test database and the sandbox. No
    SCRAPY_* variable of this process passes on (a user's shell has none; SCRAPY_CHECK would keep
    the child's proxy health in memory, SCRAPY_SETTINGS_MODULE would pick its settings)."""
    return {
        **{k: v for k, v in os.environ.items() if not k.startswith("SCRAPY_")},
        "DATABASE_URL": db_url,
        "DUTCHIE_GRAPHQL_URL": urls.graphql,
        "JANE_ALGOLIA_URL": urls.jane,
        "CANNASPIDER_DATA_DIR": str(tmp_path / "data"),
        "CANNASPIDER_FEED_DIR": str(tmp_path / "feeds"),
    }


def add_store(db_url: str, store: dict, *, resolved: bool = True, menu_url: str | None = None) -> int:
    """A sandbox store (as /_sandbox/stores lists it) as a dispensaries row; returns its id."""
    with psycopg.connect(db_url, autocommit=True) as conn:
        row = conn.execute(
            "INSERT INTO dispensaries (name, slug, menu_url, state, city, platform_dispensary_id) "
            "VALUES (%s, %s, %s, %s, %s, %s) RETURNING id",
            (
                store["name"],
                store["cName"],
                store["menu_url"] if menu_url is None else menu_url,
                store["state"],
                store["city"],
                store["id"] if resolved else None,
            ),
        ).fetchone()
    assert row is not None
    return row[0]


def products_of(db_url: str, dispensary_id: int) -> dict[str, tuple]:
    with psycopg.connect(db_url) as conn:
        rows = conn.execute(
            "SELECT provider_product_id, consecutive_misses, stock_status, is_in_stock FROM store_products "
            "WHERE dispensary_id = %s",
            (dispensary_id,),
        ).fetchall()
    return {r[0]: r[1:] for r in rows}


def runs_of(db_url: str, dispensary_id: int) -> list[tuple]:
    with psycopg.connect(db_url) as conn:
        return conn.execute(
            "SELECT status, error, products_seen, products_new, products_missed, products_marked_oos, pages_fetched "
            "FROM crawl_runs WHERE dispensary_id = %s ORDER BY id",
            (dispensary_id,),
        ).fetchall()


# Dutchie is only crawled through proxies: the sandbox's forward proxy, with credentials (an "@"
# in the password: it must be percent-encoded in the proxy URL), is the pool of every crawl.
SANDBOX_PROXY_AUTH = ("scout", "pa55@w0rd")


def register_proxy(db_url: str, proxy_url: str, auth: tuple[str, str] | None) -> int:
    """A row in `proxies` for a proxy at `proxy_url` (http://127.0.0.1:port, socks5://…)."""
    scheme, host_port = proxy_url.split("://", 1)
    host, port = host_port.split(":")
    user, password = auth or (None, None)
    with psycopg.connect(db_url, autocommit=True) as conn:
        row = conn.execute(
            "INSERT INTO proxies (host, port, username, password, protocol) VALUES (%s, %s, %s, %s, %s) RETURNING id",
            (host, int(port), user, password, scheme),
        ).fetchone()
    assert row is not None
    return row[0]


def settings_module_now() -> ModuleType:
    """cannaspider/settings.py run again, against the environment of this moment: the settings a
    `scrapy` process started now would load. settings.py applies the environment once, when it is
    imported (cannaspider/env.py), so the imported module holds the environment this test session
    started with: with DATABASE_URL set for the session (the server tests make their databases
    on: conftest.py), that URL beat every fixture's `monkeypatch.setenv("DATABASE_URL", db)`."""
    spec = importlib.util.find_spec("cannaspider.settings")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)  # a copy of its own, not the imported module
    spec.loader.exec_module(module)
    return module


# Crawlers for in-process tests that carry the project's settings (its defaults, stated once in
# cannaspider/settings.py, and its EXTENSIONS), as `scrapy crawl` would, on the test's reactor.
def project_settings() -> dict:
    settings = Settings()
    settings.setmodule(settings_module_now(), priority="project")
    # the reactor is the test run's (get_crawler picks it); the rest is the project's
    return {
        name: settings[name]
        for name in settings
        if settings.getpriority(name) == SETTINGS_PRIORITIES["project"] and name != "TWISTED_REACTOR"
    }


def project_crawler(spidercls: type | None = None, **overrides) -> Crawler:
    return get_crawler(spidercls, settings_dict={**project_settings(), **overrides})


# --- product events (docs/analytics.md, "Events"): a small history the API and the exports read ---


def seed_events(sql) -> dict[str, int]:
    """Two stores (AZ, CA), three products, eleven events over three crawls; returns their ids."""
    sql("SELECT ensure_snapshot_partitions('2026-11-01', 1)")  # the events' month, whatever today is
    az, ca = (
        sql("INSERT INTO dispensaries (name, state, city) VALUES (%s, %s, %s) RETURNING id", (n, s, c))[0][0]
        for n, s, c in (("Green AZ", "AZ", "Phoenix"), ("Blue CA", "CA", "Fresno"))
    )
    products = {}
    for key, store, brand in (("a", az, "Stiiizy"), ("b", az, "Select"), ("c", ca, "Stiiizy")):
        products[key] = sql(
            "INSERT INTO store_products (dispensary_id, provider_product_id, name_raw, name, brand_name_raw, "
            "category, price_rec) VALUES (%s, %s, %s, %s, %s, 'Flower', 20) RETURNING id",
            (store, key * 24, f"Product {key}", f"Product {key}", brand),
        )[0][0]
    runs = [
        sql(
            "INSERT INTO crawl_runs (dispensary_id, role, status, started_at) VALUES "
            "(%s, 'product_resync', 'complete', '2026-11-28T10:00:00Z'::timestamptz + make_interval(days => %s)) "
            "RETURNING id, started_at",
            (az, day),
        )[0]
        for day in range(3)
    ]
    plan = [
        (0, "a", "listed", None, 20),
        (0, "b", "listed", None, 15),
        (0, "c", "listed", None, 30),
        (1, "a", "price_changed", 20, 18),
        (1, "b", "special_started", None, 15),
        (1, "c", "price_changed", 30, 33),
        (2, "a", "out_of_stock", None, 18),
        (2, "b", "special_ended", None, 15),
        (2, "c", "out_of_stock", None, 33),
        (2, "a", "back_in_stock", None, 18),  # (not a real sequence: the API only reads)
        (2, "b", "price_changed", 15, 14),
    ]
    for day, key, kind, old, price in plan:
        store = ca if key == "c" else az
        sql(
            "INSERT INTO product_events (occurred_at, crawl_run_id, dispensary_id, store_product_id, type, "
            "price_rec_old, price_rec) VALUES (%s, %s, %s, %s, %s, %s, %s)",
            (runs[day][1], runs[day][0], store, products[key], kind, old, price),
        )
    return {"az": az, "ca": ca, **products}


@contextmanager
def month_without_partitions(db_url: str, *, stray_table: bool = False) -> Iterator[str]:
    """This month's product_snapshots and product_events partitions dropped, as when the clock has
    passed the last month made ahead; with `stray_table`, a plain table holds the snapshots
    partition's name, so that it cannot be made. Yields the snapshots partition's name; the month's
    partitions are made again afterwards."""
    with psycopg.connect(db_url, autocommit=True) as conn:
        month = conn.execute("SELECT to_char(current_date, 'YYYY_MM')").fetchone()[0]
        parts = [f"product_snapshots_{month}", f"product_events_{month}"]
        for part in parts:
            conn.execute(f"DROP TABLE IF EXISTS {part}")
        if stray_table:
            conn.execute(f"CREATE TABLE {parts[0]} (id bigint)")
    try:
        yield parts[0]
    finally:
        with psycopg.connect(db_url, autocommit=True) as conn:
            if stray_table:
                conn.execute(f"DROP TABLE IF EXISTS {parts[0]}")
            conn.execute("SELECT ensure_snapshot_partitions(current_date, 2)")
