"""`scrapy crawl`, whose exit code and last stderr line say whether the crawl could do its work.

Scrapy's own command exits 0 whatever happened inside the crawl. This one exits non-zero with one
line `error: …` on stderr (passwords masked, no traceback) when:

- a spider argument is wrong (SpiderArgumentError: unknown argument, not a US state, not an id,
  a dispensary that does not exist) or the spider cannot be used as configured (UsageError:
  crawl_onpage without FIRECRAWL_API_URL) — exit 2;
- the database cannot be reached, started or is not migrated, or was lost during the crawl
  (CrawlDatabase records it: cannaspider/db/crawl_database.py) — exit 2;
- anything else stopped the crawl from starting (a bug: its traceback is printed) — exit 1;
- the crawl ran but a unit of work it took did not complete — a store crawl incomplete, a keyword
  or a refresh failed, a drained task failed, was given back by a stop (SIGTERM/SIGINT) or lost
  its lease — exit 3, so that cron and Scrapyd see it. A `-a follow=1` drainer stopped while idle,
  every task it took completed, exits 0;
- the crawl ran and did its work, but a feed file could not be written (a full disk:
  cannaspider/feed_storage.py; the database writes never depend on it) — exit 4 (3 when a unit
  was also incomplete; the line says both).

With LOG_FILE set (Scrapyd sets one per job) the crawl's log goes there, not to stderr: the same
`error:` line is then also appended to that file, at ERROR with its exit code, so the job's own log
says why it failed (Scrapyd keeps stderr in its daemon log only).

Every crawl's exit is also a row of crawl_jobs (cannaspider/db/crawl_jobs.py: its Scrapyd job id,
exit code and this reason), which the dashboard's jobs page and GET /api/jobs show for every node.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import traceback
from typing import Any

from scrapy import signals
from scrapy.commands.crawl import Command as ScrapyCrawlCommand
from scrapy.crawler import Crawler
from scrapy.exceptions import UsageError
from scrapy.extensions.feedexport import FeedExporter
from scrapy.settings import BaseSettings
from twisted.internet.defer import Deferred
from twisted.python.failure import Failure

from cannaspider.crawl_outcome import FATAL_ERROR_STAT, FEED_ERROR_STAT, UNITS_INCOMPLETE_STAT
from cannaspider.db import crawl_jobs
from cannaspider.db.errors import DatabaseSetupError, redact
from cannaspider.spiders.base import SpiderArgumentError
from cannaspider.tasks.drain import TaskDrain

EXIT_SETUP = 2  # the crawl could not do its work: bad arguments or database (as `scrapy migrate`)
EXIT_BUG = 1
EXIT_INCOMPLETE = 3  # the crawl ran, but not every unit of work it took completed
EXIT_FEED = 4  # the crawl ran and did its work, but a feed file could not be written

logger = logging.getLogger(__name__)


class Command(ScrapyCrawlCommand):
    def run(self, args: list[str], opts: Any) -> None:
        if len(args) != 1:
            raise UsageError("give one spider: scrapy crawl SPIDER [-a name=value …]" if args else "")
        assert self.crawler_process is not None
        crawler = self.crawler_process.create_crawler(args[0])
        crawler.signals.connect(_warn_if_feeds_unused, signal=signals.engine_started)
        errors: list[BaseException] = []
        _collect_failure(self.crawler_process.crawl(crawler, **opts.spargs), errors)
        self.crawler_process.start()
        message = self._fatal(crawler, errors)
        if message is None and self.crawler_process.bootstrap_failed:
            self.exitcode = EXIT_BUG
        # before the error: line, which stays stderr's last (a row that cannot be written says so in a line)
        crawl_jobs.record(crawler.settings, _job(crawler, opts.spargs, self.exitcode, message))
        if message is not None:
            line = f"error: {redact(message)}"
            print(line, file=sys.stderr)
            _append_to_log_file(crawler.settings, line, self.exitcode)

    def _fatal(self, crawler: Crawler, errors: list[BaseException]) -> str | None:
        for exc in errors:
            if isinstance(exc, (SpiderArgumentError, DatabaseSetupError, UsageError)):
                self.exitcode = EXIT_SETUP
                return str(exc)
            traceback.print_exception(exc, file=sys.stderr)
            self.exitcode = EXIT_BUG
            return f"the crawl could not start: {exc.__class__.__name__}: {exc}"
        try:
            fatal = crawler.stats.get_value(FATAL_ERROR_STAT)
        except AttributeError:  # the crawler never got as far as its stats
            return None
        if fatal:
            self.exitcode = EXIT_SETUP
            return str(fatal)
        incomplete = self._incomplete(crawler)
        feed = crawler.stats.get_value(FEED_ERROR_STAT)
        if incomplete is None and feed:
            self.exitcode = EXIT_FEED
        return "; ".join(str(part) for part in (incomplete, feed) if part) or None

    def _incomplete(self, crawler: Crawler) -> str | None:
        units = crawler.stats.get_value(UNITS_INCOMPLETE_STAT) or 0
        drain = TaskDrain.of(crawler)
        tasks = drain.claimed - drain.completed if drain is not None else 0
        if not units and not tasks:
            return None
        self.exitcode = EXIT_INCOMPLETE
        parts = [f"{units} unit(s) of work incomplete"] if units else []
        if tasks:
            assert drain is not None
            parts.append(f"{tasks} of the {drain.claimed} {drain.role} task(s) it took not completed")
        reason = crawler.stats.get_value("finish_reason")
        return "; ".join(parts) + (f" (the crawl ended: {reason})" if reason else "")


def _job(crawler: Crawler, arguments: dict[str, str], exitcode: int, message: str | None) -> crawl_jobs.CrawlJob:
    try:
        stats = crawler.stats
    except (AttributeError, RuntimeError):  # the crawl never started (Scrapy sets stats when it does)
        stats = None
    started = stats.get_value("start_time") if stats is not None else None
    reason = stats.get_value("finish_reason") if stats is not None else None
    return crawl_jobs.CrawlJob(
        spider=crawler.spidercls.name,
        arguments=arguments,
        exit_code=exitcode,
        error=message,
        started_at=started,
        finish_reason=reason,
        log_file=crawler.settings.get("LOG_FILE") or None,
    )


def _append_to_log_file(settings: BaseSettings, line: str, exitcode: int) -> None:
    """The `error:` line in the crawl's LOG_FILE too, formatted as the log's other lines (LOG_FORMAT,
    LOG_DATEFORMAT). Appended through a handler of its own: Scrapy's root handler is an
    implementation detail, and may already be closed. A log that cannot be written loses only this
    copy of the line (stderr has it)."""
    path = settings.get("LOG_FILE")
    if not path or not settings.getbool("LOG_ENABLED"):
        return
    record = logger.makeRecord(logger.name, logging.ERROR, __file__, 0, "%s (exit code %d)", (line, exitcode), None)
    try:
        handler = logging.FileHandler(os.fspath(path), mode="a", encoding=settings.get("LOG_ENCODING"))
    except OSError:
        return
    try:
        handler.setFormatter(logging.Formatter(settings.get("LOG_FORMAT"), settings.get("LOG_DATEFORMAT")))
        handler.emit(record)
    finally:
        handler.close()


def _warn_if_feeds_unused(sender: Crawler, **kwargs: Any) -> None:
    """Scrapy's crawl command says so too: feeds configured, but their extension disabled."""
    if sender.settings.getdict("FEEDS") and sender.get_extension(FeedExporter) is None:
        logger.warning(
            "The FeedExporter extension is not enabled, so no item will be exported to the configured feeds "
            "(FEEDS, -o, -O)."
        )


def _collect_failure(started: object, errors: list[BaseException]) -> None:
    """Keep the exception that ended the crawl's task (instead of asyncio or Twisted logging it
    with a traceback): AsyncCrawlerProcess returns a Task, CrawlerProcess a Deferred."""
    if isinstance(started, asyncio.Future):

        def done(task: asyncio.Future[Any]) -> None:
            exc = None if task.cancelled() else task.exception()
            if exc is not None:
                errors.append(exc)

        started.add_done_callback(done)
    elif isinstance(started, Deferred):

        def failed(failure: Failure) -> None:
            if failure.value is not None:
                errors.append(failure.value)

        started.addErrback(failed)
