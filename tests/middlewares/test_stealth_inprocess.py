"""StealthProxyMiddleware in-process (get_crawler, no reactor): credentials on retries, identity
rotation with the proxy, a banned response never handed on; browser pages (scrapy-playwright's
meta, without a browser here: tests/middlewares/test_stealth_browser.py has the real one)."""

from __future__ import annotations

import asyncio
import base64
from importlib import resources

import pytest
from scrapy import Request
from scrapy.downloadermiddlewares.httpproxy import HttpProxyMiddleware
from scrapy.http import HtmlResponse, TextResponse
from scrapy.utils.test import get_crawler

from cannaspider import settings as project_settings
from cannaspider.middlewares.stealth import StealthProxyMiddleware
from cannaspider.stealth.browser import IDENTITY_META, VERSION_META, BrowserIdentityFactory
from cannaspider.stealth.identity import IdentityError, coherence_problems
from cannaspider.stealth.proxies import FailureRule, ProxyRecord
from cannaspider.stealth.routing import ProxyBlocked

URL = "http://127.0.0.1:1/api-3/graphql?operationName=FilteredProducts"
BLOCK_PAGE = resources.files("sandbox").joinpath("cloudflare_403.html").read_bytes()
WITH_AUTH = ProxyRecord(1, "http", "10.0.0.1", 3128, "scout", "pa55@w0rd")
NO_AUTH = ProxyRecord(2, "http", "10.0.0.2", 3128)


def middleware(*records: ProxyRecord, retries: int = 3) -> StealthProxyMiddleware:
    settings = {k: getattr(project_settings, k) for k in dir(project_settings) if k.startswith("STEALTH_")}
    # the proxy pools and the crawl's task drain are the crawler's extensions (settings.py), as in a crawl
    used = ("cannaspider.stealth.pool.ProxyPools", "cannaspider.tasks.drain.CrawlDrain")
    extensions = {name: project_settings.EXTENSIONS[name] for name in used}
    crawler = get_crawler(settings_dict={**settings, "STEALTH_BLOCK_RETRIES": retries, "EXTENSIONS": extensions})
    mw = StealthProxyMiddleware.from_crawler(crawler)
    mw.pool.records = {r.id: r for r in records}
    mw.pool.states.sync(set(mw.pool.records))
    mw.pool.loaded = True  # the table is not read here (tests/stealth/test_pool.py reads it)
    return mw


def send(mw: StealthProxyMiddleware, proxy_mw: HttpProxyMiddleware, request: Request) -> Request:
    asyncio.run(mw.process_request(request))
    proxy_mw.process_request(request)
    return request


def blocked(request: Request) -> HtmlResponse:
    return HtmlResponse(request.url, status=403, body=BLOCK_PAGE, request=request)


def test_a_retry_through_another_proxy_never_carries_the_first_ones_credentials():
    mw, proxy_mw = middleware(WITH_AUTH, NO_AUTH), HttpProxyMiddleware()
    first = Request(URL, meta={"graphql_operation": "FilteredProducts"})
    mw.pool.choose = lambda avoid=frozenset(), browser=False: WITH_AUTH if WITH_AUTH.id not in avoid else NO_AUTH  # type: ignore[method-assign]
    send(mw, proxy_mw, first)
    assert first.meta["proxy"] == "http://10.0.0.1:3128"  # HttpProxyMiddleware took the credentials out
    assert first.headers[b"Proxy-Authorization"] == b"Basic " + base64.b64encode(b"scout:pa55@w0rd")
    retry = mw.process_response(first, blocked(first))
    assert isinstance(retry, Request)
    send(mw, proxy_mw, retry)
    assert retry.meta["proxy"] == "http://10.0.0.2:3128"
    assert b"Proxy-Authorization" not in retry.headers  # not leaked to the other proxy
    assert mw.stats.get_value("cannaspider/stealth_sessions") == 2  # a new identity with the new proxy
    # and back to the proxy with credentials: its own header again
    again = mw.process_response(retry, blocked(retry))
    mw.pool.choose = lambda avoid=frozenset(), browser=False: WITH_AUTH  # type: ignore[method-assign]
    send(mw, proxy_mw, again)
    assert again.headers[b"Proxy-Authorization"] == b"Basic " + base64.b64encode(b"scout:pa55@w0rd")


