"""settings.py's values alone, without a crawler's or the command line's: the defaults of a
component built without settings (a ScheduleConfig, a task failed without a backoff given)."""

from __future__ import annotations

from scrapy.settings import Settings


def project_settings() -> Settings:
    settings = Settings()
    settings.setmodule("cannaspider.settings", priority="default")
    return settings
