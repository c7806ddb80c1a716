"""The crawl as a whole: why it finished, and how many errors it logged."""

from __future__ import annotations

from spidermon import monitors

from cannaspider.crawl_outcome import FATAL_ERROR_STAT
from cannaspider.monitors.base import HealthMonitor


@monitors.name("Finish reason")
class FinishReasonMonitor(HealthMonitor):
    @monitors.name("the crawl finished normally")  # type: ignore[untyped-decorator]  # Spidermon's
    def test_finish_reason(self) -> None:
        reason = self.stats.get("finish_reason")
        allowed = self.settings.getlist("HEALTH_OK_FINISH_REASONS")
        fatal = self.stats.get(FATAL_ERROR_STAT)
        self.assertIsNone(fatal, f"the crawl stopped on a fatal error: {fatal}")
        if "finish_reason" not in self.stats:
            return  # still running: a periodic check (extension.py) judges a stretch, not an end
        self.assertIn(reason, allowed, f"finish reason {reason!r} is not one of {', '.join(allowed)}")


@monitors.name("Errors")
class ErrorCountMonitor(HealthMonitor):
    @monitors.name("errors logged within HEALTH_MAX_ERRORS")  # type: ignore[untyped-decorator]  # Spidermon's
    def test_errors(self) -> None:
        errors = self.stat("log_count/ERROR")
        limit = self.settings.getint("HEALTH_MAX_ERRORS")
        self.assertLessEqual(errors, limit, f"{errors} errors logged (HEALTH_MAX_ERRORS = {limit})")
