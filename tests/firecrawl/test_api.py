"""Firecrawl requests as sent, and captured answers as read."""

from __future__ import annotations

import json

import pytest
from scrapy.http import TextResponse

from cannaspider.firecrawl import api
from cannaspider.firecrawl.batch import Matcher, url_key
from tests.firecrawl.conftest import fixture

BASE = "http://127.0.0.1:3002"


def answer(capture: str | dict, status: int = 200) -> TextResponse:
    body = json.dumps(fixture(capture) if isinstance(capture, str) else capture).encode()
    return TextResponse(f"{BASE}/x", status=status, body=body, encoding="utf-8")


def test_start_request_sends_exactly_the_documented_body_and_the_bearer_key():
    req = api.start_request(BASE, "k-1", ["https://a.example/"], 30000, 60)
    assert (req.method, req.url) == ("POST", f"{BASE}/v2/batch/scrape")
    assert json.loads(req.body) == {
        "urls": ["https://a.example/"],
        "formats": ["rawHtml"],
        "onlyMainContent": False,
        "maxAge": 0,
        "timeout": 30000,
        "proxy": "basic",
        "ignoreInvalidURLs": True,
    }
    assert req.headers[b"Authorization"] == b"Bearer k-1"
    assert req.meta["dont_retry"] and req.meta["download_timeout"] == 60
    assert "k-1" not in repr(req) and b"Authorization" not in api.start_request(BASE, None, ["u"], 1, 1).headers


def test_status_errors_and_cancel_urls_are_built_from_our_base_not_the_servers():
    assert api.status_request(BASE, None, "id-1", 5).url == f"{BASE}/v2/batch/scrape/id-1"
    assert api.errors_request(BASE, None, "id-1", 5).url == f"{BASE}/v2/crawl/id-1/errors"
    cancel = api.cancel_request(BASE, None, "id-1", 5)
    assert (cancel.method, cancel.url) == ("DELETE", f"{BASE}/v2/batch/scrape/id-1")


def test_reading_captured_answers():
    started = api.read_started(answer("16_post_ignore_invalid_urls_true.json"))
    assert started.id == "e61bfb32-deb1-4c8f-a6d6-9d5af8610aa7" and len(started.invalid_urls) == 3
    running = api.read_status(answer("02_get_in_progress_empty.json"))
    assert (running.status, running.finished, running.data) == ("scraping", False, [])
    done = api.read_status(answer("05_get_completed_403_429_empty_proxy_basic.json"))
    assert (done.finished, done.completed, done.total, len(done.data)) == (True, 3, 3, 3)
    assert api.read_status(answer("21_get_cancelled_later.json")).finished
    errs = api.read_errors(answer("10_errors_unreachable.json"))
    assert [(e.url, e.code) for e in errs] == [
        ("http://no-such-host.invalid/page.html", "SCRAPE_ALL_ENGINES_FAILED"),
        ("http://127.0.0.1:8799/nothing-listens.html", "SCRAPE_ALL_ENGINES_FAILED"),
    ]


@pytest.mark.parametrize(
    "capture, status, message, client_error",
    [
        (
            "15_post_400_invalid_url.json",
            400,
            "Firecrawl answered HTTP 400 to POST /v2/batch/scrape: BAD_REQUEST; Bad Request; "
            "URL must have a valid top-level domain or be a valid path (at urls.0)",
            True,
        ),
        (
            "17_post_400_unknown_key.json",
            400,
            "Firecrawl answered HTTP 400 to POST /v2/batch/scrape: BAD_REQUEST; Bad Request; Unrecognized key in "
            "body -- please review the v2 API documentation for request body changes ['waitForTimeout']",
            True,
        ),
        (
            {"success": False, "code": "UNKNOWN_ERROR", "error": "An unexpected error occurred."},
            500,
            "Firecrawl answered HTTP 500 to POST /v2/batch/scrape: UNKNOWN_ERROR; An unexpected error occurred.",
            False,
        ),
    ],
)
def test_errors_carry_firecrawls_message_on_one_line(capture, status, message, client_error):
    with pytest.raises(api.FirecrawlError) as exc:
        api.read_started(answer(capture, status))
    assert str(exc.value) == message and exc.value.client_error is client_error


@pytest.mark.parametrize(
    "status, call, retrying_helps",
    [
        (400, "start", False),
        (401, "start", False),
        (402, "start", False),
        (429, "start", True),
        (404, "status", True),
        (404, "errors", True),
        (500, "start", True),
        (502, "status", True),
    ],
)
def test_which_failures_are_worth_retrying(status, call, retrying_helps):
    read = {"start": api.read_started, "status": api.read_status, "errors": api.read_errors}[call]
    with pytest.raises(api.FirecrawlError) as exc:
        read(answer({"success": False, "error": "x"}, status))
    assert exc.value.client_error is not retrying_helps


def test_unknown_job_and_html_answers():
    with pytest.raises(api.FirecrawlError, match="HTTP 404 to GET /v2/batch/scrape/{id}: Job not found"):
        api.read_status(answer("22_get_404_job_not_found.json", 404))
    html = TextResponse(f"{BASE}/x", status=404, body=b"<html><body><pre>Cannot GET /v2/x</pre></body></html>")
    with pytest.raises(api.FirecrawlError, match="HTTP 404 .*Cannot GET /v2/x"):
        api.read_errors(html)
    with pytest.raises(api.FirecrawlError, match="not a JSON object"):
        api.read_status(TextResponse(f"{BASE}/x", status=200, body=b"[]"))


def test_documents_are_matched_to_submitted_urls():
    m = Matcher(["https://Shop.example:443/a?x=1", "http://b.example", "http://c.example/p"])
    assert m.find("https://shop.example/a?x=1") == "https://Shop.example:443/a?x=1"
    assert m.find("http://b.example/") == "http://b.example"
    assert m.find("http://c.example/p#frag") == "http://c.example/p"
    assert m.find("http://c.example/other") is None and m.find(None) is None
    assert url_key("HTTP://X.example:80/") == "http://x.example"
