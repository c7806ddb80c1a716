"""HTTP 429: waited out as Retry-After asks (bounded), else with a bounded backoff."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest
from scrapy import Request
from scrapy.http import TextResponse
from scrapy.utils.test import get_crawler

from cannaspider.middlewares import rate_limit
from cannaspider.middlewares.rate_limit import RetryAfterMiddleware, retry_after_seconds

URL = "http://127.0.0.1:1/graphql?operationName=FilteredProducts"
SETTINGS = {"RATE_LIMIT_MAX_RETRIES": 3, "RATE_LIMIT_MAX_WAIT_S": 30.0, "RATE_LIMIT_BACKOFF_S": 2.0}


@pytest.fixture
def waits(monkeypatch) -> list[float]:
    """The waits the middleware asked for (recorded, not slept)."""
    asked: list[float] = []
    real_sleep = asyncio.sleep

    async def sleep(seconds: float) -> None:
        asked.append(seconds)
        await real_sleep(0)

    monkeypatch.setattr(rate_limit.asyncio, "sleep", sleep)
    return asked


def middleware(**settings):
    crawler = get_crawler(settings_dict={**SETTINGS, **settings})
    return RetryAfterMiddleware.from_crawler(crawler), crawler.stats


def too_many(req: Request, retry_after: str | None = None) -> TextResponse:
    headers = {"Retry-After": retry_after} if retry_after is not None else {}
    return TextResponse(req.url, status=429, headers=headers, body=b"{}", request=req)


def test_retry_after_in_seconds_or_as_an_http_date():
    now = datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC)
    assert retry_after_seconds(b"7", now) == 7.0
    assert retry_after_seconds(b"Mon, 30 Nov 2026 12:00:20 GMT", now) == 20.0
    assert retry_after_seconds(b"Mon, 30 Nov 2026 11:00:00 GMT", now) == 0.0  # in the past: now
    assert retry_after_seconds(b"soon", now) is None
    assert retry_after_seconds(b"", now) is None
    assert retry_after_seconds(None, now) is None


def test_a_429_is_retried_after_the_wait_the_server_asks(waits):
    mw, stats = middleware()
    req = Request(URL, meta={"page": 1})
    retry = asyncio.run(mw.process_response(req, too_many(req, "5")))
    assert isinstance(retry, Request) and retry.url == req.url and retry.dont_filter
    assert retry.meta["page"] == 1 and retry.meta["rate_limit_retries"] == 1
    assert waits == [5.0]
    assert stats.get_value("cannaspider/rate_limit_retries") == 1


def test_without_retry_after_the_backoff_doubles_up_to_the_bound(waits):
    mw, _ = middleware(RATE_LIMIT_MAX_RETRIES=6, RATE_LIMIT_MAX_WAIT_S=10.0)
    req = Request(URL)
    for _ in range(5):
        req = asyncio.run(mw.process_response(req, too_many(req)))
    assert waits == [2.0, 4.0, 8.0, 10.0, 10.0]


def test_past_the_retry_bound_the_429_goes_to_the_spider(waits):
    mw, stats = middleware()
    req = Request(URL, meta={"rate_limit_retries": 3})
    response = too_many(req, "1")
    assert asyncio.run(mw.process_response(req, response)) is response
    assert waits == [] and stats.get_value("cannaspider/rate_limit_gave_up") == 1


def test_a_longer_wait_than_the_bound_is_not_waited(waits, caplog):
    mw, _ = middleware()
    req = Request(URL)
    response = too_many(req, "3600")
    assert asyncio.run(mw.process_response(req, response)) is response
    assert waits == [] and "exceeds RATE_LIMIT_MAX_WAIT_S" in caplog.text


def test_other_statuses_pass_through(waits):
    mw, _ = middleware()
    req = Request(URL)
    ok = TextResponse(URL, status=200, body=b"{}", request=req)
    assert asyncio.run(mw.process_response(req, ok)) is ok
    assert waits == []
