"""One keyword's on-page crawl: read its SERP snapshot, crawl each locale's competitors through
Firecrawl (the locales concurrently), classify every page, merge the results into that locale
in one statement, emit one CompetitorPage per competitor, return the totals.

`OnpageJobs.crawl_keyword(keyword_id)` is the unit of work a caller schedules, any number at
once in one process: the spider's explicit targets, or the tasks it drains from the crawl_onpage
queue (one keyword per task, through units/lifecycle.py `run`).
It returns {crawled, blocked, failed} even when pages failed, and raises OnpageJobError only
when Firecrawl itself failed (or the keyword/configuration is unusable).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import psycopg
from psycopg_pool import AsyncConnectionPool
from scrapy.settings import BaseSettings
from scrapy.statscollectors import StatsCollector

from cannaspider.db.errors import first_line
from cannaspider.firecrawl import classify, own_pages, persistence
from cannaspider.firecrawl.api import FirecrawlClient, FirecrawlError
from cannaspider.firecrawl.batch import BatchOutcome, PageOutcome, run_batch
from cannaspider.firecrawl.corpus import CorpusLimits, positive_setting
from cannaspider.firecrawl.gap import GapSettings
from cannaspider.firecrawl.items import CompetitorPage, PageCorpus
from cannaspider.firecrawl.parser_pool import ParseBounds, ParserPool
from cannaspider.firecrawl.progress import TOTALS, JobProgress

logger = logging.getLogger(__name__)

MISSING_URL = "FIRECRAWL_API_URL is not set: point it at the self-hosted Firecrawl (there is no direct-fetch fallback)"


class OnpageJobError(Exception):
    """A keyword's job failed. str() is one line; `retryable` is False when trying again cannot
    help (a 4xx on our request, an unknown keyword, a missing setting)."""

    def __init__(self, message: str, *, retryable: bool = True):
        super().__init__(message)
        self.retryable = retryable


@dataclass(frozen=True)
class OnpageConfig:
    # no field defaults: every value comes from settings.py (from_settings), where defaults live
    api_url: str | None
    api_key: str | None
    poll_interval_s: float
    budget_s: float
    page_timeout_ms: int
    request_timeout_s: float
    batch_max_urls: int
    min_words: int
    corpus: CorpusLimits
    parse: ParseBounds
    profile_min_pages: int
    profile_max_terms: int
    gap: GapSettings

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> OnpageConfig:
        return cls(
            api_url=settings.get("FIRECRAWL_API_URL") or None,
            api_key=settings.get("FIRECRAWL_API_KEY") or None,
            poll_interval_s=settings.getfloat("FIRECRAWL_POLL_INTERVAL_S"),
            budget_s=settings.getfloat("FIRECRAWL_BATCH_BUDGET_S"),
            page_timeout_ms=settings.getint("FIRECRAWL_PAGE_TIMEOUT_MS"),
            request_timeout_s=settings.getfloat("FIRECRAWL_REQUEST_TIMEOUT_S"),
            batch_max_urls=settings.getint("FIRECRAWL_BATCH_MAX_URLS"),
            min_words=settings.getint("ONPAGE_MIN_WORDS"),
            corpus=CorpusLimits.from_settings(settings),
            parse=ParseBounds.from_settings(settings),
            profile_min_pages=positive_setting(settings, "PROFILE_MIN_PAGES"),
            profile_max_terms=positive_setting(settings, "PROFILE_MAX_TERMS"),
            gap=GapSettings(
                min_share=settings.getfloat("GAP_MIN_SHARE"),
                under_ratio=settings.getfloat("GAP_UNDER_RATIO"),
                max_terms=positive_setting(settings, "GAP_MAX_TERMS"),
                min_pages=positive_setting(settings, "PROFILE_MIN_PAGES"),
            ),
        )

    def __repr__(self) -> str:  # the key must never reach a log through a repr
        return f"OnpageConfig(api_url={self.api_url!r}, api_key={'***' if self.api_key else None})"


def _describe(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def competitors_of(serp: object) -> dict[str, list[dict[str, Any]]]:
    """{locale: competitor objects that have a URL}, from a keywords.serp value."""
    out: dict[str, list[dict[str, Any]]] = {}
    if not isinstance(serp, dict):
        return out
    for locale, snapshot in sorted(serp.items()):
        competitors = snapshot.get("competitors") if isinstance(snapshot, dict) else None
        if isinstance(competitors, list):
            usable = [c for c in competitors if isinstance(c, dict) and isinstance(c.get("url"), str) and c["url"]]
            if usable:
                out[locale] = usable
    return out


class OnpageJobs:
    def __init__(
        self,
        config: OnpageConfig,
        client: FirecrawlClient | None,
        pool: Callable[..., Any],
        emit: Callable[[CompetitorPage], None],
        stats: StatsCollector | None = None,
    ) -> None:
        self.config = config
        self.client = client
        self.pool = pool  # async () -> AsyncConnectionPool
        self.emit = emit
        self.stats = stats
        # pages are read off the event loop, each within a deadline (parser_pool.py)
        self.parser = ParserPool(config.parse, min_words=config.min_words, limits=config.corpus)

    def close(self) -> None:
        """End the parser processes, at the crawl's end (no page can be read after it)."""
        self.parser.close()

    async def _classify(self, page: PageOutcome) -> classify.Verdict:
        prepared = classify.prepare(page, self.config.corpus)
        if isinstance(prepared, classify.Verdict):
            return prepared
        return await self.parser.read(prepared)

    def _inc(self, key: str, n: int = 1) -> None:
        if self.stats is not None:
            self.stats.inc_value(f"cannaspider/onpage/{key}", n)

    async def crawl_keyword(self, keyword_id: int) -> dict[str, int]:
        """Crawl one keyword's competitors (and our page) in every locale; {crawled, blocked, failed}."""
        progress = JobProgress(self.pool, keyword_id)
        try:
            try:
                result = await self._crawl_keyword(keyword_id, progress)
            except (OnpageJobError, asyncio.CancelledError):
                raise
            except Exception as exc:  # the database, mostly: the job fails with one line, and may be retried
                raise OnpageJobError(first_line(exc) if isinstance(exc, psycopg.Error) else _describe(exc)) from exc
        except OnpageJobError as exc:
            self._inc("keywords_failed")
            logger.error("keyword %s: on-page crawl FAILED: %s", keyword_id, exc)
            if progress.started:
                await progress.finish(str(exc))
            raise
        self._inc("keywords_done")
        await progress.finish()
        return result

    async def _crawl_keyword(self, keyword_id: int, progress: JobProgress) -> dict[str, int]:
        if not self.config.api_url or self.client is None:
            raise OnpageJobError(MISSING_URL, retryable=False)
        pool: AsyncConnectionPool = await self.pool()
        async with pool.connection() as conn:
            row = await (
                await conn.execute("SELECT keyword, serp FROM keywords WHERE id = %s", (keyword_id,))
            ).fetchone()
            ours = await own_pages.of_keyword(conn, keyword_id)
        if row is None:
            raise OnpageJobError(f"keyword {keyword_id} does not exist", retryable=False)
        keyword, serp = row
        locales = competitors_of(serp)
        if not locales:
            logger.warning("keyword %s (%r): no SERP competitors to crawl", keyword_id, keyword)
        sent = {loc: _urls(comps, ours.get(loc)) for loc, comps in locales.items()}
        await progress.start(sum(len(u) for u in sent.values()), len(locales))
        outcomes = await asyncio.gather(
            *(
                self._crawl_locale(keyword_id, keyword, loc, comps, ours.get(loc), progress)
                for loc, comps in locales.items()
            ),
            return_exceptions=True,
        )
        totals = {"crawled": 0, "blocked": 0, "failed": 0}
        failures: list[BaseException] = []
        summary = []
        for locale, outcome in zip(locales, outcomes, strict=True):
            if isinstance(outcome, BaseException):
                failures.append(outcome)
                summary.append(f"{locale}: failed")
                continue
            for status, n in outcome.items():
                totals[TOTALS[status]] += n
            summary.append(f"{locale}: " + ", ".join(f"{n} {s}" for s, n in sorted(outcome.items())))
        if failures:
            first = failures[0]
            if isinstance(first, FirecrawlError):
                raise OnpageJobError(str(first), retryable=not first.client_error) from first
            if isinstance(first, OnpageJobError):
                raise first
            if isinstance(first, psycopg.Error):
                raise OnpageJobError(first_line(first)) from first
            raise OnpageJobError(_describe(first)) from first
        logger.info(
            "keyword %s (%r): %d crawled, %d blocked, %d failed (%s)",
            keyword_id,
            keyword,
            totals["crawled"],
            totals["blocked"],
            totals["failed"],
            "; ".join(summary) or "nothing to crawl",
        )
        return totals

    async def _crawl_locale(
        self,
        keyword_id: int,
        keyword: str,
        locale: str,
        competitors: list[dict[str, Any]],
        own_url: str | None,
        progress: JobProgress,
    ) -> Counter[str]:
        assert self.client is not None
        self.parser.warm_up()  # while Firecrawl renders the pages
        urls = _urls(competitors, own_url)
        label = f"keyword {keyword_id} {locale}"
        size = max(1, self.config.batch_max_urls)
        chunks = [urls[i : i + size] for i in range(0, len(urls), size)]

        def on_poll(batch: str) -> Callable[[int], Any]:
            return lambda done: progress.batch_polled(batch, done)

        batches: list[BatchOutcome] = await asyncio.gather(
            *(
                run_batch(
                    self.client,
                    chunk,
                    poll_interval_s=self.config.poll_interval_s,
                    budget_s=self.config.budget_s,
                    label=label,
                    on_poll=on_poll(f"{locale}#{i}"),
                )
                for i, chunk in enumerate(chunks)
            )
        )
        ended = time.time()
        updates: dict[str, dict[str, Any]] = {}
        pages: list[CompetitorPage] = []
        positions: dict[str, int | None] = {}
        for c in competitors:
            positions.setdefault(c["url"], c.get("position") if isinstance(c.get("position"), int) else None)
        counts: Counter[str] = Counter()
        corpora: dict[str, tuple[PageCorpus, str]] = {}
        received = [page for batch in batches for page in batch.pages.values()]
        verdicts = await asyncio.gather(*(self._classify(page) for page in received))
        for page, verdict in zip(received, verdicts, strict=True):
            url = page.url
            crawled_at = _iso(page.seen_at or ended)
            if verdict.corpus is not None:
                corpora[url] = (verdict.corpus, crawled_at)
            updates[url] = persistence.crawl_fields(
                verdict.status,
                verdict.http_status,
                crawled_at,
                verdict.error,
                verdict.onpage.to_json() if verdict.onpage else None,
                verdict.warning,
            )
            counts[verdict.status] += 1
            self._inc(f"status/{verdict.status}")
            pages.append(
                CompetitorPage(
                    keyword_id=keyword_id,
                    keyword=keyword,
                    locale=locale,
                    url=url,
                    position=positions.get(url),
                    status=verdict.status,
                    http_status=verdict.http_status,
                    crawled_at=crawled_at,
                    error=verdict.error,
                    warning=verdict.warning,
                    onpage=verdict.onpage,
                    own_page=url == own_url,
                )
            )
        pool: AsyncConnectionPool = await self.pool()
        async with pool.connection() as conn, conn.transaction():
            # corpora, their ids in the competitors, stale corpora dropped and the profile, at once
            corpus_ids = await persistence.save_corpora(conn, keyword_id, locale, corpora)
            for url, corpus_id in corpus_ids.items():
                updates[url]["corpusId"] = corpus_id
            if not await persistence.merge_locale(conn, keyword_id, locale, updates):
                logger.warning("%s: the keyword or its locale was removed during the crawl: nothing merged", label)
            if own_url is not None and own_url in updates:
                # our page: its crawl fields on its own row (its corpus is kept by drop_unreferenced)
                if not await own_pages.save_crawl(conn, keyword_id, locale, own_url, updates[own_url]):
                    logger.info("%s: our page changed or was removed during the crawl: its result is not kept", label)
            await persistence.drop_unreferenced(conn, keyword_id, locale)
            profile = await persistence.refresh_profile(
                conn,
                keyword_id,
                locale,
                datetime.fromtimestamp(ended, UTC),
                min_pages=self.config.profile_min_pages,
                max_terms=self.config.profile_max_terms,
                gap_settings=self.config.gap,
            )
        if profile is not None:
            done = profile["completeness"]
            logger.info(
                "%s: semantic profile of %d term(s) from %d of %d page(s)%s",
                label,
                len(profile["terms"]),
                done["ok"],
                done["competitors"],
                f" ({len(done['blocked'])} blocked: to retry through a proxy)" if done["blocked"] else "",
            )
        for item in pages:
            item.corpus_id = corpus_ids.get(item.url)
            self.emit(item)
        await progress.locale_merged(counts)
        return counts


def _urls(competitors: list[dict[str, Any]], own_url: str | None) -> list[str]:
    """What a locale sends to Firecrawl: its competitors' unique URLs in SERP order, then our
    page's (unless it ranks: it is then one of them)."""
    urls = list(dict.fromkeys(c["url"] for c in competitors))
    if own_url is not None and own_url not in urls:
        urls.append(own_url)
    return urls
