"""Firecrawl over Scrapy's downloader: each call is a Scrapy request sent with the engine's
public `download_async` (downloader middlewares, concurrency limits and stats apply), awaited
by the keyword job's coroutine. Waiting between polls is an `asyncio.sleep` in that coroutine,
so a waiting batch holds no download slot, no scheduler entry and no response in the scraper:
any number of batches can wait at once in one process (docs/onpage.md, "Concurrency").

One retry on a network timeout, none on anything else: a refused connection or a 5xx is
Firecrawl being down, and its own queue already paces the pages.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import scrapy
from scrapy.exceptions import CannotResolveHostError, DownloadConnectionRefusedError, DownloadTimeoutError
from scrapy.http import Response
from twisted.internet import error as twisted_error

from cannaspider.db.errors import redact
from cannaspider.firecrawl import api

logger = logging.getLogger(__name__)

Download = Callable[[scrapy.Request], Awaitable[Response]]
TIMEOUTS = (DownloadTimeoutError, twisted_error.TimeoutError, TimeoutError)


class FirecrawlClient:
    def __init__(
        self,
        download: Download,
        base_url: str,
        api_key: str | None,
        *,
        page_timeout_ms: int,
        request_timeout_s: float,
    ):
        self.download = download
        self.base_url = base_url.rstrip("/")
        self.shown_url = redact(self.base_url)  # for messages: no password of a user:pass@ URL
        self.api_key = api_key or None
        self.page_timeout_ms = page_timeout_ms
        self.request_timeout_s = request_timeout_s

    async def _send(self, request: scrapy.Request, what: str) -> Response:
        for attempt in (1, 2):
            try:
                return await self.download(request)
            except TIMEOUTS as exc:
                if attempt == 2:
                    raise api.FirecrawlError(
                        f"Firecrawl at {self.shown_url} did not answer {what} within "
                        f"{self.request_timeout_s:g} s (twice)"
                    ) from exc
                logger.warning("Firecrawl did not answer %s in time: retrying once", what)
                request = request.replace(dont_filter=True)
            except (DownloadConnectionRefusedError, CannotResolveHostError, twisted_error.ConnectError) as exc:
                raise api.FirecrawlError(f"Firecrawl is unreachable at {self.shown_url}: {_reason(exc)}") from exc
            except Exception as exc:  # any other transport failure: Firecrawl is not answering
                raise api.FirecrawlError(
                    f"Firecrawl request {what} to {self.shown_url} failed: {_reason(exc)}"
                ) from exc
        raise AssertionError("unreachable")  # pragma: no cover

    async def start(self, urls: list[str]) -> api.StartedBatch:
        request = api.start_request(self.base_url, self.api_key, urls, self.page_timeout_ms, self.request_timeout_s)
        return api.read_started(await self._send(request, "POST /v2/batch/scrape"))

    async def status(self, batch_id: str) -> api.BatchStatus:
        request = api.status_request(self.base_url, self.api_key, batch_id, self.request_timeout_s)
        return api.read_status(await self._send(request, f"GET /v2/batch/scrape/{batch_id}"))

    async def errors(self, batch_id: str) -> list[api.PageError]:
        request = api.errors_request(self.base_url, self.api_key, batch_id, self.request_timeout_s)
        return api.read_errors(await self._send(request, f"GET /v2/crawl/{batch_id}/errors"))

    async def cancel(self, batch_id: str) -> None:
        """Best effort: frees Firecrawl's workers from a batch we gave up on."""
        request = api.cancel_request(self.base_url, self.api_key, batch_id, self.request_timeout_s)
        try:
            await self._send(request, f"DELETE /v2/batch/scrape/{batch_id}")
        except api.FirecrawlError as exc:
            logger.info("could not cancel Firecrawl batch %s: %s", batch_id, exc)


def _reason(exc: BaseException) -> str:
    text = redact(" ".join(str(exc).split()))
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
