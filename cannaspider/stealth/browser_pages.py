"""Browser pages (meta `playwright`: a store's own website, rendered by scrapy-playwright) take the
proxy of their store's session and go through a browser context of that proxy and identity
(stealth/contexts.py), with the proxy's credentials in the context, never in a header or a name.
"""

from __future__ import annotations

import time

from scrapy import Request

from cannaspider.stealth.contexts import IDENTITY_META, BrowserContexts, context_name
from cannaspider.stealth.routing import PROXY_META, SENT_META
from cannaspider.stealth.sessions import Session, Sessions


class BrowserPages:
    def __init__(self, sessions: Sessions) -> None:
        self.sessions = sessions
        self.contexts = BrowserContexts()
        self.context_sessions: dict[str, object] = {}  # browser context name → the session key it serves

    async def route(self, request: Request, key: object, session: Session) -> None:
        """The page goes through the session's proxy in a context of its own proxy and identity.
        IdentityError when no browser identity can be drawn."""
        if session.browser is None:  # the store's crawl began with HTTP requests
            session.browser = await self.sessions.draw_browser(key)
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
        # the browser talks to the proxy itself: Scrapy's HttpProxyMiddleware must add nothing (a
        # Proxy-Authorization header would be sent on to the website); with meta "proxy" None it
        # also drops a header it wrote on an earlier attempt
        meta["proxy"] = None
        request.headers.pop(b"Proxy-Authorization", None)
        for closed in await self.contexts.sweep(self.in_use, keep=name):
            self.context_sessions.pop(closed, None)

    def in_use(self, name: str) -> bool:
        """A store crawl still has this context: its session is that proxy and identity, and the
        proxy is in the pool."""
        session = self.sessions.get(self.context_sessions.get(name))
        return (
            session is not None
            and session.browser is not None
            and self.sessions.pool.is_active(session.proxy.id)
            and context_name(session.proxy, session.browser) == name
        )

    def clear(self) -> None:
        self.context_sessions.clear()  # scrapy-playwright closes the contexts with its browser
