"""Browser pages in the crawl: their session, and what a page does when there is no Chromium.

Browser pages (meta `playwright`: a store's own website, rendered by scrapy-playwright) take the
proxy of their store's session and go through a browser context of that proxy and identity
(cannaspider/stealth/browser.py), with the proxy's credentials in the context, never in a header or a name.

Their download handler is in cannaspider/stealth/browser_handler.py (a module of its own: it is
scrapy-playwright's, which imports Playwright, and only the spiders that render pages load it); a
page without Chromium at CHROMIUM_PATH fails that page only (ChromiumNotFound, here), and `python
-m cannaspider.stealth.browser_pages` is ./dev's check for it.
"""

from __future__ import annotations

import shutil
import sys
import time

from scrapy import Request
from scrapy.exceptions import IgnoreRequest
from scrapy.settings import BaseSettings

from cannaspider.stealth.browser import IDENTITY_META, BrowserContexts, context_name
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


# A browser page without a browser: Chromium missing at CHROMIUM_PATH fails that page only.
#
# Without Chromium (apt locked, a non-root user, a node built without it) the stores whose menu is on
# their own website cannot be rendered, but nothing else needs a browser: each browser page fails
# with ChromiumNotFound, an IgnoreRequest whose message is the store's `resolution_error`
# ("Chromium not found at CHROMIUM_PATH (/usr/bin/chromium)"), and the crawl goes on with the other
# stores. Checked per request (a stat), not once per crawl: a `-a follow=1` drainer that runs for
# weeks renders again once Chromium is installed. The stealth middleware checks before it draws a
# browser identity (which reads the Chromium's version, and would stop the crawl); the download
# handler checks again for a page that comes to it without the middleware.

MISSING_STAT = "cannaspider/browser_missing"  # browser pages failed for want of Chromium


class ChromiumNotFound(IgnoreRequest):
    """A browser page that cannot be rendered: no Chromium at CHROMIUM_PATH."""


def browser_path(settings: BaseSettings) -> str:
    """The Chromium scrapy-playwright launches: PLAYWRIGHT_LAUNCH_OPTIONS' executable_path, else CHROMIUM_PATH."""
    path: str = settings.getdict("PLAYWRIGHT_LAUNCH_OPTIONS").get("executable_path") or settings.get("CHROMIUM_PATH")
    return path


def chromium_not_found(path: str | None) -> ChromiumNotFound | None:
    """The error for a browser page when there is no executable at `path` (a path, or a name on PATH).
    No path at all (CHROMIUM_PATH set empty): Playwright launches a browser of its own, not ours to check."""
    if not path or shutil.which(path) is not None:
        return None
    return ChromiumNotFound(f"Chromium not found at CHROMIUM_PATH ({path})")


def setup_warning(missing: ChromiumNotFound) -> str:
    """What `./dev` says when there is no Chromium: exactly what a crawl then does."""
    return (
        f"warning: {missing}: only the stores whose menu is on their own website will not resolve, each "
        f'with resolution_error "{missing}"; the other stores resolve and crawl as usual '
        "(install chromium, or set CHROMIUM_PATH)"
    )


def main(argv: list[str]) -> int:
    """`python -m cannaspider.stealth.browser_pages [--quiet]` (./dev setup): exit 1 and, unless
    quiet, the warning on stderr when the project's settings name no Chromium that exists."""
    from scrapy.utils.project import get_project_settings  # noqa: PLC0415 - the command's, not the crawl's

    missing = chromium_not_found(browser_path(get_project_settings()))
    if missing is None:
        return 0
    if "--quiet" not in argv:
        print(setup_warning(missing), file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
