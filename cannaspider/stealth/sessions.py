"""Stealth sessions: the proxy and browser identity of each store crawl (docs/stealth.md).

A session is keyed by `routing.session_key` and lasts until a failure rotates it or its proxy
leaves the pool. Its identity is an HTTP one (stealth/identity.py) fitting the store's locale, or,
once the store's first browser page comes, a Chrome of the launched Chromium's version
(stealth/browser.py) that the store's API requests then present too. Drawing an identity may
raise IdentityError: the middleware stops the crawl on it (no fallback identity).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from scrapy import Request
from scrapy.statscollectors import StatsCollector

from cannaspider.stealth.browser import BrowserIdentity, BrowserIdentityFactory, chromium_version
from cannaspider.stealth.identity import Identity, IdentityFactory
from cannaspider.stealth.locales import StoreLocales
from cannaspider.stealth.pool import ProxyPool
from cannaspider.stealth.proxies import ProxyRecord
from cannaspider.stealth.routing import TRIED_BROWSERS_META

logger = logging.getLogger(__name__)


@dataclass
class Session:
    proxy: ProxyRecord
    identity: Identity
    browser: BrowserIdentity | None = None  # drawn when the store's first browser page comes


class Sessions:
    def __init__(self, pool: ProxyPool, locales: StoreLocales, stats: StatsCollector, browser_path: str) -> None:
        self.pool = pool
        self.locales = locales
        self.stats = stats
        self.browser_path = browser_path
        self.by_key: dict[object, Session] = {}
        self.identities: IdentityFactory | None = None
        self.browsers: BrowserIdentityFactory | None = None
        self._browsers_lock: asyncio.Lock | None = None

    def get(self, key: object) -> Session | None:
        return self.by_key.get(key)

    def live(self, key: object) -> Session | None:
        """The key's session while its proxy is still in the pool."""
        session = self.by_key.get(key)
        return session if session is not None and self.pool.is_active(session.proxy.id) else None

    async def pinned(self, proxy: ProxyRecord, key: object) -> Session:
        """A session of one given proxy, kept nowhere (`scrapy proxies check`)."""
        return Session(proxy, self.draw_identity(*await self.locales.of(key)))

    async def new(self, request: Request, key: object, avoid: set[int], browser: bool = False) -> Session | None:
        """A new proxy (not one of `avoid`) and identity for the key; None when no proxy is left
        (for a browser page: none that Chromium can use)."""
        proxy = self.pool.choose(avoid=avoid, browser=browser)
        if proxy is None:
            return None
        if browser:  # the store's API requests then present the same Chrome as its pages
            seen = await self.draw_browser(key, frozenset(request.meta.get(TRIED_BROWSERS_META, ())))
            session = Session(proxy, seen.identity(), seen)
        else:
            session = Session(proxy, self.draw_identity(*await self.locales.of(key)))
        self.by_key[key] = session
        self.stats.inc_value("cannaspider/stealth_sessions")
        who = session.identity
        logger.debug("session %s: proxy %s, %s %s on %s", key, proxy, who.browser, who.device, who.os)
        return session

    def forget(self, key: object, proxy_id: int) -> None:
        """The key's session is over if it is on this proxy: its next request gets a new proxy and
        a new identity."""
        current = self.by_key.get(key)
        if current is not None and current.proxy.id == proxy_id:
            del self.by_key[key]

    def clear(self) -> None:
        self.by_key.clear()

    def draw_identity(self, state: str | None, timezone: str | None) -> Identity:
        if self.identities is None:
            self.identities = IdentityFactory()
        return self.identities.draw(state, timezone)

    async def draw_browser(self, key: object, avoid: frozenset[str] = frozenset()) -> BrowserIdentity:
        """A Chrome identity of the launched Chromium's version (read once per crawl)."""
        if self.browsers is None:
            if self._browsers_lock is None:
                self._browsers_lock = asyncio.Lock()
            async with self._browsers_lock:
                if self.browsers is None:
                    self.browsers = BrowserIdentityFactory(await chromium_version(self.browser_path))
        return self.browsers.draw(*await self.locales.of(key), avoid=avoid)
