"""Every Dutchie request through a proxy of the pool, with the browser identity of its store's
stealth session; blocks rotate both and retry the page (see docs/stealth.md).

Builds on scrapy-rotating-proxies (its pool states, backoff and ban policy: stealth/pool.py,
stealth/policy.py) with its defects fixed:
- proxies are known by their row id, not their URL string, and `meta["proxy"]` carries the
  chosen proxy's credentials on every attempt, so HttpProxyMiddleware (750) rebuilds
  Proxy-Authorization for that proxy on retries instead of keeping or dropping another's
  (stealth/routing.py);
- blocks are judged on the decompressed body: this middleware sits at 555, below
  HttpCompressionMiddleware (590), and below RetryAfterMiddleware (560) so only a 429 past its
  bound is a block; above RetryMiddleware (550), so a dead proxy is rotated at once;
- a block is retried STEALTH_BLOCK_RETRIES times with another proxy and a new identity, then the
  request fails with ProxyBlocked (an IgnoreRequest): the banned response never reaches a
  callback, the spider's errback ends that store's crawl as incomplete;
- when no active proxy is left (or no identity can be generated) the crawl stops with an ALERT
  line instead of cycling through dead proxies forever: every Dutchie request still queued then
  fails at once with ProxyBlocked, so each store's crawl run closes as incomplete (none is left
  'running') and the spider closes for lack of work; our periodic work is an asyncio task ended
  at close, so SIGINT stops the crawl as usual. A spider draining its queue first gives its
  tasks back and claims no more (stealth/stopping.py); with follow=1 it does not stop: it waits
  for an active proxy in the table and goes on.

A session (proxy + identity) is per store crawl: keyed by the request's `store_crawl` or
`dispensary_id` meta (the search point for store discovery). It lasts until a failure rotates it,
or its proxy leaves the pool (stealth/sessions.py).

Browser pages (meta `playwright`: a store's own website, rendered by scrapy-playwright) take their
proxy from the same sessions and go through a browser context per proxy and identity
(stealth/browser_pages.py); their identity is a Chrome of the launched Chromium's version
(stealth/browser.py). Blocks and errors on them count, rotate and stop exactly as for HTTP
requests (the same code below). Without Chromium at CHROMIUM_PATH a browser page fails alone with
ChromiumNotFound (stealth/browser_pages.py), before any proxy or identity is drawn. Stopping
and waiting out an empty pool: stealth/stopping.py.

A request may name another pool of the `proxies` table (meta `proxy_pool`: product images take
IMAGES_PROXY_POOL's, docs/stealth.md "Proxy pools"): it goes through a proxy of that pool, in a
session of that pool per store, and never counts on the proxy's health (images do not); a pool
with no active proxy fails that request alone (ProxyBlocked, stat
`cannaspider/stealth_no_proxy/<pool>`), never the crawl.
"""

from __future__ import annotations

import logging
import time

from scrapy import Request, signals
from scrapy.crawler import Crawler
from scrapy.http import Response

from cannaspider.stealth.browser import IDENTITY_META, VERSION_META, BrowserIdentity
from cannaspider.stealth.browser_pages import (
    MISSING_STAT,
    BrowserPages,
    ChromiumNotFound,
    browser_path,
    chromium_not_found,
)
from cannaspider.stealth.identity import IdentityError, IdentityFactory
from cannaspider.stealth.locales import StoreLocales
from cannaspider.stealth.policy import PROXY_ERROR, BlockPolicy
from cannaspider.stealth.pool import ProxyPool
from cannaspider.stealth.proxies import CRAWL_POOL, ProxyRecord
from cannaspider.stealth.routing import (
    BROWSER_ATTEMPT_META,
    PIN_META,
    PROXY_META,
    RETRIES_META,
    SENT_META,
    TRIED_BROWSERS_META,
    TRIED_META,
    ProxyBlocked,
    applies,
    counts_on_proxy,
    is_browser_page,
    session_key,
    wear,
)
from cannaspider.stealth.sessions import Session, Sessions
from cannaspider.stealth.stopping import StealthStop
from cannaspider.stealth.tls import impersonate_target

logger = logging.getLogger(__name__)


