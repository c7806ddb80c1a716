"""The download handler of spiders that also render pages in a browser (entry_point_discovery):
scrapy-playwright's handler for `meta["playwright"]` requests, ours for the rest.

scrapy-playwright's handler sends every other request through Scrapy's own HTTP/1.1 handler, so a
spider that enables it would lose the TLS impersonation of its Dutchie GraphQL requests
(docs/stealth.md, "TLS"). Browser pages keep the real Chromium's handshake, which is the browser
their identity claims.

A module of its own, apart from the rest of the browser pages (stealth/browser_pages.py, which the
stealth middleware of every crawl imports): subclassing scrapy-playwright's handler imports
Playwright, and Scrapy imports a download handler's module only when a spider's DOWNLOAD_HANDLERS
name it, so only the crawls that render pages pay for it.
"""

from __future__ import annotations

from scrapy import Request
from scrapy.crawler import Crawler
from scrapy.http import Response
from scrapy_playwright.handler import ScrapyPlaywrightDownloadHandler

from cannaspider.stealth.browser_pages import browser_path, chromium_not_found
from cannaspider.stealth.tls import ImpersonatingDownloadHandler


class BrowserOrImpersonatingDownloadHandler(ScrapyPlaywrightDownloadHandler):  # type: ignore[misc]  # untyped
    def __init__(self, crawler: Crawler) -> None:
        super().__init__(crawler)
        self.impersonating = ImpersonatingDownloadHandler(crawler)
        self.browser_path = browser_path(crawler.settings)

    async def download_request(self, request: Request) -> Response:
        response: Response
        if request.meta.get("playwright"):
            # no Chromium: this page fails alone (stealth/browser_pages.py), before Playwright
            # tries to launch it
            if (missing := chromium_not_found(self.browser_path)) is not None:
                raise missing
            response = await super().download_request(request)
        else:
            response = await self.impersonating.download_request(request)
        return response

    async def close(self) -> None:
        await self.impersonating.close()
        await super().close()
