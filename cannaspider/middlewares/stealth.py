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
  at close, so SIGINT stops the crawl as usual.

A session (proxy + identity) is per store crawl: keyed by the request's `store_crawl` or
`dispensary_id` meta (the search point for store discovery). It lasts until a failure rotates it,
or its proxy leaves the pool.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from rotating_proxies.middlewares import RotatingProxyMiddleware
from scrapy import Request, signals
from scrapy.crawler import Crawler
from scrapy.exceptions import IgnoreRequest
from scrapy.http import Response

from cannaspider.db.crawl_store import FATAL_ERROR_STAT, CrawlStore
from cannaspider.stealth.identity import Identity, IdentityError, IdentityFactory
from cannaspider.stealth.policy import BlockPolicy
from cannaspider.stealth.pool import ProxyPool
from cannaspider.stealth.proxies import ProxyRecord
from cannaspider.stealth.tls import impersonate_target

logger = logging.getLogger(__name__)

PROXY_META = "stealth_proxy_id"
RETRIES_META = "stealth_retries"
TRIED_META = "stealth_tried"  # ids of the proxies that already failed this request
PIN_META = "stealth_pinned_proxy"  # a ProxyRecord: this proxy only, no rotation (`scrapy proxies check`)


class ProxyBlocked(IgnoreRequest):
    """A page stayed blocked through every retry (or no proxy is left)."""


@dataclass
class Session:
    proxy: ProxyRecord
    identity: Identity


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


def applies(request: Request) -> bool:
    """Dutchie's API: every GraphQL request (and any request that asks with meta `stealth`)."""
    return "graphql_operation" in request.meta or bool(request.meta.get("stealth"))


class StealthProxyMiddleware(RotatingProxyMiddleware):
    def __init__(self, crawler: Crawler, *, max_retries: int):  # noqa: D107 - the base's needs a proxy list
        self.crawler = crawler
        self.stats = crawler.stats
        self.pool = ProxyPool.for_crawler(crawler)
        self.policy = BlockPolicy()
        self.max_proxies_to_try = max_retries
        self.sessions: dict[object, Session] = {}
        self.locales: dict[int, tuple[str | None, str | None]] = {}
        self._identities: IdentityFactory | None = None
        self.stopped: str | None = None  # why the crawl stopped (the alert), once it did

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
        if pinned is not None:
            session = Session(pinned, self._draw_identity(*await self._locale(key)))
        elif session is None or not self.pool.is_active(session.proxy.id):
            session = await self._new_session(request, key, avoid=set(request.meta.get(TRIED_META, ())))
        request.meta["proxy"] = session.proxy.url
        request.meta[PROXY_META] = session.proxy.id
        request.meta["download_slot"] = f"proxy-{session.proxy.id}"
        # the identity's browser's TLS/HTTP2 handshake (stealth/tls.py, when it is the http handler)
        request.meta["impersonate"] = impersonate_target(session.identity)
        # HttpProxyMiddleware derives Proxy-Authorization from this proxy's URL: a header left by
        # another proxy's attempt must not reach this one
        request.meta.pop("_auth_proxy", None)
        own = [
            (k.decode("latin-1"), v[-1].decode("latin-1"))
            for k, v in request.headers.items()
            if v and k.lower() != b"proxy-authorization"
        ]
        request.headers.clear()
        for name, value in session.identity.apply(own):
            request.headers[name] = value
        return None

    async def _new_session(self, request: Request, key: object, avoid: set[int]) -> Session:
        proxy = self.pool.choose(avoid=avoid)
        if proxy is None:
            self._stop("no active proxy left in the proxies table")
            raise ProxyBlocked("no active proxy left")
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
        if proxy_id is None or not applies(request):
            return response
        reason = self.policy.block_reason(request, response)
        if reason is None:
            self.pool.record_success(proxy_id, request.meta.get("download_latency"))
            return response
        self.stats.inc_value(f"cannaspider/stealth_blocks/{response.status}")
        # per proxy (by its row id, never its URL: no credentials in stats), for the crawl-health monitor
        self.stats.inc_value(f"cannaspider/proxy/{proxy_id}/blocked")
        return self._rotate(request, proxy_id, reason)

    def process_exception(self, request: Request, exception: BaseException) -> Request | None:
        proxy_id = request.meta.get(PROXY_META)
        if proxy_id is None or not applies(request) or not self.policy.exception_is_ban(request, exception):
            return None
        self.stats.inc_value("cannaspider/stealth_proxy_errors")
        return self._rotate(request, proxy_id, f"{exception.__class__.__name__}: {exception}")

    def _rotate(self, request: Request, proxy_id: int, reason: str) -> Request:
        self.pool.record_failure(proxy_id, reason)
        if request.meta.get(PIN_META) is not None:
            raise ProxyBlocked(reason)
        key = session_key(request)
        current = self.sessions.get(key)
        if current is not None and current.proxy.id == proxy_id:
            del self.sessions[key]  # the next attempt of any request of this store: new proxy, new identity
        if not self.pool.records:
            self._stop(f"every proxy of the pool is deactivated (last failure: {reason})")
            raise ProxyBlocked(f"{reason}; no active proxy left")
        retries = request.meta.get(RETRIES_META, 0)
        if retries >= self.max_proxies_to_try:
            self.stats.inc_value("cannaspider/stealth_gave_up")
            raise ProxyBlocked(f"{reason} (still after {retries} retries with other proxies and identities)")
        logger.info("%s via proxy #%s: rotating proxy and identity (retry %d)", reason, proxy_id, retries + 1)
        meta = {k: v for k, v in request.meta.items() if k not in (PROXY_META, "download_slot")}
        meta[RETRIES_META] = retries + 1
        meta[TRIED_META] = (*request.meta.get(TRIED_META, ()), proxy_id)
        return request.replace(meta=meta, dont_filter=True)

    def _stop(self, why: str) -> None:
        """failure = alert + stop: no fallback to a direct connection or a default identity."""
        if self.stopped is not None:
            return
        self.stopped = why
        message = f"ALERT: {why}: stopping the crawl (crawls in progress end incomplete)"
        logger.critical(message)
        if self.stats.get_value(FATAL_ERROR_STAT) is None:
            self.stats.set_value(FATAL_ERROR_STAT, message)
