"""Every Dutchie request through a proxy of the pool, with the browser identity of its store's
stealth session; blocks rotate both and retry the page (see docs/stealth.md).

Builds on scrapy-rotating-proxies (its pool states, backoff and ban policy: stealth/pool.py,
stealth/policy.py) with its defects fixed:
- proxies are known by their row id, not their URL string, and `meta["proxy"]` carries the
  chosen proxy's credentials on every attempt, so HttpProxyMiddleware (750) rebuilds
  Proxy-Authorization for that proxy on retries instead of keeping or dropping another's;
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
  tasks back and claims no more (stealth/outage.py); with follow=1 it does not stop: it waits
  for an active proxy in the table and goes on.

A session (proxy + identity) is per store crawl: keyed by the request's `store_crawl` or
`dispensary_id` meta (the search point for store discovery). It lasts until a failure rotates it,
or its proxy leaves the pool.

Browser pages (meta `playwright`: a store's own website, rendered by scrapy-playwright) take their
proxy from the same sessions and go through a browser context per proxy and identity
(stealth/contexts.py), with the proxy's credentials in the context, never in a header or a name;
their identity is a Chrome of the launched Chromium's version (stealth/browser.py). Blocks and
errors on them count, rotate and stop exactly as for HTTP requests (the same code below).
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass

from rotating_proxies.middlewares import RotatingProxyMiddleware
from scrapy import Request, signals
from scrapy.crawler import Crawler
from scrapy.exceptions import IgnoreRequest
from scrapy.http import Response

from cannaspider.db.crawl_store import FATAL_ERROR_STAT, CrawlStore
from cannaspider.stealth.browser import BrowserIdentity, BrowserIdentityFactory, chromium_version
from cannaspider.stealth.contexts import IDENTITY_META, VERSION_META, BrowserContexts, context_name
from cannaspider.stealth.identity import Identity, IdentityError, IdentityFactory
from cannaspider.stealth.outage import PoolOutage
from cannaspider.stealth.policy import PROXY_ERROR, BlockPolicy
from cannaspider.stealth.pool import ProxyPool
from cannaspider.stealth.proxies import ProxyRecord
from cannaspider.stealth.tls import impersonate_target
from cannaspider.tasks.drain import TaskDrain

logger = logging.getLogger(__name__)

PROXY_META = "stealth_proxy_id"
RETRIES_META = "stealth_retries"
TRIED_META = "stealth_tried"  # ids of the proxies that already failed this request
TRIED_BROWSERS_META = "stealth_tried_browsers"  # keys of the browser identities that failed this page
SENT_META = "stealth_sent_at"  # time.monotonic() when this attempt left: the pool's failure events
PIN_META = "stealth_pinned_proxy"  # a ProxyRecord: this proxy only, no rotation (`scrapy proxies check`)
# what a browser attempt leaves in meta that the next attempt must not inherit
BROWSER_ATTEMPT_META = (
    "playwright_context",
    "playwright_context_kwargs",
    "playwright_page_init_callback",
    IDENTITY_META,
    VERSION_META,
)


class ProxyBlocked(IgnoreRequest):
    """A page stayed blocked through every retry (or no proxy is left)."""


@dataclass
class Session:
    proxy: ProxyRecord
    identity: Identity
    browser: BrowserIdentity | None = None  # drawn when the store's first browser page comes


def session_key(request: Request) -> object:
    meta = request.meta
    crawl = meta.get("store_crawl")
    if crawl is not None and getattr(crawl, "dispensary_id", None) is not None:
        return ("dispensary", crawl.dispensary_id)
    if meta.get("dispensary_id") is not None:
        return ("dispensary", meta["dispensary_id"])
    if meta.get("point") is not None:
        return ("point", meta["point"])
    return ("crawl",)


def wear(request: Request, identity: Identity) -> None:
    """The request's headers become the identity's (its own kept where the identity sets none),
    in the identity's order; no Proxy-Authorization is kept (HttpProxyMiddleware writes it)."""
    own = [
        (k.decode("latin-1"), v[-1].decode("latin-1"))
        for k, v in request.headers.items()
        if v and k.lower() != b"proxy-authorization"
    ]
    request.headers.clear()
    for name, value in identity.apply(own):
        request.headers[name] = value


def is_browser_page(request: Request) -> bool:
    return bool(request.meta.get("playwright"))


def applies(request: Request) -> bool:
    """Dutchie's API: every GraphQL request; every browser page (a store's own website); and any
    request that asks with meta `stealth`."""
    meta = request.meta
    return "graphql_operation" in meta or bool(meta.get("stealth")) or is_browser_page(request)


def counts_on_proxy(request: Request) -> bool:
    """Whether the answer judges the proxy (health, blocks, rotation). Images say no (meta
    `proxy_health` False): an image CDN that serves a proxy says nothing of its standing with the
    API, and its successes would reset the consecutive failures that deactivate a blocked proxy."""
    return request.meta.get("proxy_health", True) is not False


