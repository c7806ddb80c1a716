"""The stale-hash fallback in the download chain: one warning per operation, the full query text
from then on, and callbacks that never see PersistedQueryNotFound."""

from __future__ import annotations

import json
import logging
from urllib.parse import parse_qs, urlsplit

from scrapy.http import TextResponse
from scrapy.utils.test import get_crawler

from cannaspider.platforms.dutchie import graphql
from cannaspider.platforms.dutchie.operations import CONSUMER_DISPENSARIES, FILTERED_PRODUCTS, products_variables
from cannaspider.platforms.dutchie.persisted_queries import PersistedQueryFallbackMiddleware

URL = "http://127.0.0.1:1/graphql"
STALE = {"errors": [{"message": "PersistedQueryNotFound", "extensions": {"code": "PERSISTED_QUERY_NOT_FOUND"}}]}


def request(operation: str = FILTERED_PRODUCTS, page: int = 0):
    return graphql.build_request(
        URL,
        operation,
        products_variables("a" * 24, page, 100),
        persisted_hash="f" * 64,
        client_name="test",
        callback=None,
        meta={"page": page},
    )


def answer(req, body: dict, status: int = 200) -> TextResponse:
    return TextResponse(req.url, status=status, body=json.dumps(body).encode(), request=req)


def middleware():
    crawler = get_crawler()
    return PersistedQueryFallbackMiddleware.from_crawler(crawler), crawler.stats


def is_full_query(req) -> bool:
    params = parse_qs(urlsplit(req.url).query)
    return "query" in params and "extensions" not in params and req.meta["graphql_full_query"] is True


def test_a_stale_hash_is_retried_with_the_full_query_and_remembered(caplog):
    caplog.set_level(logging.WARNING)
    mw, stats = middleware()
    first = request(page=0)
    retry = mw.process_response(first, answer(first, STALE))
    assert is_full_query(retry) and retry.meta["page"] == 0
    # a page already in flight with the hash also comes back stale: retried, not warned again
    second = request(page=1)
    assert is_full_query(mw.process_response(second, answer(second, STALE)))
    # later requests of that operation leave with the full text at once; other operations keep their hash
    assert is_full_query(mw.process_request(request(page=2)))
    assert mw.process_request(request(CONSUMER_DISPENSARIES)) is None
    assert caplog.text.count("persisted-query hash for FilteredProducts is stale") == 1
    assert stats.get_value("cannaspider/stale_hash_fallbacks") == 2


def test_other_answers_pass_through_untouched():
    mw, stats = middleware()
    req = request()
    good = answer(req, {"data": {"filteredProducts": {"products": [], "queryInfo": {}}}})
    assert mw.process_response(req, good) is good
    other = answer(req, {"errors": [{"message": "Internal server error"}]})
    assert mw.process_response(req, other) is other
    # a product whose name mentions the marker is not an error
    named = answer(req, {"data": {"filteredProducts": {"products": [{"Name": "PersistedQueryNotFound"}]}}})
    assert mw.process_response(req, named) is named
    # the full query answered stale too: nothing more to try, the callback sees the failure
    full = graphql.with_full_query(req)
    stale = answer(full, STALE)
    assert mw.process_response(full, stale) is stale
    assert mw.process_request(full) is None
    assert stats.get_value("cannaspider/stale_hash_fallbacks") is None


def test_requests_that_are_not_graphql_are_left_alone():
    from scrapy import Request

    mw, _ = middleware()
    plain = Request("http://127.0.0.1:1/menu")
    body = TextResponse(plain.url, body=b"PersistedQueryNotFound", request=plain)
    assert mw.process_request(plain) is None
    assert mw.process_response(plain, body) is body