def test_after_the_last_retry_the_blocked_response_goes_to_the_errback_not_the_callback():
    mw, proxy_mw = middleware(WITH_AUTH, retries=1), HttpProxyMiddleware()
    request = send(mw, proxy_mw, Request(URL, meta={"graphql_operation": "FilteredProducts"}))
    retry = mw.process_response(request, blocked(request))
    assert isinstance(retry, Request)
    send(mw, proxy_mw, retry)
    with pytest.raises(ProxyBlocked, match="blocked: HTTP 403 Cloudflare block page.*still after 1 retries"):
        mw.process_response(retry, blocked(retry))
    ok = send(mw, proxy_mw, Request(URL, meta={"graphql_operation": "FilteredProducts"}))
    response = TextResponse(URL, status=200, body=b'{"data":{}}', request=ok)
    assert mw.process_response(ok, response) is response


def test_requests_that_are_not_dutchies_api_are_left_alone():
    mw = middleware(WITH_AUTH)
    request = Request("http://127.0.0.1:1/some-store-site")
    asyncio.run(mw.process_request(request))
    assert "proxy" not in request.meta and b"Sec-Ch-Ua" not in request.headers


def test_when_no_identity_can_be_generated_the_crawl_stops_with_an_alert(monkeypatch, caplog):
    mw = middleware(WITH_AUTH)

    def broken(*_args, **_kwargs):
        raise IdentityError("no coherent chrome mobile identity after 25 draws: …")

    monkeypatch.setattr(mw.sessions.identities, "draw", broken)
    with pytest.raises(ProxyBlocked, match="identity generation failed"):
        asyncio.run(mw.process_request(Request(URL, meta={"graphql_operation": "FilteredProducts"})))
    assert any(
        r.levelname == "CRITICAL" and r.getMessage().startswith("ALERT: identity generation failed")
        for r in caplog.records
    )
    assert str(mw.stats.get_value("cannaspider/fatal_error")).startswith("ALERT: identity generation failed")
    # no fallback: every later Dutchie request fails at once, without a proxy or an identity
    later = Request(URL, meta={"graphql_operation": "FilteredProducts"})
    with pytest.raises(ProxyBlocked, match="not sent"):
        asyncio.run(mw.process_request(later))
    assert "proxy" not in later.meta


# --- browser pages ----------------------------------------------------------------------------------
SITE = "http://127.0.0.1:1/sites/some-store/"


def browser_middleware(*records: ProxyRecord, **kwargs) -> StealthProxyMiddleware:
    mw = middleware(*records, **kwargs)
    mw.sessions.browsers = BrowserIdentityFactory("156.0.8078.114")  # the launched Chromium's (read once per crawl)
    return mw


def page(**meta) -> Request:
    return Request(SITE, meta={"playwright": True, "point": "store-1", **meta})


def test_a_browser_page_goes_through_a_context_of_its_proxy_with_the_credentials_inside_only():
    mw, proxy_mw = browser_middleware(WITH_AUTH), HttpProxyMiddleware()
    request = send(mw, proxy_mw, page())
    meta = request.meta
    who = meta[IDENTITY_META]
    assert meta["playwright_context"] == f"stealth-proxy1-{who.key}"
    kwargs = meta["playwright_context_kwargs"]
    assert kwargs["proxy"] == {"server": "http://10.0.0.1:3128", "username": "scout", "password": "pa55@w0rd"}
    assert kwargs["user_agent"] == who.user_agent and "Chrome/156.0.0.0" in who.user_agent
    assert coherence_problems(who.identity()) == []
    # the browser talks to the proxy: Scrapy adds no proxy and no Proxy-Authorization to pass on
    assert meta["proxy"] is None and b"Proxy-Authorization" not in request.headers
    assert meta["playwright_page_init_callback"] == mw.pages.contexts.init_page
    # the store's API requests: the same proxy, the same Chrome
    api = send(mw, proxy_mw, Request(URL, meta={"graphql_operation": "ConsumerDispensaries", "point": "store-1"}))
    assert api.meta["proxy"] == "http://10.0.0.1:3128"
    assert api.headers[b"User-Agent"].decode() == who.user_agent
    assert api.headers[b"Sec-Ch-Ua"].decode() == who.client_hints()["sec-ch-ua"]
    # and the next page of that store: the same context
    assert send(mw, proxy_mw, page()).meta["playwright_context"] == meta["playwright_context"]


