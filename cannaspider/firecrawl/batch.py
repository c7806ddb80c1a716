"""One batch's life: submit the URLs, poll until Firecrawl says it is over or our budget runs
out, read the errors of the pages that failed, and say what happened to each URL we sent.

Firecrawl's answers are not a list of our URLs (docs/firecrawl.md): `data` comes in completion
order, a failed page leaves `data` and `total` alike, every poll repeats the documents already
returned. So we keep our own list of submitted URLs and match documents by `metadata.sourceURL`,
deduplicated by `metadata.scrapeId`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from cannaspider.firecrawl.api import FirecrawlClient, PageError
from cannaspider.firecrawl.progress import pages_done

logger = logging.getLogger(__name__)


def url_key(url: str) -> str:
    """A URL as Firecrawl may echo it back: scheme and host lowercased, default port, fragment
    and an empty path's slash dropped. Exact matches are tried first; this is the fallback."""
    try:
        parts = urlsplit(url.strip())
        host = (parts.hostname or "").lower()
        port = parts.port
    except ValueError:
        return url.strip()
    scheme = parts.scheme.lower()
    netloc = host if port is None or (scheme, port) in (("http", 80), ("https", 443)) else f"{host}:{port}"
    return urlunsplit((scheme, netloc, parts.path if parts.path not in ("", "/") else "", parts.query, ""))


@dataclass
class PageOutcome:
    """What Firecrawl told us about one submitted URL."""

    url: str
    doc: dict[str, Any] | None = None  # the document (rawHtml + metadata), when the page was scraped
    error: PageError | None = None  # its entry in /v2/crawl/{id}/errors, when it failed
    invalid: bool = False  # refused by Firecrawl's URL check (ignoreInvalidURLs)
    budget_exhausted: bool = False  # nothing about it yet when our budget ran out
    seen_at: float | None = None  # time.time() when its document first arrived


@dataclass
class BatchOutcome:
    batch_id: str | None
    pages: dict[str, PageOutcome] = field(default_factory=dict)  # by submitted URL
    polls: int = 0
    gave_up: bool = False


class Matcher:
    """Submitted URLs, found again from the URL Firecrawl reports (exact, then normalized)."""

    def __init__(self, urls: list[str]):
        self.exact = {u: u for u in urls}
        self.normalized: dict[str, str] = {}
        for u in urls:
            self.normalized.setdefault(url_key(u), u)

    def find(self, reported: object) -> str | None:
        if not isinstance(reported, str):
            return None
        return self.exact.get(reported) or self.normalized.get(url_key(reported))


async def run_batch(
    client: FirecrawlClient,
    urls: list[str],
    *,
    poll_interval_s: float,
    budget_s: float,
    label: str = "",
    on_poll: Callable[[int], Awaitable[None]] | None = None,
) -> BatchOutcome:
    """Raises FirecrawlError when Firecrawl itself fails (start, a poll or the errors call).
    `on_poll`, after each poll, gets how many of the URLs Firecrawl is done with (progress.py)."""
    started = await client.start(urls)
    deadline = time.monotonic() + budget_s
    outcome = BatchOutcome(started.id, {u: PageOutcome(u) for u in urls})
    matcher = Matcher(urls)
    for bad in started.invalid_urls:
        if (url := matcher.find(bad)) is not None:
            outcome.pages[url].invalid = True
    seen_scrapes: set[str] = set()
    while True:
        status = await client.status(started.id)
        outcome.polls += 1
        for doc in status.data:
            meta: dict[str, Any] = doc["metadata"] if isinstance(doc.get("metadata"), dict) else {}
            scrape_id = meta.get("scrapeId")
            if scrape_id and scrape_id in seen_scrapes:
                continue
            url = matcher.find(meta.get("sourceURL")) or matcher.find(meta.get("url"))
            if url is None:
                logger.debug("%s: Firecrawl returned a document for an URL we did not send: %r", label, meta)
                continue
            if scrape_id:
                seen_scrapes.add(scrape_id)
            page = outcome.pages[url]
            if page.doc is None:
                page.seen_at = time.time()
            page.doc = doc
        if on_poll is not None:
            arrived = sum(1 for page in outcome.pages.values() if page.doc is not None)
            await on_poll(pages_done(len(urls), len(started.invalid_urls), arrived, status.total, status.finished))
        if status.finished:
            break
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            outcome.gave_up = True
            break
        await asyncio.sleep(min(poll_interval_s, remaining))
    # the failed pages (the only place a timeout or an unreachable target shows)
    for err in await client.errors(started.id):
        url = matcher.find(err.url)
        if url is not None and outcome.pages[url].doc is None:
            outcome.pages[url].error = err
    if outcome.gave_up:
        for page in outcome.pages.values():
            if page.doc is None and page.error is None and not page.invalid:
                page.budget_exhausted = True
        logger.warning(
            "%s: Firecrawl batch %s still running after the %g s budget: keeping what arrived",
            label,
            started.id,
            budget_s,
        )
        await client.cancel(started.id)
    if on_poll is not None:
        await on_poll(len(urls))
    return outcome
