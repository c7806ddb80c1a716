"""Fixtures of the Firecrawl side: the sandbox's Firecrawl reset around each test, keywords in
the test database, and the keyword job run in-process over a small aiohttp-backed downloader
(the spider's own Scrapy downloader is exercised by tests/spiders/test_crawl_onpage.py)."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from pathlib import Path

import aiohttp
import psycopg
import pytest
import scrapy
from scrapy.exceptions import DownloadConnectionRefusedError, DownloadTimeoutError
from scrapy.http import TextResponse
from scrapy.settings import Settings

from cannaspider.db.connection import open_async_pool
from cannaspider.firecrawl.api import FirecrawlClient
from cannaspider.firecrawl.job import OnpageConfig, OnpageJobError, OnpageJobs
from tests.helpers import project_settings
from tests.httpclient import http

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "firecrawl-v2"


def fixture(name: str) -> dict:
    return json.loads((FIXTURES / name).read_text())


class Firecrawl:
    def __init__(self, sandbox):
        self.sandbox = sandbox
        self.url = sandbox.urls.firecrawl

    def state(self, **switches) -> dict:
        return http("POST", self.url + "/_sandbox/state", switches).json()

    def slow(self, seconds: float) -> None:
        http("POST", self.sandbox.urls.base + "/_sandbox/slow", {"seconds": seconds})

    def page(self, name: str) -> str:
        return f"{self.sandbox.urls.base}/competitors/{name}"


@pytest.fixture
def firecrawl(sandbox):
    fc = Firecrawl(sandbox)
    fc.state(reset=True)
    yield fc
    fc.state(reset=True)


def add_keyword(db_url: str, keyword: str, serp: dict) -> int:
    with psycopg.connect(db_url, autocommit=True) as conn:
        return conn.execute(
            "INSERT INTO keywords (keyword, serp) VALUES (%s, %s::jsonb) RETURNING id", (keyword, json.dumps(serp))
        ).fetchone()[0]


def serp_of(db_url: str, keyword_id: int) -> dict:
    with psycopg.connect(db_url) as conn:
        return conn.execute("SELECT serp FROM keywords WHERE id = %s", (keyword_id,)).fetchone()[0]


def competitors(*urls: str) -> dict:
    return {"competitors": [{"url": u, "position": i, "title": f"result {i}"} for i, u in enumerate(urls, 1)]}


async def aiohttp_download(request: scrapy.Request) -> TextResponse:
    """Scrapy request → Scrapy response over aiohttp, with Scrapy's exception types."""
    timeout = aiohttp.ClientTimeout(total=request.meta.get("download_timeout", 60))
    headers = {k.decode(): b",".join(v).decode() for k, v in request.headers.items()}
    try:
        async with aiohttp.ClientSession(timeout=timeout) as session:
            async with session.request(request.method, request.url, data=request.body or None, headers=headers) as r:
                body = await r.read()
                return TextResponse(request.url, status=r.status, body=body, encoding="utf-8", request=request)
    except TimeoutError as exc:
        raise DownloadTimeoutError(f"Getting {request.url} took too long") from exc
    except aiohttp.ClientConnectorError as exc:
        raise DownloadConnectionRefusedError(str(exc)) from exc


class Stats:
    def __init__(self):
        self.values: dict[str, int] = {}

    def inc_value(self, key, n=1):
        self.values[key] = self.values.get(key, 0) + n


def onpage_config(api_url: str | None, api_key: str | None = None, **overrides) -> OnpageConfig:
    """The spider's config from the project's settings (settings.py), with `overrides`."""
    settings = Settings(project_settings())
    return replace(OnpageConfig.from_settings(settings), api_url=api_url, api_key=api_key, **overrides)


def firecrawl_client(download, api_url: str, api_key: str | None = None) -> FirecrawlClient:
    """A client with the spider's timeouts (FIRECRAWL_PAGE_TIMEOUT_MS, FIRECRAWL_REQUEST_TIMEOUT_S)."""
    cfg = onpage_config(api_url, api_key)
    return FirecrawlClient(
        download, api_url, api_key, page_timeout_ms=cfg.page_timeout_ms, request_timeout_s=cfg.request_timeout_s
    )


def run_jobs(db_url: str, api_url: str | None, keyword_ids: list[int], download=aiohttp_download, **config):
    """Run keyword jobs at once; ({id: result or OnpageJobError}, items, stats)."""
    cfg = onpage_config(api_url, **{"poll_interval_s": 0.2, **config})
    items: list = []
    stats = Stats()

    async def scenario():
        pool = await open_async_pool(db_url, max_size=4, timeout=30)

        async def get_pool():
            return pool

        client = None
        if api_url:
            client = FirecrawlClient(
                download,
                api_url,
                cfg.api_key,
                page_timeout_ms=cfg.page_timeout_ms,
                request_timeout_s=cfg.request_timeout_s,
            )
        jobs = OnpageJobs(cfg, client, get_pool, items.append, stats)
        try:
            out = await asyncio.gather(*(jobs.crawl_keyword(k) for k in keyword_ids), return_exceptions=True)
        finally:
            jobs.close()
            await pool.close()
        for o in out:
            if isinstance(o, BaseException) and not isinstance(o, OnpageJobError):
                raise o
        return dict(zip(keyword_ids, out, strict=True))

    results = asyncio.run(scenario())
    return results, items, stats.values
