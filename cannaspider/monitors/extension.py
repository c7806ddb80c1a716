"""Runs the crawl-health suites (SPIDERMON_SPIDER_CLOSE_MONITORS) when the spider closes and, every
HEALTH_CHECK_PERIOD_S while it runs, on the stretch of the crawl since the previous check
(`StatsWindow`, below), with the same monitors, reports and alerts: a `-a follow=1` drainer that runs for
weeks says within minutes that its store crawls go incomplete (docs/health.md).

Spidermon's own extension does the same through a runner that logs each failed check's full
traceback at ERROR: unredacted text (a check's message may quote a fatal error that carries a
URL with credentials) and a traceback in the log of a crawl that did not crash. This one runs the
suites with Spidermon's plain MonitorRunner, which records results without logging; the suite's
action (health_notify.py) then says what failed, once, redacted. A periodic check runs in a thread: its
monitors query the database and its alert may wait on a webhook, which the crawl must not.

Also here: the stretch a periodic check judges (`StatsWindow`), the SPIDERMON_* settings this
project acts on and the refusal of any other, and the suite itself (`CrawlHealthSuite`, the
default of SPIDERMON_SPIDER_CLOSE_MONITORS).
"""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime
from typing import Any

from scrapy import Spider, signals
from scrapy.crawler import Crawler
from scrapy.exceptions import NotConfigured, UsageError
from scrapy.settings import BaseSettings
from scrapy.utils.misc import load_object
from spidermon import MonitorSuite
from spidermon.runners import MonitorRunner

from cannaspider.db.errors import first_line
from cannaspider.monitors.checks import (
    BlocksPerProxyMonitor,
    ErrorCountMonitor,
    FinishReasonMonitor,
    ImageFailuresMonitor,
    ItemValidationMonitor,
    StaleHashMonitor,
    StoreCrawlsMonitor,
)
from cannaspider.monitors.health_notify import HealthReportAction

logger = logging.getLogger(__name__)


# -- the SPIDERMON_* settings (docs/health.md, "Spidermon's settings") -------------------------------
# The SPIDERMON_* settings this project acts on, and the refusal of any other (docs/health.md,
# "Spidermon's settings").
#
# The crawl-health suite runs through its own extension (extension.py), not Spidermon's: Spidermon's
# other settings (SPIDERMON_SLACK_*, SPIDERMON_PERIODIC_MONITORS, SPIDERMON_MAX_ERRORS, …) would be
# accepted and do nothing, and an operator who set one would believe it acted. A crawl given one does
# not start: one `error:` line naming it and what to use instead, exit 2 (commands/crawl.py).


HONOURED = {
    "SPIDERMON_ENABLED": "turns the crawl-health suite on or off",
    "SPIDERMON_SPIDER_CLOSE_MONITORS": "the suites run at spider close and every HEALTH_CHECK_PERIOD_S",
}
# what an operator reaching for one of Spidermon's own settings wants here instead
INSTEAD = (
    ("SPIDERMON_PERIODIC_MONITORS", "HEALTH_CHECK_PERIOD_S"),
    ("SPIDERMON_SLACK_", "ALERT_WEBHOOK_URL"),
    ("SPIDERMON_TELEGRAM_", "ALERT_WEBHOOK_URL"),
    ("SPIDERMON_DISCORD_", "ALERT_WEBHOOK_URL"),
    ("SPIDERMON_EMAIL_", "ALERT_WEBHOOK_URL"),
    ("SPIDERMON_MAX_ERRORS", "HEALTH_MAX_ERRORS"),
    ("SPIDERMON_MAX_CRITICALS", "HEALTH_MAX_ERRORS"),
    ("SPIDERMON_EXPECTED_FINISH_REASONS", "HEALTH_OK_FINISH_REASONS"),
)


class UnsupportedSpidermonSetting(UsageError):
    """A SPIDERMON_* setting the project's suite does not act on (a usage error: exit 2)."""


def refuse_unsupported(settings: BaseSettings) -> None:
    """Raise UnsupportedSpidermonSetting if a SPIDERMON_* setting other than HONOURED is set."""
    unsupported = sorted(name for name in settings if name.startswith("SPIDERMON_") and name not in HONOURED)
    if not unsupported:
        return
    hints = [f"{name} → {other}" for name in unsupported for prefix, other in INSTEAD if name.startswith(prefix)]
    raise UnsupportedSpidermonSetting(
        f"{', '.join(unsupported)}: not acted on by this project's crawl health (it honours only "
        f"{' and '.join(HONOURED)}; docs/health.md)" + (f"; use instead: {'; '.join(hints)}" if hints else "")
    )


# -- the stretch a check judges ----------------------------------------------------------------------
# The stretch of a crawl one health check judges (docs/health.md, "While a crawl runs").
#
# A drainer started with `-a follow=1` runs for weeks: judged only when it closes, its health would
# be told never. So the checks run every HEALTH_CHECK_PERIOD_S while it runs, each on the stats of
# the stretch since the previous check: its counters' increase (the stores it closed, the errors it
# logged, the blocks it met), and `start_time` moved to the stretch's start, so the checks that read
# crawl_runs look at the runs closed in it. The check at spider close judges the last stretch; a
# crawl never checked before is one stretch, from its start.