def test_a_blocked_browser_page_counts_on_its_proxy_and_retries_with_another_proxy_and_identity():
    mw, proxy_mw = browser_middleware(WITH_AUTH, NO_AUTH), HttpProxyMiddleware()
    mw.pool.choose = lambda avoid=frozenset(), browser=False: WITH_AUTH if WITH_AUTH.id not in avoid else NO_AUTH  # type: ignore[method-assign]
    first = send(mw, proxy_mw, page())
    first.meta[VERSION_META] = "156.0.8078.114"  # what the page init callback reports
    retry = mw.process_response(first, blocked(first))
    assert isinstance(retry, Request)
    assert mw.pool.pending[WITH_AUTH.id].failures == 1 and "Cloudflare block page" in mw.pool.pending[1].last_error
    assert not any(k in retry.meta for k in ("playwright_context", "playwright_context_kwargs", IDENTITY_META))
    send(mw, proxy_mw, retry)
    assert retry.meta["playwright_context"].startswith("stealth-proxy2-")
    assert retry.meta["playwright_context_kwargs"]["proxy"] == {"server": "http://10.0.0.2:3128"}
    assert retry.meta[IDENTITY_META] != first.meta[IDENTITY_META]  # a new identity with the new proxy
    ok = HtmlResponse(SITE, status=200, body=b"<html><body>menu</body></html>", request=retry)
    assert mw.process_response(retry, ok) is ok
    assert mw.pool.pending[NO_AUTH.id].successes == 1


def test_a_proxy_error_on_a_browser_page_rotates_and_a_pool_left_empty_stops_the_crawl(caplog):
    mw, proxy_mw = browser_middleware(WITH_AUTH, retries=3), HttpProxyMiddleware()
    mw.pool.rule = FailureRule(max_failures=1, window=20)
    request = send(mw, proxy_mw, page())
    refused = HtmlResponse(SITE, status=407, body=b"<html></html>", request=request)
    with pytest.raises(ProxyBlocked, match="HTTP 407.*no active proxy left"):
        mw.process_response(request, refused)
    assert any(r.levelname == "CRITICAL" and r.getMessage().startswith("ALERT: every proxy") for r in caplog.records)
    with pytest.raises(ProxyBlocked, match="not sent"):
        asyncio.run(mw.process_request(page(point="store-2")))


def test_a_page_rendered_by_another_chromium_than_the_identity_claims_stops_the_crawl(caplog):
    mw, proxy_mw = browser_middleware(WITH_AUTH), HttpProxyMiddleware()
    request = send(mw, proxy_mw, page())
    request.meta[VERSION_META] = "150.0.7000.1"
    ok = HtmlResponse(SITE, status=200, body=b"<html></html>", request=request)
    with pytest.raises(ProxyBlocked, match="the browser is Chromium 150.0.7000.1, the identity Chrome 156"):
        mw.process_response(request, ok)
    assert str(mw.stats.get_value("cannaspider/fatal_error")).startswith("ALERT: identity generation failed")


def test_requests_in_flight_blocked_at_the_same_moment_are_one_failure_of_their_proxy():
    """Was: five concurrent failures counted as five in a row, deactivating the proxy at once."""
    mw, proxy_mw = middleware(WITH_AUTH, NO_AUTH), HttpProxyMiddleware()
    mw.pool.choose = lambda avoid=frozenset(), browser=False: WITH_AUTH if WITH_AUTH.id not in avoid else NO_AUTH  # type: ignore[method-assign]
    stores = [Request(URL, meta={"graphql_operation": "FilteredProducts", "dispensary_id": n}) for n in range(5)]
    in_flight = [send(mw, proxy_mw, request) for request in stores]  # five stores' pages via the same proxy
    retries = [mw.process_response(request, blocked(request)) for request in in_flight]
    assert all(isinstance(r, Request) for r in retries)  # each rotated to another proxy
    assert mw.pool.is_active(WITH_AUTH.id) and mw.pool.attempts[WITH_AUTH.id] == "F"
    assert mw.pool.pending[WITH_AUTH.id].failures == 1
    assert mw.stats.get_value("cannaspider/proxy_failures_in_one_event") == 4


