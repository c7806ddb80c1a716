"""Writes what discovery finds: DispensaryRecord → discovery_locations + dispensaries
(rediscovery updates, never duplicates), EntryPointResolution → the store's platform id or the
reason it could not be resolved. Store volumes are small, so one statement per store is fine.
A record the database refuses for its values is logged and counted, and the crawl goes on."""

from __future__ import annotations

import logging
from typing import Any

import psycopg
from psycopg.types.json import Jsonb
from scrapy.crawler import Crawler

from cannaspider.db.crawl_database import CrawlDatabase
from cannaspider.db.errors import first_line
from cannaspider.items import DispensaryRecord, EntryPointResolution
from cannaspider.pipelines.batch_writer import refused_for_its_data

logger = logging.getLogger(__name__)

UPSERT_DISPENSARY = """
INSERT INTO dispensaries (platform, platform_dispensary_id, name, slug, menu_url, address, city, state, zip,
                          lat, lng, timezone, phone, is_recreational, is_medical)
VALUES (%(platform)s, %(platform_dispensary_id)s, %(name)s, %(slug)s, %(menu_url)s, %(address)s, %(city)s,
        %(state)s, %(zip)s, %(lat)s, %(lng)s, %(timezone)s, %(phone)s, %(is_recreational)s, %(is_medical)s)
ON CONFLICT (platform, platform_dispensary_id) WHERE platform_dispensary_id IS NOT NULL DO UPDATE SET
    name = EXCLUDED.name, slug = EXCLUDED.slug, menu_url = EXCLUDED.menu_url, address = EXCLUDED.address,
    city = EXCLUDED.city, state = EXCLUDED.state, zip = EXCLUDED.zip, lat = EXCLUDED.lat, lng = EXCLUDED.lng,
    timezone = EXCLUDED.timezone, phone = EXCLUDED.phone, is_recreational = EXCLUDED.is_recreational,
    is_medical = EXCLUDED.is_medical, updated_at = now()
RETURNING id, (xmax = 0) AS inserted
"""
UPSERT_LOCATION = """
INSERT INTO discovery_locations (platform, platform_dispensary_id, name, slug, city, state, menu_url, raw,
                                 dispensary_id)
VALUES (%(platform)s, %(platform_dispensary_id)s, %(name)s, %(slug)s, %(city)s, %(state)s, %(menu_url)s, %(raw)s,
        %(id)s)
ON CONFLICT (platform, platform_dispensary_id) DO UPDATE SET
    name = EXCLUDED.name, slug = EXCLUDED.slug, city = EXCLUDED.city, state = EXCLUDED.state,
    menu_url = EXCLUDED.menu_url, raw = EXCLUDED.raw, dispensary_id = EXCLUDED.dispensary_id, last_seen_at = now()
"""


class DispensaryWriterPipeline:
    def __init__(self, crawler: Crawler):
        self.crawler = crawler
        self.store = CrawlDatabase.for_crawler(crawler)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> DispensaryWriterPipeline:
        return cls(crawler)

    async def process_item(self, item: Any) -> Any:
        if isinstance(item, DispensaryRecord):
            return await self._write_dispensary(item)
        if isinstance(item, EntryPointResolution):
            return await self._write_resolution(item)
        return item

    async def _write_dispensary(self, item: DispensaryRecord) -> DispensaryRecord:
        values = dict(item.__dict__)
        values["raw"] = Jsonb(item.raw_object or {})
        pool = await self.store.open()
        try:
            async with pool.connection() as conn:
                async with conn.transaction():
                    row = await (await conn.execute(UPSERT_DISPENSARY, values)).fetchone()
                    assert row is not None  # an upsert with RETURNING always returns its row
                    values["id"] = row[0]
                    await conn.execute(UPSERT_LOCATION, values)
        except Exception as exc:
            if not refused_for_its_data(exc):
                raise  # an outage or a bug: Scrapy logs it, the item goes no further
            # one store's bad value (a NUL in its name…): this record only; the feed still shows
            # what discovery saw (see README "Feeds and the item schema")
            logger.error(
                "store %r (%r) refused by the database, not stored: %s",
                item.platform_dispensary_id,
                item.name,
                first_line(exc),
            )
            self.crawler.stats.inc_value("cannaspider/dispensaries_refused")
            self.crawler.stats.inc_value("cannaspider/items_not_stored")
            return item
        item.dispensary_id = row[0]
        self.crawler.stats.inc_value("cannaspider/dispensaries_new" if row[1] else "cannaspider/dispensaries_updated")
        return item

    async def _write_resolution(self, item: EntryPointResolution) -> EntryPointResolution:
        pool = await self.store.open()
        async with pool.connection() as conn:
            if item.platform_dispensary_id:
                try:
                    async with conn.transaction():
                        await conn.execute(
                            "UPDATE dispensaries SET platform_dispensary_id = %s, slug = coalesce(%s, slug), "
                            "resolution_error = NULL, resolved_at = now(), updated_at = now() WHERE id = %s",
                            (item.platform_dispensary_id, item.slug, item.dispensary_id),
                        )
                    return item
                except psycopg.errors.UniqueViolation:
                    # two rows for one store (e.g. added by hand and discovered): keep both, say why
                    owner = await (
                        await conn.execute(
                            "SELECT id FROM dispensaries WHERE platform = (SELECT platform FROM dispensaries "
                            "WHERE id = %s) AND platform_dispensary_id = %s",
                            (item.dispensary_id, item.platform_dispensary_id),
                        )
                    ).fetchone()
                    item.error = (
                        f"platform id {item.platform_dispensary_id} already belongs to dispensary "
                        f"{owner[0] if owner else '?'}"
                    )
                    item.platform_dispensary_id, item.method = None, "unresolved"
                    logger.warning("dispensary %s unresolved: %s", item.dispensary_id, item.error)
            if not item.platform_dispensary_id:
                await conn.execute(
                    "UPDATE dispensaries SET resolution_error = %s, updated_at = now() WHERE id = %s",
                    (item.error, item.dispensary_id),
                )
        return item
