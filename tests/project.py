"""Crawlers for in-process tests that carry the project's settings (its defaults, stated once in
cannaspider/settings.py, and its EXTENSIONS), as `scrapy crawl` would, on the test's reactor."""

from __future__ import annotations

from scrapy.crawler import Crawler
from scrapy.settings import SETTINGS_PRIORITIES, Settings
from scrapy.utils.test import get_crawler


def project_settings() -> dict:
    settings = Settings()
    settings.setmodule("cannaspider.settings", priority="project")
    # the reactor is the test run's (get_crawler picks it); the rest is the project's
    return {
        name: settings[name]
        for name in settings
        if settings.getpriority(name) == SETTINGS_PRIORITIES["project"] and name != "TWISTED_REACTOR"
    }


def project_crawler(spidercls: type | None = None, **overrides) -> Crawler:
    return get_crawler(spidercls, settings_dict={**project_settings(), **overrides})
