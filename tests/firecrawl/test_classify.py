"""Outcome → crawlStatus (docs/firecrawl.md's table) on captured documents and errors, and
challenge pages recognised from their HTML whatever their status."""

from __future__ import annotations

from pathlib import Path

import pytest
from parsel import Selector

from cannaspider.firecrawl.api import PageError
from cannaspider.firecrawl.batch import PageOutcome
from cannaspider.firecrawl.classify import Verdict, detect_challenge
from cannaspider.firecrawl.classify import classify as classify_with
from tests.firecrawl.conftest import fixture, onpage_config

CLOUDFLARE_BLOCK = (Path(__file__).resolve().parents[2] / "sandbox/cloudflare_403.html").read_text()
CONFIG = onpage_config(None)


def classify(page: PageOutcome, **kwargs) -> Verdict:
    """As the job classifies: the project's ONPAGE_MIN_WORDS and corpus limits, unless given."""
    return classify_with(page, **{"min_words": CONFIG.min_words, "limits": CONFIG.corpus, **kwargs})


def docs(capture: str) -> dict[str, dict]:
    return {d["metadata"]["sourceURL"].rsplit("/", 1)[-1]: d for d in fixture(capture)["data"]}


def errors(capture: str) -> list[PageError]:
    return [PageError(e["url"], e["code"], e["error"]) for e in fixture(capture)["errors"]]


def test_captured_403_429_and_ok_documents():
    d = docs("05_get_completed_403_429_empty_proxy_basic.json")
    blocked = classify(PageOutcome("http://127.0.0.1:8766/blocked.html", doc=d["blocked.html"]))
    assert (blocked.status, blocked.http_status, blocked.error) == (
        "blocked",
        403,
        "cloudflare challenge page (HTTP 403)",
    )
    limited = classify(PageOutcome("http://127.0.0.1:8766/ratelimited.html", doc=d["ratelimited.html"]))
    assert (limited.status, limited.http_status, limited.error) == ("blocked", 429, "HTTP 429 Too Many Requests")
    ok = classify(PageOutcome("http://127.0.0.1:8765/page-a.html", doc=d["page-a.html"]))
    assert (ok.status, ok.http_status, ok.error) == ("ok", 200, None) and ok.onpage.word_count == 20


def test_captured_404_is_a_fetch_error():
    d = docs("25_get_completed_404_proxy_auto.json")["missing-page.html"]
    v = classify(PageOutcome(d["metadata"]["sourceURL"], doc=d))
    assert (v.status, v.http_status, v.error, v.onpage) == ("fetch_error", 404, "HTTP 404 Not Found", None)


@pytest.mark.parametrize(
    "capture, expected",
    [
        ("06_errors_empty_page_proxy_basic.json", ["fetch_error"]),  # empty 200: cannot be told from unreachable
        ("10_errors_unreachable.json", ["fetch_error", "fetch_error"]),
        ("11_errors_unreachable_when_renderer_hangs.json", ["timeout", "timeout"]),
        ("13_errors_timeout_proxy_basic.json", ["timeout"]),
    ],
)
def test_captured_errors(capture, expected):
    verdicts = [classify(PageOutcome(e.url, error=e)) for e in errors(capture)]
    assert [v.status for v in verdicts] == expected
    assert all(v.http_status is None and v.error.startswith(errors(capture)[0].code) for v in verdicts)


def test_nothing_known_after_completion_or_after_the_budget_or_an_invalid_url():
    assert classify(PageOutcome("https://x.example/")).status == "fetch_error"
    assert classify(PageOutcome("https://x.example/", budget_exhausted=True)).status == "timeout"
    assert classify(PageOutcome("not a url", invalid=True)).status == "fetch_error"


def page(html: str, status: int = 200) -> PageOutcome:
    return PageOutcome("https://shop.example/p", doc={"rawHtml": html, "metadata": {"statusCode": status}})


