"""The browser contexts of a crawl's browser pages (scrapy-playwright): one per proxy and identity.

scrapy-playwright creates a context the first time a request names it (`playwright_context`), with
that request's `playwright_context_kwargs` (here: the proxy and the identity), and keeps it until
the crawl ends. We see each context when its first page starts (the page init callback), and:
- give the page the identity's User-Agent metadata and languages over CDP (Playwright's
  `user_agent` alone leaves Chromium's own brand list, without "Google Chrome", and the host's
  navigator.platform); the CDP session stays attached while the page lives (detaching would end
  the override);
- note the version of the browser really launched, which the stealth middleware compares with the
  identity's;
- close contexts no store crawl uses any more (their proxy left the pool, or a block rotated the
  store to another proxy and identity), and keep at most KEEP_IDLE other idle ones: a store whose
  context was closed gets it again, same name and identity, when it asks (without its cookies).

Only idle contexts (no open page) are closed. A page that starts in one at the same moment fails
with TargetClosedError, which scrapy-playwright retries in a new context of the same name.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from scrapy import Request

from cannaspider.stealth.browser import BrowserIdentity
from cannaspider.stealth.proxies import ProxyRecord

logger = logging.getLogger(__name__)

IDENTITY_META = "stealth_browser_identity"  # the BrowserIdentity the page must present
VERSION_META = "stealth_browser_version"  # set by the page init callback: the launched browser's version
KEEP_IDLE = 8


def context_name(proxy: ProxyRecord, identity: BrowserIdentity) -> str:
    """The proxy's row id and the identity's key: never its address or credentials."""
    return f"stealth-proxy{proxy.id}-{identity.key}"


class BrowserContexts:
    def __init__(self) -> None:
        self.contexts: OrderedDict[str, Any] = OrderedDict()  # name → playwright BrowserContext, oldest use first
        self._sessions: dict[int, Any] = {}  # page → its CDP session (the override lives as long as it)

    async def init_page(self, page: Any, request: Request) -> None:
        """scrapy-playwright's `playwright_page_init_callback`: before the page navigates."""
        name = request.meta.get("playwright_context")
        if name is not None:
            self.contexts[name] = page.context
            self.contexts.move_to_end(name)
        browser = page.context.browser
        if browser is not None:
            request.meta[VERSION_META] = browser.version
        identity: BrowserIdentity | None = request.meta.get(IDENTITY_META)
        if identity is None:
            return
        cdp = await page.context.new_cdp_session(page)
        await cdp.send("Emulation.setUserAgentOverride", identity.user_agent_override())
        await cdp.send("Emulation.setLocaleOverride", identity.locale_override())
        self._sessions[id(page)] = cdp
        page.on("close", lambda _page: self._sessions.pop(id(page), None))

    async def sweep(self, is_live: Callable[[str], bool], keep: str | None = None) -> list[str]:
        """Close the idle contexts nobody uses, then the oldest idle ones beyond KEEP_IDLE.
        Returns the names closed."""
        closed = []
        idle = [n for n, ctx in self.contexts.items() if n != keep and not ctx.pages]
        retired = [n for n in idle if not is_live(n)]
        kept = [n for n in idle if n not in retired]
        for name in retired + kept[: max(0, len(kept) - KEEP_IDLE)]:
            context = self.contexts.pop(name)
            try:
                await context.close()
            except Exception as exc:  # noqa: BLE001 - already closed with the browser: nothing left to free
                logger.debug("browser context %s: close failed: %s", name, exc)
            closed.append(name)
        if closed:
            logger.debug("closed %d browser context(s) no longer in use", len(closed))
        return closed
