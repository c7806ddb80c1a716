"""What the pool counts as a block, and that it judges the decompressed body."""

from __future__ import annotations

import gzip
from importlib import resources

from scrapy import Request
from scrapy.downloadermiddlewares.httpcompression import HttpCompressionMiddleware
from scrapy.http import HtmlResponse, TextResponse
from scrapy.utils.misc import build_from_crawler
from scrapy.utils.test import get_crawler

from cannaspider import settings as project_settings
from cannaspider.stealth.policy import BlockPolicy

BLOCK_PAGE = resources.files("sandbox").joinpath("cloudflare_403.html").read_bytes()
URL = "http://127.0.0.1:1/api-3/graphql"


def response(status: int, body: bytes, cls=TextResponse, **headers) -> TextResponse:
    return cls(URL, status=status, body=body, headers=headers, request=Request(URL))


def test_blocks_challenges_and_proxy_refusals_are_blocks_api_errors_are_not():
    policy = BlockPolicy()
    assert "blocked: HTTP 403 Cloudflare block page" in policy.block_reason(Request(URL), response(403, BLOCK_PAGE))
    challenge = b"<!DOCTYPE html><html><head><title>Just a moment...</title></head></html>"
    assert policy.block_reason(Request(URL), response(503, challenge)).startswith("challenge")
    assert policy.block_reason(Request(URL), response(200, challenge, HtmlResponse)).startswith("challenge")
    assert "407" in policy.block_reason(Request(URL), response(407, b""))
    assert policy.block_reason(Request(URL), response(429, b"{}")).startswith("rate_limited")
    # a 403 with a JSON body is an API error (the spider's business), not a block
    assert policy.block_reason(Request(URL), response(403, b'{"errors":[{"message":"Forbidden"}]}')) is None
    assert policy.block_reason(Request(URL), response(200, b'{"data":{}}')) is None


def test_the_stealth_middleware_sees_bodies_after_decompression():
    crawler = get_crawler(settings_dict={"DOWNLOADER_MIDDLEWARES": project_settings.DOWNLOADER_MIDDLEWARES})
    order = crawler.settings.getwithbase("DOWNLOADER_MIDDLEWARES")

    def at(name: str) -> int:
        return next(v for k, v in order.items() if str(k).endswith(name))

    # responses go down the numbers: decompression (590), then RetryAfter (560), then us, then Retry
    assert at("RetryMiddleware") < at("StealthProxyMiddleware") < at("RetryAfterMiddleware")
    assert at("StealthProxyMiddleware") < at("HttpCompressionMiddleware")
    compressed = response(403, gzip.compress(BLOCK_PAGE), HtmlResponse, **{"Content-Encoding": "gzip"})
    assert BlockPolicy().block_reason(Request(URL), compressed) is None  # what a mis-ordered policy sees
    decompressed = build_from_crawler(HttpCompressionMiddleware, crawler).process_response(Request(URL), compressed)
    assert BlockPolicy().block_reason(Request(URL), decompressed).startswith("blocked")


API = Request(URL, meta={"graphql_operation": "FilteredProducts"})


def test_an_answer_that_is_not_the_apis_is_the_proxys_failure_not_a_cloudflare_block():
    policy = BlockPolicy()
    # a proxy's own answers: plain text, or pages without Cloudflare's marks
    for status, body, kind in (
        (403, b"Forbidden", "text/plain"),
        (404, b"Not Found", "text/plain"),
        (500, b"<html><body><h1>500 Internal Server Error</h1></body></html>", "text/html"),
        (502, b"<html><head><title>502 Bad Gateway</title></head><body>Bad Gateway</body></html>", "text/html"),
        (200, b'{"data": {"filteredProducts": {"prod', "application/json"),  # cut off on the way
    ):
        verdict = policy.judge(API, response(status, body, **{"Content-Type": kind}))
        assert verdict is not None and verdict.kind == "proxy_error", (status, verdict)
        assert verdict.reason.startswith(f"proxy_error: HTTP {status} {kind}, {len(body)} bytes")
    # a small 403 page that is not Cloudflare's: the proxy's, and not called a Cloudflare block
    small = policy.judge(API, response(403, b"<html><body><h1>403 Forbidden</h1></body></html>", HtmlResponse))
    assert small is not None and small.kind == "proxy_error" and "Cloudflare" not in small.reason.split(":")[1]
    assert "not Cloudflare's" in small.reason
    # Cloudflare's block page (by its page, or by its headers) stays a block
    assert policy.judge(API, response(403, BLOCK_PAGE, HtmlResponse)).kind == "block"
    marked = response(403, b"<html><body>blocked</body></html>", HtmlResponse, **{"cf-ray": "8f0c-PHX"})
    assert policy.judge(API, marked).kind == "block"
    # the API's own answers: JSON (of any status), or the origin's error passed on by Cloudflare
    assert policy.judge(API, response(403, b'{"errors":[{"message":"Forbidden"}]}')) is None
    assert policy.judge(API, response(200, b' {"data":{}}\n')) is None
    origin_500 = response(500, b"<html>500</html>", HtmlResponse, Server="cloudflare", **{"cf-ray": "8f0c-PHX"})
    assert policy.judge(API, origin_500) is None  # RetryMiddleware's, then the spider's: not the proxy's
    # a store's website (browser page) is HTML: only blocks count there
    assert policy.judge(Request(URL, meta={"playwright": True}), response(200, b"<html>menu</html>")) is None