CHALLENGES = {
    "cloudflare": CLOUDFLARE_BLOCK,
    "incapsula": '<html><body><iframe id="main-iframe" src="/_Incapsula_Resource?SWUDNSAI=31">'
    "Request unsuccessful. Incapsula incident ID: 0-123</iframe></body></html>",
    "akamai": "<html><head><title>Access Denied</title></head><body><h1>Access Denied</h1>You don't have "
    "permission to access this server.<p>Reference #18.5c3e1602.1700000000.1a2b3c</p></body></html>",
    "datadome": '<html><body><iframe src="https://geo.captcha-delivery.com/captcha/?initialCid=x"></iframe>'
    "</body></html>",
    "perimeterx": '<html><body><div id="px-captcha"></div><p>Press &amp; Hold to confirm you are a human</p>'
    "</body></html>",
    "cloudflare-js": "<html><head><title>Just a moment...</title></head><body><noscript>Enable JavaScript"
    "</noscript><script>window._cf_chl_opt={cvId:'3'};</script></body></html>",
}


@pytest.mark.parametrize("vendor", sorted(CHALLENGES))
def test_challenge_pages_are_blocked_even_with_a_200(vendor):
    v = classify(page(CHALLENGES[vendor], 200))
    assert (v.status, v.http_status) == ("blocked", 200)
    assert v.error == f"{vendor.split('-')[0]} challenge page"


def test_protected_pages_that_rendered_are_ok():
    """Vendors' tags on pages they let through are not challenges."""
    html = (
        "<html><head><title>Shop</title><script src='/cdn-cgi/challenge-platform/scripts/jsd/main.js'></script>"
        "<script src='https://js.datadome.co/tags.js'></script></head><body><main><h1>CBD oil</h1>"
        "<p>Our oils, lab tested. Email: <a href='/cdn-cgi/l/email-protection'>[email protected]</a></p>"
        "</main></body></html>"
    )
    assert detect_challenge(Selector(text=html)) is None
    assert classify(page(html)).status == "ok"


def test_empty_rendered_page_and_threshold():
    assert classify(page("<html><head><title>t</title></head><body><div></div></body></html>")).status == "empty"
    assert classify(page("<html><body><main>two words</main></body></html>"), min_words=3).status == "empty"
    empty = classify(page("<html><body><script>var a = 'not text';</script></body></html>"))
    assert (empty.status, empty.error) == ("empty", "no usable text on the rendered page")
    assert empty.onpage is not None  # the analyst still sees its title, meta, etc.


def test_a_lone_surrogate_in_the_rendered_html_is_replaced_not_a_crash():
    """Firecrawl's JSON can carry a lone surrogate escape (\\ud800) that lxml cannot encode: the
    page used to raise out of classify and fail its whole locale."""
    import json

    doc = json.loads(
        '{"rawHtml": "<html lang=\\"en\\"><body><main><h1>Hemp \\ud800 oil</h1><p>Hemp oil guide.</p></main>'
        '</body></html>", "metadata": {"statusCode": 200}}'
    )
    verdict = classify(PageOutcome("https://s.example/", doc=doc))
    assert verdict.status == "ok" and verdict.corpus is not None
    assert verdict.onpage is not None and verdict.onpage.headings[0].text == "Hemp \ufffd oil"
    json.dumps(verdict.corpus.to_json(), ensure_ascii=False).encode("utf-8")  # storable as UTF-8


def test_reasons_from_firecrawls_json_are_storable():
    """NUL and lone surrogates escaped in Firecrawl's JSON (PostgreSQL's jsonb refuses both) stay
    out of crawlError."""
    import json

    doc = json.loads(
        '{"rawHtml": "<html></html>", "metadata": {"statusCode": 403, "error": "Forbid\\u0000den \\ud800"}}'
    )
    assert classify(PageOutcome("https://s.example/", doc=doc)).error == "HTTP 403 Forbidden \ufffd"
    error = PageError("https://s.example/", "SCRAPE_ALL_ENGINES_FAILED", json.loads('"All\\u0000 failed \\udfff"'))
    assert (
        classify(PageOutcome("https://s.example/", error=error)).error == "SCRAPE_ALL_ENGINES_FAILED: All failed \ufffd"
    )
