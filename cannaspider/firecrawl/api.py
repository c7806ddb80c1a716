"""Firecrawl's v2 batch-scrape API: its calls as Scrapy requests, their answers read into plain
values, and the client that sends them over Scrapy's downloader (FirecrawlClient, below).

The route is /v2/batch/scrape (not the /v2/batch-scrape some docs show), the request schema is
strict (an unknown key is a 400), and status/errors URLs are built from our own base URL and the
batch id, because the server's `url`/`next` may say https on a plain-http host (docs/firecrawl.md).
The API key travels only in the Authorization header: nothing here puts it in a message.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import scrapy
from scrapy.exceptions import CannotResolveHostError, DownloadConnectionRefusedError, DownloadTimeoutError
from scrapy.http import Response
from twisted.internet import error as twisted_error

from cannaspider.db.errors import redact

# Why each option (docs/firecrawl.md): rawHtml because our parser is the only authority on the
# page; the whole page (meta, JSON-LD, alt texts) so not onlyMainContent; always fresh (maxAge 0);
# proxy "basic" because "auto" retries 401/403/429 in a stealth mode self-hosted lacks and then
# loses the page and its status (and silently stretches a 30 s timeout to 120 s); a bad URL must
# not reject the whole batch (ignoreInvalidURLs).
BATCH_OPTIONS = {
    "formats": ["rawHtml"],
    "onlyMainContent": False,
    "maxAge": 0,
    "proxy": "basic",
    "ignoreInvalidURLs": True,
}
TERMINAL = frozenset({"completed", "cancelled", "failed"})  # "failed" is never sent for a batch; terminal anyway


class FirecrawlError(Exception):
    """Firecrawl itself failed (unreachable, 5xx, 4xx on our request, unreadable answer).

    str() is one line fit for a log or a task's error column; `client_error` marks an answer
    that says our request is wrong (most 4xx), which retrying cannot fix."""

    def __init__(self, message: str, *, client_error: bool = False):
        super().__init__(message)
        self.client_error = client_error


@dataclass(frozen=True)
class StartedBatch:
    id: str
    invalid_urls: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class BatchStatus:
    status: str
    completed: int
    total: int
    data: list[dict[str, Any]]

    @property
    def finished(self) -> bool:
        return self.status in TERMINAL


@dataclass(frozen=True)
class PageError:
    url: str
    code: str
    error: str


def _headers(api_key: str | None) -> dict[str, str]:
    headers = {"Accept": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    return headers


def _meta(timeout_s: float) -> dict[str, Any]:
    # Retries are ours (FirecrawlClient, below: once, on a network timeout only); a 4xx/5xx must reach us as
    # a response, not be swallowed by HttpErrorMiddleware or retried by RetryMiddleware.
    return {"dont_retry": True, "download_timeout": timeout_s, "handle_httpstatus_all": True}


def start_request(
    base_url: str, api_key: str | None, urls: list[str], page_timeout_ms: int, timeout_s: float
) -> scrapy.Request:
    body = {"urls": urls, **BATCH_OPTIONS, "timeout": page_timeout_ms}
    return scrapy.Request(
        f"{base_url}/v2/batch/scrape",
        method="POST",
        body=json.dumps(body),
        headers={**_headers(api_key), "Content-Type": "application/json"},
        meta=_meta(timeout_s),
        dont_filter=True,
    )


def status_request(base_url: str, api_key: str | None, batch_id: str, timeout_s: float) -> scrapy.Request:
    # never `next`: self-hosted ignores `skip` and following it returns the same documents again
    return scrapy.Request(
        f"{base_url}/v2/batch/scrape/{batch_id}", headers=_headers(api_key), meta=_meta(timeout_s), dont_filter=True
    )


def errors_request(base_url: str, api_key: str | None, batch_id: str, timeout_s: float) -> scrapy.Request:
    # the crawl route accepts a batch id; there is no /v2/batch/scrape/{id}/errors on this version
    return scrapy.Request(
        f"{base_url}/v2/crawl/{batch_id}/errors", headers=_headers(api_key), meta=_meta(timeout_s), dont_filter=True
    )


def cancel_request(base_url: str, api_key: str | None, batch_id: str, timeout_s: float) -> scrapy.Request:
    return scrapy.Request(
        f"{base_url}/v2/batch/scrape/{batch_id}",
        method="DELETE",
        headers=_headers(api_key),
        meta=_meta(timeout_s),
        dont_filter=True,
    )


def _short(text: str, limit: int = 300) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _json(response: Response, what: str) -> dict[str, Any]:
    """The JSON object of a 2xx answer; FirecrawlError with Firecrawl's own message otherwise."""
    try:
        body = json.loads(response.body)
    except ValueError:
        body = None
    if response.status >= 400:
        raise FirecrawlError(
            f"Firecrawl answered HTTP {response.status} to {what}: {_error_message(body, response)}",
            client_error=_not_worth_retrying(response.status, what),
        )
    if not isinstance(body, dict):
        raise FirecrawlError(f"Firecrawl answered {what} with something that is not a JSON object")
    return body


