"""Which requests the stealth layer takes, the store crawl each belongs to, and the headers an
identity leaves (cannaspider/stealth/routing.py); the middleware's use of them is in
tests/middlewares/test_stealth_inprocess.py."""

from __future__ import annotations

from types import SimpleNamespace

from scrapy import Request

from cannaspider.stealth.identity import IdentityFactory
from cannaspider.stealth.routing import applies, counts_on_proxy, session_key, wear

URL = "http://127.0.0.1:1/api-3/graphql"


def test_graphql_requests_browser_pages_and_asked_for_requests_go_through_the_layer():
    assert applies(Request(URL, meta={"graphql_operation": "FilteredProducts"}))
    assert applies(Request("http://127.0.0.1:1/site/", meta={"playwright": True}))
    assert applies(Request("http://127.0.0.1:1/img.png", meta={"stealth": True}))
    assert not applies(Request("http://127.0.0.1:1/some-store-site"))
    assert not applies(Request(URL, meta={"stealth": False, "playwright": False}))


def test_only_images_say_their_answer_does_not_judge_the_proxy():
    assert counts_on_proxy(Request(URL)) and counts_on_proxy(Request(URL, meta={"proxy_health": None}))
    assert not counts_on_proxy(Request(URL, meta={"proxy_health": False}))


def test_a_session_is_the_store_crawl_then_the_store_then_the_search_point_then_the_crawl():
    crawl = SimpleNamespace(dispensary_id=7)
    assert session_key(Request(URL, meta={"store_crawl": crawl, "dispensary_id": 8, "point": "p"})) == (
        "dispensary",
        7,
    )
    no_store_yet = SimpleNamespace(dispensary_id=None)
    assert session_key(Request(URL, meta={"store_crawl": no_store_yet, "dispensary_id": 8})) == ("dispensary", 8)
    assert session_key(Request(URL, meta={"point": (33.4, -112.0)})) == ("point", (33.4, -112.0))
    assert session_key(Request(URL)) == ("crawl",)


def test_wearing_an_identity_keeps_the_requests_own_headers_and_drops_any_proxy_authorization():
    identity = IdentityFactory().draw("AZ", "America/Phoenix")
    request = Request(
        URL,
        headers={"Content-Type": "application/json", "Proxy-Authorization": "Basic b3RoZXI6cHc=", "User-Agent": "x"},
    )
    wear(request, identity)
    assert b"Proxy-Authorization" not in request.headers  # HttpProxyMiddleware writes this proxy's own
    assert request.headers[b"Content-Type"] == b"application/json"
    assert request.headers[b"User-Agent"].decode() == dict(identity.headers)["user-agent"]
