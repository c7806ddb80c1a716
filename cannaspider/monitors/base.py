"""What every crawl-health monitor shares: the crawl's stats and settings, and a failure whose
message is one line (the report and the alert show it as is)."""

from __future__ import annotations

from typing import Any

from scrapy.settings import Settings
from spidermon import Monitor


class HealthMonitor(Monitor):  # type: ignore[misc]  # Spidermon is untyped
    longMessage = False  # the message we give, not unittest's "a != b : message"

    @property
    def stats(self) -> dict[str, Any]:
        return self.data.stats or {}

    @property
    def settings(self) -> Settings:
        settings: Settings = self.data.crawler.settings
        return settings

    def stat(self, key: str) -> float:
        value = self.stats.get(key, 0)
        return value if isinstance(value, (int, float)) else 0
