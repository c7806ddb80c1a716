"""Reading Dutchie responses: blocks, challenges, API errors, stale hashes, malformed bodies
(recorded responses from the real service where we have them)."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from scrapy.http import HtmlResponse, Request, TextResponse
from scrapy.spidermiddlewares.referer import RefererMiddleware
from scrapy.utils.test import get_crawler

from cannaspider.platforms.dutchie import graphql
from cannaspider.platforms.dutchie.operations import QUERIES, products_variables
from cannaspider.platforms.dutchie.stores import dispensary_record

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "dutchie"
URL = "https://dutchie.com/api-3/graphql"


def response(body: bytes | str, status: int = 200, ctype: str = "application/json"):
    body = body.encode() if isinstance(body, str) else body
    cls = HtmlResponse if "html" in ctype else TextResponse
    return cls(URL, status=status, body=body, headers={"Content-Type": ctype}, request=Request(URL))


def test_request_is_a_persisted_get_with_the_csrf_headers():
    req = graphql.build_request(
        URL,
        "FilteredProducts",
        products_variables("a" * 24, 2, 100),
        persisted_hash="f" * 64,
        client_name="Marketplace (production)",
        callback=None,
    )
    params = parse_qs(urlsplit(req.url).query)
    assert req.method == "GET"
    assert params["operationName"] == ["FilteredProducts"]
    assert json.loads(params["variables"][0])["page"] == 2
    assert json.loads(params["extensions"][0])["persistedQuery"]["sha256Hash"] == "f" * 64
    assert "query" not in params
    assert req.headers["apollo-require-preflight"] == b"true"
    assert req.headers["x-apollo-operation-name"] == b"FilteredProducts"


def test_the_next_pages_referer_is_the_apis_origin_not_the_last_pages_url():
    crawler = get_crawler(settings_dict={})
    referer = RefererMiddleware.from_crawler(crawler)
    page_0 = graphql.build_request(
        URL,
        "FilteredProducts",
        products_variables("a" * 24, 0, 100),
        persisted_hash="f" * 64,
        client_name="c",
        callback=None,
    )
    page_1 = graphql.build_request(
        URL,
        "FilteredProducts",
        products_variables("a" * 24, 1, 100),
        persisted_hash="f" * 64,
        client_name="c",
        callback=None,
    )
    answer = TextResponse(page_0.url, body=b"{}", request=page_0)
    sent = referer.get_processed_request(page_1, answer)
    assert sent is not None and sent.headers["Referer"] == b"https://dutchie.com/"


def test_full_query_version_keeps_everything_but_the_hash():
    def callback(response):
        return None

    req = graphql.build_request(
        URL,
        "FilteredProducts",
        products_variables("a" * 24, 2, 100),
        persisted_hash="f" * 64,
        client_name="Marketplace (production)",
        callback=callback,
        meta={"page": 2},
        priority=5,
    )
    full = graphql.with_full_query(req)
    params = parse_qs(urlsplit(full.url).query)
    assert params["query"] == [QUERIES["FilteredProducts"]] and "extensions" not in params
    assert params["operationName"] == ["FilteredProducts"] and json.loads(params["variables"][0])["page"] == 2
    assert full.meta["graphql_full_query"] is True and full.meta["page"] == 2
    assert (full.callback, full.priority, full.headers) == (callback, 5, req.headers)
    assert full.dont_filter


def test_real_cloudflare_403_page_is_a_block_not_json():
    # the body Cloudflare really returned (tests/fixtures/README.md), which the sandbox also serves
    body = (Path(__file__).resolve().parents[3] / "sandbox" / "cloudflare_403.html").read_bytes()
    result = graphql.read(response(body, 403, "text/html"))
    assert isinstance(result, graphql.GraphQLFailure) and result.kind == "blocked"


def test_503_just_a_moment_is_a_challenge():
    result = graphql.read(response("<html><head><title>Just a moment...</title></head></html>", 503, "text/html"))
    assert result.kind == "challenge"


def test_403_with_json_body_is_an_api_error_not_a_block():
    result = graphql.read(response(json.dumps({"errors": [{"message": "Forbidden resource"}]}), 403))
    assert result.kind == "graphql_errors"
    plain = graphql.read(response(json.dumps({"message": "nope"}), 403))
    assert plain.kind == "http_error"


def test_persisted_query_not_found_is_a_stale_hash():
    body = {"errors": [{"message": "PersistedQueryNotFound", "extensions": {"code": "PERSISTED_QUERY_NOT_FOUND"}}]}
    assert graphql.read(response(json.dumps(body))).kind == "stale_hash"


def test_graphql_errors_with_http_200():
    body = {"errors": [{"message": "Internal server error"}], "data": None}
    result = graphql.read(response(json.dumps(body)))
    assert result.kind == "graphql_errors" and "Internal server error" in result.detail


def test_malformed_and_truncated_bodies():
    good = (FIXTURES / "consumer-dispensaries.real.json").read_text()
    assert graphql.read(response(good[: len(good) // 2])).kind == "malformed"
    assert graphql.read(response("[1, 2]")).kind == "malformed"
    assert graphql.read(response('{"data": "nope"}')).kind == "malformed"


def test_real_consumer_dispensaries_payload_becomes_a_record():
    data = graphql.read(response((FIXTURES / "consumer-dispensaries.real.json").read_bytes()))
    record = dispensary_record(data["filteredDispensaries"][0])
    assert record.platform_dispensary_id == "5ef5fb055eb50b00e392c351"
    assert record.slug == "due-north-cannabis-co"
    assert record.menu_url == "https://duenorthcannabis.com/"  # embeddedMenuUrl: the store's own site
    assert (record.city, record.state, record.zip) == ("Sault Ste. Marie", "ON", "P6A 3Z9")
    assert record.lat is not None and 46 < record.lat < 47 and -85 < record.lng < -84  # [lng, lat] swapped back
    assert record.timezone == "America/Toronto" and record.is_recreational is True