# Counters whose increase means something happened worth a report: a unit closed, an item was
# scraped, an error (ERROR or CRITICAL) was logged. A stretch without any of these (an idle
# drainer) is not reported.
ACTIVITY = (
    "item_scraped_count",
    "log_count/ERROR",
    "log_count/CRITICAL",
    "cannaspider/stores_complete",
    "cannaspider/stores_incomplete",
    "cannaspider/units_incomplete",
    "cannaspider/units_closed",
)


def _counter(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


class StatsWindow:
    def __init__(self) -> None:
        self.started_at: datetime | None = None  # None: from the crawl's start_time
        self.seen: dict[str, float] = {}  # counter values at the previous check

    def stretch(self, stats: dict[str, Any]) -> dict[str, Any]:
        """The stats of the stretch since the previous check (not yet taken: see advance())."""
        out = {key: value - self.seen.get(key, 0) if _counter(value) else value for key, value in stats.items()}
        if self.started_at is not None:
            out["start_time"] = self.started_at
        return out

    @staticmethod
    def active(stretch: dict[str, Any]) -> bool:
        return any(_counter(stretch.get(key)) and stretch[key] > 0 for key in ACTIVITY)

    def absorb(self, stats: dict[str, Any], keys: tuple[str, ...]) -> None:
        """Count these counters' increase since advance() as the previous stretch's (a check's own log lines)."""
        for key in keys:
            if _counter(stats.get(key)):
                self.seen[key] = stats[key]

    def advance(self, stats: dict[str, Any], now: datetime | None = None) -> None:
        """The next stretch starts now, from these values."""
        self.seen = {key: value for key, value in stats.items() if _counter(value)}
        self.started_at = now or datetime.now(UTC)


# -- the extension ----------------------------------------------------------------------------------

OWN_LINES = ("log_count/ERROR",)  # what a check adds to the stats itself (its alert line)


class CrawlHealth:
    def __init__(self, crawler: Crawler):
        # before NotConfigured: with the suite off, a SPIDERMON_* setting acts no more than with it on
        refuse_unsupported(crawler.settings)
        if not crawler.settings.getbool("SPIDERMON_ENABLED"):
            raise NotConfigured
        self.crawler = crawler
        self.suites = [load_object(path) for path in crawler.settings.getlist("SPIDERMON_SPIDER_CLOSE_MONITORS")]
        for suite in self.suites:
            if not (isinstance(suite, type) and issubclass(suite, MonitorSuite)):
                raise TypeError(f"SPIDERMON_SPIDER_CLOSE_MONITORS: {suite!r} is not a spidermon MonitorSuite")
        self.period_s = crawler.settings.getfloat("HEALTH_CHECK_PERIOD_S")
        self.window = StatsWindow()
        self._periodic: asyncio.Task[None] | None = None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> CrawlHealth:
        ext = cls(crawler)
        crawler.signals.connect(ext.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(ext.spider_closed, signal=signals.spider_closed)
        return ext

    def spider_opened(self, spider: Spider) -> None:
        if self.period_s > 0:
            self._periodic = asyncio.ensure_future(self._every_period(spider))

    async def _every_period(self, spider: Spider) -> None:
        while True:
            await asyncio.sleep(self.period_s)
            try:
                await self.check_stretch(spider)
            except Exception as exc:  # noqa: BLE001 - a check that cannot run now runs again next period
                logger.error("crawl health: the periodic check failed: %s: %s", type(exc).__name__, first_line(exc))

    async def check_stretch(self, spider: Spider) -> bool:
        """Check the stretch since the previous check, if anything happened in it; True if checked."""
        assert self.crawler.stats is not None
        stats = dict(self.crawler.stats.get_stats())
        stretch = self.window.stretch(stats)
        if not self.window.active(stretch):
            return False
        self.window.advance(stats, datetime.now(UTC))
        await asyncio.to_thread(self.run_suites, stretch, spider)
        # the check's own alert is an ERROR line: not one the next stretch should count against the crawl
        self.window.absorb(self.crawler.stats.get_stats(), OWN_LINES)
        return True

    def spider_closed(self, spider: Spider) -> None:
        if self._periodic is not None:
            self._periodic.cancel()
        assert self.crawler.stats is not None
        self.run_suites(self.window.stretch(self.crawler.stats.get_stats()), spider)

    def run_suites(self, stats: dict[str, Any], spider: Spider) -> None:
        data = {"stats": stats, "stats_history": [], "crawler": self.crawler, "spider": spider}
        for suite_class in self.suites:
            result = MonitorRunner().run(suite_class(crawler=self.crawler), **data)
            for action in result.monitors_finished_action_results:
                if str(action.status) == "ERROR":  # the report or the alert itself failed
                    lines = (action.error or "").strip().splitlines()
                    logger.error("crawl health: %s failed: %s", action.action.name, lines[-1] if lines else "?")


# -- the suite --------------------------------------------------------------------------------------
# The crawl-health suite run when a spider closes and every HEALTH_CHECK_PERIOD_S (settings:
# SPIDERMON_SPIDER_CLOSE_MONITORS). Its one action writes the report and sends the notification
# (health_notify.py).


class CrawlHealthSuite(MonitorSuite):  # type: ignore[misc]  # Spidermon is untyped
    monitors = [
        FinishReasonMonitor,
        ErrorCountMonitor,
        StoreCrawlsMonitor,
        BlocksPerProxyMonitor,
        StaleHashMonitor,
        ItemValidationMonitor,
        ImageFailuresMonitor,
    ]
    monitors_finished_actions = [HealthReportAction]