class StealthProxyMiddleware(RotatingProxyMiddleware):
    def __init__(self, crawler: Crawler, *, max_retries: int):  # not the base's: it needs a proxy list
        self.crawler = crawler
        self.stats = crawler.stats
        self.pool = ProxyPool.for_crawler(crawler)
        self.policy = BlockPolicy()
        self.max_proxies_to_try = max_retries
        self.sessions: dict[object, Session] = {}
        self.locales: dict[int, tuple[str | None, str | None]] = {}
        self._identities: IdentityFactory | None = None
        self._browsers: BrowserIdentityFactory | None = None
        self._browsers_lock: asyncio.Lock | None = None
        self.contexts = BrowserContexts()
        self.context_sessions: dict[str, object] = {}  # browser context name → the session key it serves
        launch = crawler.settings.getdict("PLAYWRIGHT_LAUNCH_OPTIONS")
        self.browser_path: str = launch.get("executable_path") or crawler.settings.get("CHROMIUM_PATH") or "chromium"
        self.stopped: str | None = None  # why the crawl stopped (the alert), or waits for a proxy
        self.outage = PoolOutage(crawler, self.pool)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> StealthProxyMiddleware:
        mw = cls(crawler, max_retries=crawler.settings.getint("STEALTH_BLOCK_RETRIES"))
        crawler.signals.connect(mw.spider_closed, signal=signals.spider_closed)
        try:  # loading browserforge's networks takes a moment: before the crawl, not on its first page
            mw._identities = IdentityFactory()
        except IdentityError:
            pass  # the first request tries again and stops the crawl with the alert
        return mw

    def spider_closed(self) -> None:
        self.sessions.clear()
        self.context_sessions.clear()  # scrapy-playwright closes the contexts with its browser

    # -- request -----------------------------------------------------------------------------
    async def process_request(self, request: Request) -> None:
        if not applies(request):
            return None
        if self.stopped is not None:
            raise ProxyBlocked(f"not sent: {self.stopped}")
        if not self.pool.loaded:
            await self.pool.ensure_loaded()
        key = session_key(request)
        pinned: ProxyRecord | None = request.meta.get(PIN_META)
        session = self.sessions.get(key)
        browser = is_browser_page(request)
        if pinned is not None:
            session = Session(pinned, self._draw_identity(*await self._locale(key)))
        elif session is None or not self.pool.is_active(session.proxy.id):
            avoid = set(request.meta.get(TRIED_META, ()))
            session = await self._new_session(request, key, avoid=avoid, browser=browser)
        if browser:
            await self._browser_page(request, key, session)
            return None
        request.meta["proxy"] = session.proxy.url
        request.meta[PROXY_META] = session.proxy.id
        request.meta[SENT_META] = time.monotonic()
        # one slot per proxy (its concurrency); a kind of request may ask for its own (images)
        slot = request.meta.get("stealth_slot")
        request.meta["download_slot"] = f"{slot}-proxy-{session.proxy.id}" if slot else f"proxy-{session.proxy.id}"
        # the identity's browser's TLS/HTTP2 handshake (stealth/tls.py, when it is the http handler)
        request.meta["impersonate"] = impersonate_target(session.identity)
        # HttpProxyMiddleware derives Proxy-Authorization from this proxy's URL: a header left by
        # another proxy's attempt must not reach this one
        request.meta.pop("_auth_proxy", None)
        wear(request, session.identity)
        return None

    async def _new_session(self, request: Request, key: object, avoid: set[int], browser: bool = False) -> Session:
        proxy = self.pool.choose(avoid=avoid)
        if proxy is None:
            self._pool_empty("no active proxy left in the proxies table")
            raise ProxyBlocked("no active proxy left")
        if browser:  # the store's API requests then present the same Chrome as its pages
            seen = await self._draw_browser(key, frozenset(request.meta.get(TRIED_BROWSERS_META, ())))
            session = Session(proxy, seen.identity(), seen)
        else:
            session = Session(proxy, self._draw_identity(*await self._locale(key)))
        self.sessions[key] = session
        self.stats.inc_value("cannaspider/stealth_sessions")
        who = session.identity
        logger.debug("session %s: proxy %s, %s %s on %s", key, proxy, who.browser, who.device, who.os)
        return session

    def _draw_identity(self, state: str | None, timezone: str | None) -> Identity:
        try:
            if self._identities is None:
                self._identities = IdentityFactory()
            return self._identities.draw(state, timezone)
        except IdentityError as exc:
            self._stop(f"identity generation failed: {exc}")
            raise ProxyBlocked(f"identity generation failed: {exc}") from None

    async def _draw_browser(self, key: object, avoid: frozenset[str] = frozenset()) -> BrowserIdentity:
        """A Chrome identity of the launched Chromium's version (read once per crawl)."""
        try:
            if self._browsers is None:
                if self._browsers_lock is None:
                    self._browsers_lock = asyncio.Lock()
                async with self._browsers_lock:
                    if self._browsers is None:
                        self._browsers = BrowserIdentityFactory(await chromium_version(self.browser_path))
            return self._browsers.draw(*await self._locale(key), avoid=avoid)
        except IdentityError as exc:
            self._stop(f"identity generation failed: {exc}")
            raise ProxyBlocked(f"identity generation failed: {exc}") from None

    async def _browser_page(self, request: Request, key: object, session: Session) -> None:
        """The page goes through the session's proxy in a context of its own proxy and identity."""
        if session.browser is None:  # the store's crawl began with HTTP requests
            session.browser = await self._draw_browser(key)
        name = context_name(session.proxy, session.browser)
        self.context_sessions[name] = key
        meta = request.meta
        meta["playwright_context"] = name
        meta["playwright_context_kwargs"] = session.browser.context_kwargs(session.proxy)
        meta["playwright_page_init_callback"] = self.contexts.init_page
        meta[IDENTITY_META] = session.browser
        meta[PROXY_META] = session.proxy.id
        meta[SENT_META] = time.monotonic()
        meta["download_slot"] = f"proxy-{session.proxy.id}"
        # the browser talks to the proxy itself: Scrapy's HttpProxyMiddleware must add nothing
        # (a Proxy-Authorization header would be sent on to the website)
        meta["proxy"] = None
        meta.pop("_auth_proxy", None)
        request.headers.pop(b"Proxy-Authorization", None)
        for closed in await self.contexts.sweep(self._context_in_use, keep=name):
            self.context_sessions.pop(closed, None)

    def _context_in_use(self, name: str) -> bool:
        """A store crawl still has this context: its session is that proxy and identity, and the
        proxy is in the pool."""
        session = self.sessions.get(self.context_sessions.get(name))
        return (
            session is not None
            and session.browser is not None
            and self.pool.is_active(session.proxy.id)
            and context_name(session.proxy, session.browser) == name
        )

    async def _locale(self, key: object) -> tuple[str | None, str | None]:
        """The store's state and time zone (Accept-Language); the spider's state otherwise."""
        spider_state = getattr(self.crawler.spider, "state", None)
        fallback = (spider_state if isinstance(spider_state, str) else None, None)
        if not (isinstance(key, tuple) and key[0] == "dispensary" and isinstance(key[1], int)):
            return fallback
        if key[1] not in self.locales:
            try:
                db = await CrawlStore.for_crawler(self.crawler).open()
                async with db.connection() as conn:
                    row = await (
                        await conn.execute("SELECT state, timezone FROM dispensaries WHERE id = %s", (key[1],))
                    ).fetchone()
                self.locales[key[1]] = (row[0], row[1]) if row else fallback
            except Exception:  # Accept-Language then follows the spider's state
                return fallback
        return self.locales[key[1]]

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
        key = session_key(request)
        current = self.sessions.get(key)
        if current is not None and current.proxy.id == proxy_id:
            del self.sessions[key]  # the next attempt of any request of this store: new proxy, new identity
        if not self.pool.records:
            self._pool_empty(f"every proxy of the pool is deactivated (last failure: {reason})")
            raise ProxyBlocked(f"{reason}; no active proxy left")
        retries = request.meta.get(RETRIES_META, 0)
        if retries >= self.max_proxies_to_try:
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
        self._stop(why)
        raise ProxyBlocked(why)

    def _pool_empty(self, why: str) -> None:
        """No proxy left: stop, or for a spider draining its queue with follow=1, wait for one
        (its tasks given back either way: stealth/outage.py)."""
        drain = TaskDrain.of(self.crawler)
        if drain is None or self.stopped is not None:
            self._stop(why)
            return
        if drain.config.follow:
            self.stopped = why
            self.stats.inc_value("cannaspider/proxy_outages")
            logger.critical(
                "ALERT: %s: the %s queue waits until a proxy is active again (crawls in progress end "
                "incomplete, their tasks go back to the queue)",
                why,
                drain.role,
            )
        else:
            self._stop(why)
        self.outage.begin(why, drain, on_end=self._resume)

    def _resume(self) -> None:
        self.stopped = None
        self.sessions.clear()  # every session was on a proxy that left the pool

    def _stop(self, why: str) -> None:
        """failure = alert + stop: no fallback to a direct connection or a default identity."""
        if self.stopped is not None:
            return
        self.stopped = why
        message = f"ALERT: {why}: stopping the crawl (crawls in progress end incomplete)"
        logger.critical(message)
        if self.stats.get_value(FATAL_ERROR_STAT) is None:
            self.stats.set_value(FATAL_ERROR_STAT, message)
