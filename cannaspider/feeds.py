"""The crawl's default feed: every crawl writes the items it saw as JSON lines under
`CANNASPIDER_FEED_DIR/<spider>/<YYYY-MM-DD>/<time>-<job>.jsonl` (see README, "Feeds and the item
schema"), unless the command line or the settings name feeds of their own.

The default is added by an add-on (the ADDONS setting) rather than written into FEEDS in
settings.py: Scrapy merges the project's FEEDS into those of `-o`/`-O`, so a default kept there
would be written beside `-O file.json` instead of being replaced by it. An add-on runs once the
command line is applied, and sees whether anyone set FEEDS.
"""

from __future__ import annotations

import os
import secrets
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from scrapy.crawler import Crawler
from scrapy.settings import SETTINGS_PRIORITIES, Settings

DEFAULT_FEED_OPTIONS: dict[str, Any] = {
    "format": "jsonlines",
    "item_classes": [
        "cannaspider.items.StoreProduct",
        "cannaspider.items.DispensaryRecord",
        "cannaspider.firecrawl.items.CompetitorPage",
    ],
}
# %(time)s has whole seconds: %(job)s tells apart crawls that start in the same second
DEFAULT_FEED_PATH = "%(name)s/%(date)s/%(time)s-%(job)s.jsonl"


def uri_params(params: dict[str, Any], spider: Any) -> dict[str, Any]:
    """FEED_URI_PARAMS: adds %(date)s (UTC, YYYY-MM-DD) and %(job)s: the Scrapyd job id when run
    by Scrapyd, else this process's id and a random suffix (process ids repeat across hosts and
    containers)."""
    job = getattr(spider, "_job", None) or f"{os.getpid()}-{secrets.token_hex(3)}"
    return {**params, "date": datetime.now(UTC).strftime("%Y-%m-%d"), "job": job}


def default_feed_dir(settings: Settings) -> Path:
    return Path(settings.get("CANNASPIDER_FEED_DIR") or Path(settings["CANNASPIDER_DATA_DIR"]) / "feeds")


class DefaultFeed:
    """Add-on: the dated JSON-lines feed, for crawls that were given no FEEDS (-o, -O, -s FEEDS=…,
    Scrapyd's items_dir, or FEEDS in settings.py all replace it; `-s FEEDS={}` turns feeds off)."""

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> DefaultFeed:
        return cls()

    def update_settings(self, settings: Settings) -> None:
        if settings.getpriority("FEEDS") != SETTINGS_PRIORITIES["default"]:
            return
        uri = f"{default_feed_dir(settings)}/{DEFAULT_FEED_PATH}"
        settings.set("FEEDS", {uri: dict(DEFAULT_FEED_OPTIONS)}, priority="addon")
