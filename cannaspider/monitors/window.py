"""The stretch of a crawl one health check judges (docs/health.md, "While a crawl runs").

A drainer started with `-a follow=1` runs for weeks: judged only when it closes, its health would
be told never. So the checks run every HEALTH_CHECK_PERIOD_S while it runs, each on the stats of
the stretch since the previous check: its counters' increase (the stores it closed, the errors it
logged, the blocks it met), and `start_time` moved to the stretch's start, so the checks that read
crawl_runs look at the runs closed in it. The check at spider close judges the last stretch; a
crawl never checked before is one stretch, from its start.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

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