class StealthProxyMiddleware:
    def __init__(self, crawler: Crawler, *, max_retries: int) -> None:
        """`max_retries`: STEALTH_BLOCK_RETRIES (from_crawler)."""
        self.crawler = crawler
        assert crawler.stats is not None
        self.stats = crawler.stats
        self.pool = ProxyPool.for_crawler(crawler)
        self.policy = BlockPolicy()
        self.max_retries = max_retries
        # the Chromium scrapy-playwright launches (its version makes the browser identities)
        self.browser_path = browser_path(crawler.settings)
        self.sessions = Sessions(self.pool, StoreLocales(crawler), self.stats, self.browser_path)
        self.other_pools: dict[str, Sessions] = {}  # a pool named by a request's meta `proxy_pool`
        self.pages = BrowserPages(self.sessions)
        # after an outage every session was on a proxy that left the pool
        self.stop = StealthStop(crawler, self.pool, on_resume=self.sessions.clear)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> StealthProxyMiddleware:
        mw = cls(crawler, max_retries=crawler.settings.getint("STEALTH_BLOCK_RETRIES"))
        crawler.signals.connect(mw.spider_closed, signal=signals.spider_closed)
        try:  # loading browserforge's networks takes a moment: before the crawl, not on its first page
            mw.sessions.identities = IdentityFactory()
        except IdentityError:
            pass  # the first request tries again and stops the crawl with the alert
        return mw

    def spider_closed(self) -> None:
        self.sessions.clear()
        self.pages.clear()

    # -- request -----------------------------------------------------------------------------
    async def process_request(self, request: Request) -> None:
        if not applies(request):
            return None
        if self.stop.reason is not None:
            raise ProxyBlocked(f"not sent: {self.stop.reason}")
        pool_name = request.meta.get("proxy_pool") or CRAWL_POOL
        if pool_name != CRAWL_POOL:
            return await self._other_pool(request, pool_name)
        if not self.pool.loaded:
            await self.pool.ensure_loaded()
        key = session_key(request)
        pinned: ProxyRecord | None = request.meta.get(PIN_META)
        browser = is_browser_page(request)
        if browser and (missing := chromium_not_found(self.browser_path)) is not None:
            raise self._no_chromium(missing)  # this page only: drawing its identity would stop the crawl
        try:
            session = await self.sessions.pinned(pinned, key) if pinned is not None else self.sessions.live(key)
            if browser and session is not None and session.proxy.browser_refusal is not None:
                session = None  # the store's crawl moves to a proxy its pages can use too
            session = session or await self._new_session(request, key, browser)
            if browser:
                await self.pages.route(request, key, session)
                return None
        except IdentityError as exc:
            raise self._identity_failed(exc) from None
        self._send(request, session)
        return None

    async def _other_pool(self, request: Request, name: str) -> None:
        """A request through another pool of the table (product images' IMAGES_PROXY_POOL)."""
        sessions = self.other_pools.get(name)
        if sessions is None:
            pool = ProxyPool.for_crawler(self.crawler, name)
            sessions = self.other_pools[name] = Sessions(pool, self.sessions.locales, self.stats, self.browser_path)
            sessions.identities = self.sessions.identities  # browserforge's networks, loaded once
        if not sessions.pool.loaded:
            await sessions.pool.ensure_loaded()
        key = session_key(request)
        try:
            session = sessions.live(key) or await sessions.new(request, key, avoid=set())
        except IdentityError as exc:
            raise self._identity_failed(exc) from None
        if session is None:
            self.stats.inc_value(f"cannaspider/stealth_no_proxy/{name}")
            raise ProxyBlocked(f"no active proxy in the {name!r} pool")
        self._send(request, session)

    def _send(self, request: Request, session: Session) -> None:
        """The request goes through the session's proxy, wearing its identity."""
        request.meta["proxy"] = session.proxy.url  # with its credentials: HttpProxyMiddleware's input
        request.meta[PROXY_META] = session.proxy.id
        request.meta[SENT_META] = time.monotonic()
        # one slot per proxy (its concurrency); a kind of request may ask for its own (images)
        slot = request.meta.get("stealth_slot")
        request.meta["download_slot"] = f"{slot}-proxy-{session.proxy.id}" if slot else f"proxy-{session.proxy.id}"
        # the identity's browser's TLS/HTTP2 handshake (stealth/tls.py, when it is the http handler)
        request.meta["impersonate"] = impersonate_target(session.identity)
        # no Proxy-Authorization left by another proxy's attempt: HttpProxyMiddleware writes this
        # proxy's from meta["proxy"] (stealth/routing.py)
        wear(request, session.identity)

    async def _new_session(self, request: Request, key: object, browser: bool) -> Session:
        avoid = set(request.meta.get(TRIED_META, ()))
        session = await self.sessions.new(request, key, avoid=avoid, browser=browser)
        if session is None and browser and self.pool.records:
            raise self._no_browser_proxy()
        if session is None:
            self.stop.pool_empty("no active proxy left in the proxies table")
            raise ProxyBlocked("no active proxy left")
        return session

    def _no_browser_proxy(self) -> ProxyBlocked:
        """Every active proxy is one Chromium cannot use: the page fails with the reason (once in
        the log as a warning), the proxies are not blamed, the crawl's other requests go on."""
        refusals = sorted({r.browser_refusal for r in self.pool.records.values() if r.browser_refusal})
        why = f"no proxy of the pool can carry a browser page: {'; '.join(refusals)}"
        if not self.stats.get_value("cannaspider/stealth_browser_no_proxy"):
            logger.warning("%s (add an http(s) proxy, or a socks5 one without a password)", why)
        self.stats.inc_value("cannaspider/stealth_browser_no_proxy")
        return ProxyBlocked(why)

    def _no_chromium(self, missing: ChromiumNotFound) -> ChromiumNotFound:
        """No browser on this node: the page fails with the reason (once in the log as a warning),
        no proxy is chosen or blamed, the crawl's other requests go on."""
        if not self.stats.get_value(MISSING_STAT):
            logger.warning("%s: the stores whose menu is on their own website are not rendered", missing)
        self.stats.inc_value(MISSING_STAT)
        return missing

    def _identity_failed(self, exc: IdentityError) -> ProxyBlocked:
        self.stop.stop(f"identity generation failed: {exc}")
        return ProxyBlocked(f"identity generation failed: {exc}")

    # -- outcome -----------------------------------------------------------------------------
    def process_response(self, request: Request, response: Response) -> Request | Response:
        proxy_id = request.meta.get(PROXY_META)
        if proxy_id is None or not applies(request) or not counts_on_proxy(request):
            return response
        self._check_browser(request)
        verdict = self.policy.judge(request, response)
        if verdict is None:
            self.pool.record_success(proxy_id, request.meta.get("download_latency"))
            return response
        if verdict.kind == PROXY_ERROR:  # the proxy's own answer, not the API's: no Cloudflare block
            self.stats.inc_value(f"cannaspider/stealth_proxy_answers/{response.status}")
            self.stats.inc_value("cannaspider/stealth_proxy_errors")
        else:
            self.stats.inc_value(f"cannaspider/stealth_blocks/{response.status}")
            # per proxy (by its row id, never its URL: no credentials in stats), for the crawl-health monitor
            self.stats.inc_value(f"cannaspider/proxy/{proxy_id}/blocked")
        return self._rotate(request, proxy_id, verdict.reason)

    def process_exception(self, request: Request, exception: BaseException) -> Request | None:
        proxy_id = request.meta.get(PROXY_META)
        if (
            proxy_id is None
            or not applies(request)
            or not counts_on_proxy(request)
            or not self.policy.exception_is_ban(request, exception)
        ):
            return None
        self._check_browser(request)
        self.stats.inc_value("cannaspider/stealth_proxy_errors")
        return self._rotate(request, proxy_id, f"{exception.__class__.__name__}: {exception}")

    def _rotate(self, request: Request, proxy_id: int, reason: str) -> Request:
        self.pool.record_failure(proxy_id, reason, request.meta.get(SENT_META))
        if request.meta.get(PIN_META) is not None:
            raise ProxyBlocked(reason)
        # the next attempt of any request of this store: new proxy, new identity
        self.sessions.forget(session_key(request), proxy_id)
        if not self.pool.records:
            self.stop.pool_empty(f"every proxy of the pool is deactivated (last failure: {reason})")
            raise ProxyBlocked(f"{reason}; no active proxy left")
        retries = request.meta.get(RETRIES_META, 0)
        if retries >= self.max_retries:
            self.stats.inc_value("cannaspider/stealth_gave_up")
            raise ProxyBlocked(f"{reason} (still after {retries} retries with other proxies and identities)")
        logger.info("%s via proxy #%s: rotating proxy and identity (retry %d)", reason, proxy_id, retries + 1)
        meta = {k: v for k, v in request.meta.items() if k not in (PROXY_META, "download_slot", *BROWSER_ATTEMPT_META)}
        meta[RETRIES_META] = retries + 1
        meta[TRIED_META] = (*request.meta.get(TRIED_META, ()), proxy_id)
        burnt: BrowserIdentity | None = request.meta.get(IDENTITY_META)
        if burnt is not None:
            meta[TRIED_BROWSERS_META] = (*request.meta.get(TRIED_BROWSERS_META, ()), burnt.key)
        return request.replace(meta=meta, dont_filter=True)

    def _check_browser(self, request: Request) -> None:
        """The page was rendered by the browser its identity claims (the launched one's version)."""
        identity: BrowserIdentity | None = request.meta.get(IDENTITY_META)
        version: str | None = request.meta.get(VERSION_META)
        if identity is None or version is None or version.split(".")[0] == str(identity.major):
            return
        why = f"identity generation failed: the browser is Chromium {version}, the identity Chrome {identity.major}"
        self.stop.stop(why)
        raise ProxyBlocked(why)