SOCKS_AUTH = ProxyRecord(3, "socks5h", "10.0.0.3", 1080, "scout", "pa:ss")


def test_a_store_whose_crawl_began_on_a_socks5_proxy_with_a_password_moves_for_its_pages():
    """Chromium cannot use that proxy: the page goes to one it can, and the store's API requests
    follow (one session per store), with nothing recorded against the SOCKS proxy."""
    mw, proxy_mw = browser_middleware(SOCKS_AUTH), HttpProxyMiddleware()
    api = send(mw, proxy_mw, Request(URL, meta={"graphql_operation": "ConsumerDispensaries", "point": "store-1"}))
    assert api.meta["proxy"] == "socks5h://10.0.0.3:1080"  # curl's: credentials in Proxy-Authorization
    mw.pool.records[NO_AUTH.id] = NO_AUTH  # an http proxy joins the pool (a table re-read)
    mw.pool.states.sync(set(mw.pool.records))
    assert api.headers[b"Proxy-Authorization"] == b"Basic " + base64.b64encode(b"scout:pa:ss")
    for _ in range(20):  # whatever the pool's random pick
        request = send(mw, proxy_mw, page())
        assert request.meta["playwright_context_kwargs"]["proxy"] == {"server": "http://10.0.0.2:3128"}
    after = send(mw, proxy_mw, Request(URL, meta={"graphql_operation": "ConsumerDispensaries", "point": "store-1"}))
    assert after.meta["proxy"] == "http://10.0.0.2:3128"
    assert SOCKS_AUTH.id not in mw.pool.pending


def test_a_page_with_only_socks5_proxies_with_a_password_fails_with_the_reason(caplog):
    mw, proxy_mw = browser_middleware(SOCKS_AUTH), HttpProxyMiddleware()
    why = "no proxy of the pool can carry a browser page: Chromium does not support socks5 proxies with a password"
    for point in ("store-1", "store-2"):
        with pytest.raises(ProxyBlocked, match=why):
            send(mw, proxy_mw, page(point=point))
    assert [r.levelname for r in caplog.records if why in r.getMessage()] == ["WARNING"]  # once a crawl
    assert mw.stats.get_value("cannaspider/fatal_error") is None  # no alert: the API requests go on
    api = send(mw, proxy_mw, Request(URL, meta={"graphql_operation": "ConsumerDispensaries", "point": "store-1"}))
    assert api.meta["proxy"] == "socks5h://10.0.0.3:1080" and not mw.pool.pending


def test_without_chromium_a_browser_page_fails_alone_and_nothing_stops(tmp_path, caplog):
    """No executable at CHROMIUM_PATH: the page fails with the reason before a proxy or an identity is
    drawn (drawing one reads the browser's version, whose failure would stop the crawl); the store's
    API requests and every other request go on."""
    from cannaspider.stealth.browser_pages import ChromiumNotFound

    mw = middleware(WITH_AUTH)
    mw.browser_path = str(tmp_path / "chromium")
    for _ in range(2):
        with pytest.raises(ChromiumNotFound, match=r"^Chromium not found at CHROMIUM_PATH \(.*/chromium\)$"):
            asyncio.run(mw.process_request(page()))
    assert mw.sessions.by_key == {} and mw.sessions.browsers is None and mw.stop.reason is None
    assert mw.stats.get_value("cannaspider/browser_missing") == 2
    assert (
        sum("the stores whose menu is on their own website are not rendered" in r.getMessage() for r in caplog.records)
        == 1
    )
    api = send(
        mw, HttpProxyMiddleware(), Request(URL, meta={"graphql_operation": "FilteredProducts", "point": "store-1"})
    )
    assert api.meta["proxy"] == "http://10.0.0.1:3128"
