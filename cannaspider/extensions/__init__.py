"""Scrapy extensions, and how a component finds the crawler's services among them.

The per-crawler services (the database side, the proxy pools, the crawl's task drain, the store
close, the unit lifecycle) are Scrapy extensions declared in settings.py's EXTENSIONS, so the wiring
is in one place and each crawler has one of each. Scrapy builds them when the crawler applies its
settings: after the spider (a spider's __init__ and from_crawler cannot find them), before the
engine and its pipelines and middlewares (their from_crawler can). An extension finds another at run
time, never in its own from_crawler: the extension manager is still being built then. A test builds
its crawler with the project's settings (tests/helpers.py, project_crawler), which enable them.
"""

from __future__ import annotations

from typing import TypeVar

from scrapy.crawler import Crawler

T = TypeVar("T")


def extension(crawler: Crawler, cls: type[T]) -> T:
    """The crawler's extension of `cls` (Scrapy's public Crawler.get_extension), or an error that
    says how to enable it. Before the extension manager is built, Scrapy's own RuntimeError."""
    found = crawler.get_extension(cls)
    if found is None:
        raise RuntimeError(
            f"{cls.__module__}.{cls.__qualname__} is not enabled in this crawler's EXTENSIONS "
            "(cannaspider/settings.py enables it: build the crawler with the project's settings)"
        )
    return found
