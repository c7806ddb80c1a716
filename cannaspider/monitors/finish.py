"""The crawl as a whole: why it finished, and how many errors it logged.

A stop the operator asked for is not an alert: SIGTERM/SIGINT (Scrapyd's cancel.json, a deploy
stopping a `-a follow=1` drainer) ends the crawl with Scrapy's finish reason `shutdown`, which
HEALTH_STOP_FINISH_REASONS lists: the finish-reason check passes, the other checks judge the work
done until the stop as usual. Any other reason outside HEALTH_OK_FINISH_REASONS still fails.

CRITICAL lines are errors too: Scrapy counts each level apart (log_count/ERROR,
log_count/CRITICAL), and a CRITICAL line is never less of a problem than an ERROR one."""

from __future__ import annotations

from spidermon import monitors

from cannaspider.crawl_outcome import FATAL_ERROR_STAT
from cannaspider.monitors.base import HealthMonitor

ERROR_STATS = ("log_count/ERROR", "log_count/CRITICAL")  # Scrapy's LogCounterHandler, one stat a level


@monitors.name("Finish reason")
class FinishReasonMonitor(HealthMonitor):
    @monitors.name("the crawl finished normally")  # type: ignore[untyped-decorator]  # Spidermon's
    def test_finish_reason(self) -> None:
        reason = self.stats.get("finish_reason")
        allowed = self.settings.getlist("HEALTH_OK_FINISH_REASONS")
        stops = self.settings.getlist("HEALTH_STOP_FINISH_REASONS")
        fatal = self.stats.get(FATAL_ERROR_STAT)
        self.assertIsNone(fatal, f"the crawl stopped on a fatal error: {fatal}")
        if "finish_reason" not in self.stats:
            return  # still running: a periodic check (extension.py) judges a stretch, not an end
        if reason in stops:
            return  # the operator's stop (SIGTERM/SIGINT, Scrapyd's cancel): asked for, not an alert
        self.assertIn(reason, allowed, f"finish reason {reason!r} is not one of {', '.join(allowed)}")


@monitors.name("Errors")
class ErrorCountMonitor(HealthMonitor):
    @monitors.name("errors logged within HEALTH_MAX_ERRORS")  # type: ignore[untyped-decorator]  # Spidermon's
    def test_errors(self) -> None:
        errors = sum(self.stat(key) for key in ERROR_STATS)
        critical = self.stat("log_count/CRITICAL")
        limit = self.settings.getint("HEALTH_MAX_ERRORS")
        of_which = f", {critical:g} of them CRITICAL" if critical else ""
        self.assertLessEqual(errors, limit, f"{errors:g} errors logged{of_which} (HEALTH_MAX_ERRORS = {limit})")