def _not_worth_retrying(status: int, what: str) -> bool:
    """A 4xx says our request is wrong (bad body, bad key, no credits): trying again cannot help.
    Except a rate limit or a request timeout, and a batch that vanished between two polls
    (Firecrawl lost its queue): a later attempt starts a new batch."""
    if not 400 <= status < 500 or status in (408, 429):
        return False
    return not (status == 404 and not what.startswith("POST"))


def _error_message(body: object, response: Response) -> str:
    if isinstance(body, dict):
        parts = [str(body[k]) for k in ("code", "error") if body.get(k)]
        details = body.get("details")
        if isinstance(details, list):
            for d in details:
                if isinstance(d, dict) and d.get("message"):
                    where = ".".join(str(p) for p in d.get("path") or [])
                    keys = f" {d['keys']}" if d.get("keys") else ""
                    parts.append(f"{d['message']}{keys}" + (f" (at {where})" if where else ""))
        if parts:
            return _short("; ".join(parts))
    text = response.text if hasattr(response, "text") else response.body.decode("utf-8", "replace")
    return _short(text) or "(empty body)"


def read_started(response: Response) -> StartedBatch:
    body = _json(response, "POST /v2/batch/scrape")
    if body.get("success") is not True or not isinstance(body.get("id"), str):
        raise FirecrawlError(f"Firecrawl did not start the batch: {_error_message(body, response)}")
    invalid = body.get("invalidURLs") or []
    return StartedBatch(body["id"], [u for u in invalid if isinstance(u, str)])


def read_status(response: Response) -> BatchStatus:
    body = _json(response, "GET /v2/batch/scrape/{id}")
    if body.get("success") is False or not isinstance(body.get("status"), str):
        raise FirecrawlError(f"Firecrawl could not report the batch: {_error_message(body, response)}")
    data = body.get("data")
    docs = [d for d in data if isinstance(d, dict)] if isinstance(data, list) else []
    return BatchStatus(body["status"], int(body.get("completed") or 0), int(body.get("total") or 0), docs)


def read_errors(response: Response) -> list[PageError]:
    body = _json(response, "GET /v2/crawl/{id}/errors")
    out = []
    for e in body.get("errors") or []:
        if isinstance(e, dict) and isinstance(e.get("url"), str):
            out.append(PageError(e["url"], str(e.get("code") or "UNKNOWN_ERROR"), _short(str(e.get("error") or ""))))
    return out


# Firecrawl over Scrapy's downloader: each call is a Scrapy request sent with the engine's
# public `download_async` (downloader middlewares, concurrency limits and stats apply), awaited
# by the keyword job's coroutine. Waiting between polls is an `asyncio.sleep` in that coroutine,
# so a waiting batch holds no download slot, no scheduler entry and no response in the scraper:
# any number of batches can wait at once in one process (docs/onpage.md, "Concurrency").
#
# One retry on a network timeout, none on anything else: a refused connection or a 5xx is
# Firecrawl being down, and its own queue already paces the pages.

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
                    raise FirecrawlError(
                        f"Firecrawl at {self.shown_url} did not answer {what} within "
                        f"{self.request_timeout_s:g} s (twice)"
                    ) from exc
                logger.warning("Firecrawl did not answer %s in time: retrying once", what)
                request = request.replace(dont_filter=True)
            except (DownloadConnectionRefusedError, CannotResolveHostError, twisted_error.ConnectError) as exc:
                raise FirecrawlError(f"Firecrawl is unreachable at {self.shown_url}: {_reason(exc)}") from exc
            except Exception as exc:  # any other transport failure: Firecrawl is not answering
                raise FirecrawlError(f"Firecrawl request {what} to {self.shown_url} failed: {_reason(exc)}") from exc
        raise AssertionError("unreachable")  # pragma: no cover

    async def start(self, urls: list[str]) -> StartedBatch:
        request = start_request(self.base_url, self.api_key, urls, self.page_timeout_ms, self.request_timeout_s)
        return read_started(await self._send(request, "POST /v2/batch/scrape"))

    async def status(self, batch_id: str) -> BatchStatus:
        request = status_request(self.base_url, self.api_key, batch_id, self.request_timeout_s)
        return read_status(await self._send(request, f"GET /v2/batch/scrape/{batch_id}"))

    async def errors(self, batch_id: str) -> list[PageError]:
        request = errors_request(self.base_url, self.api_key, batch_id, self.request_timeout_s)
        return read_errors(await self._send(request, f"GET /v2/crawl/{batch_id}/errors"))

    async def cancel(self, batch_id: str) -> None:
        """Best effort: frees Firecrawl's workers from a batch we gave up on."""
        request = cancel_request(self.base_url, self.api_key, batch_id, self.request_timeout_s)
        try:
            await self._send(request, f"DELETE /v2/batch/scrape/{batch_id}")
        except FirecrawlError as exc:
            logger.info("could not cancel Firecrawl batch %s: %s", batch_id, exc)


def _reason(exc: BaseException) -> str:
    text = redact(" ".join(str(exc).split()))
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
