"""The baseline the ingest benchmark compares against: the classic per-row pipeline, one
blocking INSERT … ON CONFLICT round trip (autocommit) per product, in process_item — what most
Scrapy-to-PostgreSQL tutorials show, and the classic reason a pipeline crawls slower than its
spider (docs/architecture.md, "Database")."""

from __future__ import annotations

import orjson
import psycopg

from cannaspider.db import database_url
from cannaspider.items import StoreProduct

UPSERT_ONE = """
INSERT INTO store_products (dispensary_id, provider, provider_product_id, name_raw, name, brand_name_raw, category,
                            price_rec, price_med, options, thc_value, thc_unit, last_crawl_run_id)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
ON CONFLICT (dispensary_id, provider, provider_product_id) DO UPDATE SET
    name_raw = EXCLUDED.name_raw, name = EXCLUDED.name, price_rec = EXCLUDED.price_rec,
    price_med = EXCLUDED.price_med, options = EXCLUDED.options, last_seen_at = now(), updated_at = now()
"""


class PerRowUpsertPipeline:
    def __init__(self, crawler):
        self.settings = crawler.settings
        self.conn: psycopg.Connection | None = None

    @classmethod
    def from_crawler(cls, crawler):
        return cls(crawler)

    def open_spider(self):
        self.conn = psycopg.connect(database_url(self.settings), autocommit=True)

    def close_spider(self):
        self.conn.close()

    def process_item(self, item):
        if not isinstance(item, StoreProduct):
            return item
        self.conn.execute(
            UPSERT_ONE,
            (
                item.dispensary_id,
                item.provider,
                item.provider_product_id,
                item.name_raw,
                item.name,
                item.brand_name_raw,
                item.category,
                item.price_rec,
                item.price_med,
                orjson.dumps(item.options, default=float).decode(),
                item.thc.value,
                item.thc.unit,
                item.crawl_run_id,
            ),
        )
        return item
