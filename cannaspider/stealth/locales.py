"""The state and time zone of the store a session crawls: its identity's Accept-Language fits
them (stealth/identity.py). Read from `dispensaries` once per store and crawl."""

from __future__ import annotations

from scrapy.crawler import Crawler

from cannaspider.db.crawl_database import CrawlDatabase

Locale = tuple[str | None, str | None]  # (state, IANA time zone)


class StoreLocales:
    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.known: dict[int, Locale] = {}

    async def of(self, key: object) -> Locale:
        """The locale of a session key (stealth/routing.py); the spider's state for a key that
        is no store, or when the database cannot say."""
        spider_state = getattr(self.crawler.spider, "state", None)
        fallback: Locale = (spider_state if isinstance(spider_state, str) else None, None)
        if not (isinstance(key, tuple) and key[0] == "dispensary" and isinstance(key[1], int)):
            return fallback
        dispensary_id: int = key[1]
        if dispensary_id not in self.known:
            try:
                db = await CrawlDatabase.for_crawler(self.crawler).open()
                async with db.connection() as conn:
                    row = await (
                        await conn.execute("SELECT state, timezone FROM dispensaries WHERE id = %s", (dispensary_id,))
                    ).fetchone()
                self.known[dispensary_id] = (row[0], row[1]) if row else fallback
            except Exception:  # noqa: BLE001 - Accept-Language then follows the spider's state
                return fallback
        return self.known[dispensary_id]
