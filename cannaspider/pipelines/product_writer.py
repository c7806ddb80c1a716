"""Writes StoreProduct, a batch per statement: the store_products upsert and the crawl's
store_product_snapshots rows, from one JSON document that PostgreSQL unpacks once
(jsonb_array_elements). One statement is one transaction: a product's current row and its
point-in-time snapshot are committed together or not at all. A product in the feed is in stock
with zero misses (it came back).

A row the database refuses for its values (see batch_writer.py) is lost, and only that row; its
store's crawl is incomplete, with the reason (units/crawl_close.py): a run is never `complete`
with rows lost, and an incomplete crawl marks nothing missing. The normalizer bounds what it can
(storable.py, docs/architecture.md "Text limits"), so a product the database refuses on every crawl is
a defect to fix, not a state to live with. The run records how many rows were refused
(crawl_runs.errors), and the crawl's stats how many items went to the feed without being stored
(`cannaspider/items_not_stored`: the feed is what the crawl saw, see README "Feeds and the item
schema")."""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any

import orjson
import psycopg
from psycopg.types.json import Jsonb
from scrapy.crawler import Crawler

from cannaspider.items import StoreProduct
from cannaspider.pipelines.batch_writer import BatchWriterPipeline, json_columns

logger = logging.getLogger(__name__)

# (column, SQL type) in row order; jsonb columns carry nested JSON as is
COLUMNS = (
    ("seq", "bigint"),
    ("dispensary_id", "bigint"),
    ("provider", "text"),
    ("provider_product_id", "text"),
    ("name_raw", "text"),
    ("name", "text"),
    ("brand_name_raw", "text"),
    ("brand_id", "text"),
    ("category", "text"),
    ("subcategory", "text"),
    ("strain_type", "text"),
    ("price_rec", "numeric"),
    ("price_med", "numeric"),
    ("price_rec_special", "numeric"),
    ("price_med_special", "numeric"),
    ("is_on_special", "boolean"),
    ("options", "jsonb"),
    ("thc_value", "numeric"),
    ("thc_unit", "text"),
    ("cbd_value", "numeric"),
    ("cbd_unit", "text"),
    ("cannabinoids", "jsonb"),
    ("specials", "jsonb"),
    ("effects", "jsonb"),
    ("image_url", "text"),
    ("images", "jsonb"),
    ("quantity_available", "integer"),
    ("provider_created_at", "timestamptz"),
    ("provider_updated_at", "timestamptz"),
    ("last_crawl_run_id", "bigint"),
    ("enterprise_product_id", "text"),
    ("unit_price", "numeric"),
    ("unit_price_special", "numeric"),
    ("unit_price_basis", "text"),
    # the keys that name the product's brand and canonical product (cannaspider/identity.py)
    ("brand_name_key", "text"),
    ("name_key", "text"),
    ("size_key", "text"),
    ("status", "text"),
    ("brand_description", "text"),  # stored on the brand (brands.description)
)
# in the batch, not columns of store_products
KEYS_ONLY = ("seq", "brand_name_key", "name_key", "size_key", "brand_description")
LINKS = ("brand_ref_id", "canonical_brand_id", "canonical_product_id")
# a snapshot: what the product looked like in this crawl (in the feed, so in stock), in the lean
# layout of migrations/011_lean_snapshots.sql: the product by its store_products id, units as codes
SNAPSHOT = {
    "store_product_id": "u.id",
    "crawl_run_id": "b.last_crawl_run_id",
    "price_rec": "b.price_rec",
    "price_med": "b.price_med",
    "price_rec_special": "b.price_rec_special",
    "price_med_special": "b.price_med_special",
    "is_on_special": "b.is_on_special",
    "specials": "nullif(b.specials, '[]'::jsonb)",
    "is_in_stock": "true",
    "quantity_available": "b.quantity_available",
    "thc_value": "b.thc_value",
    "thc_unit": "snapshot_unit_code(b.thc_unit)",
    "cbd_value": "b.cbd_value",
    "cbd_unit": "snapshot_unit_code(b.cbd_unit)",
    "status": "b.status",
}

# The batch's brands and canonical products (docs/analytics.md, "One brand, one product", "Across
# platforms"): those that exist are read, the others inserted, in key order (two batches inserting the same keys wait
# for each other instead of deadlocking). A key another batch inserted since this statement began
# is a conflict that DO UPDATE turns into that row, returned (DO NOTHING would return nothing, and
# this statement's snapshot does not see the row). A new brand is its operator alias's brand, else
# the first brand of the same normalized name (in the table, else in the batch), else its own.
# A product is the canonical product of its enterprise id (Dutchie's, a chain's catalog id), else the
# one of its canonical brand, category, name key and size key (of any platform: what Jane and Dutchie
# have in common), else a new one keyed by those ('b…'), else by the enterprise id alone, else its own.
# A brand's description is the one the batch sent (a brand already known is updated when it
# differs, its rows locked in id order: two batches wait for each other, never deadlock).
LINK = """
keyed AS MATERIALIZED (
    SELECT b.*, CASE WHEN b.brand_id IS NOT NULL
                     THEN CASE WHEN b.provider = 'dutchie' THEN 'd:' ELSE b.provider || ':' END || b.brand_id
                     WHEN b.brand_name_key IS NOT NULL THEN 'n:' || b.brand_name_key END AS brand_key
      FROM batch b),
brand_keys AS (
    SELECT DISTINCT ON (brand_key) brand_key, brand_id, brand_name_raw, brand_name_key, brand_description
      FROM keyed WHERE brand_key IS NOT NULL ORDER BY brand_key, seq),
brands_found AS (
    SELECT br.key, br.id, coalesce(br.canonical_brand_id, br.id) AS canonical
      FROM brands br JOIN brand_keys k ON br.key = k.brand_key),
brands_described AS (
    UPDATE brands br SET description = d.brand_description
      FROM (SELECT b.id, k.brand_description FROM brands b JOIN brand_keys k ON b.key = k.brand_key
             WHERE b.description IS DISTINCT FROM k.brand_description AND k.brand_description IS NOT NULL
             ORDER BY b.id FOR UPDATE OF b) d
     WHERE br.id = d.id),
brand_new_keys AS MATERIALIZED (
    SELECT k.*, coalesce((SELECT a.brand_id FROM brand_aliases a WHERE a.alias = k.brand_name_key),
                         (SELECT coalesce(o.canonical_brand_id, o.id) FROM brands o
                           WHERE o.normalized_name = k.brand_name_key ORDER BY o.id LIMIT 1)) AS known,
           row_number() OVER (PARTITION BY k.brand_name_key ORDER BY k.brand_key) AS rank
      FROM brand_keys k
     WHERE NOT EXISTS (SELECT 1 FROM brands_found f WHERE f.key = k.brand_key)),
-- a name new to the table: its first key in the batch ('d:' before 'n:') leads, the others of the
-- same name join it (rows this statement inserts are invisible to its other parts but RETURNING)
brands_leading AS (
    INSERT INTO brands AS br (key, provider_brand_id, name, normalized_name, description)
    SELECT brand_key, brand_id, brand_name_raw, brand_name_key, brand_description FROM brand_new_keys
     WHERE known IS NULL AND (rank = 1 OR brand_name_key IS NULL)
     ORDER BY brand_key
    ON CONFLICT (key) DO UPDATE SET key = EXCLUDED.key
    RETURNING br.key, br.id, coalesce(br.canonical_brand_id, br.id) AS canonical, br.normalized_name),
brands_joining AS (
    INSERT INTO brands AS br (key, provider_brand_id, name, normalized_name, description, canonical_brand_id)
    SELECT k.brand_key, k.brand_id, k.brand_name_raw, k.brand_name_key, k.brand_description,
           coalesce(k.known, (SELECT l.canonical FROM brands_leading l WHERE l.normalized_name = k.brand_name_key))
      FROM brand_new_keys k
     WHERE NOT (k.known IS NULL AND (k.rank = 1 OR k.brand_name_key IS NULL))
     ORDER BY k.brand_key
    ON CONFLICT (key) DO UPDATE SET key = EXCLUDED.key
    RETURNING br.key, br.id, coalesce(br.canonical_brand_id, br.id) AS canonical),
brands_all AS (
    SELECT * FROM brands_found UNION ALL SELECT key, id, canonical FROM brands_leading
    UNION ALL SELECT * FROM brands_joining),
product_attrs AS MATERIALIZED (
    SELECT k.*, ba.id AS brand_ref_id, ba.canonical AS canonical_brand_id,
           CASE WHEN ba.canonical IS NOT NULL AND k.name_key IS NOT NULL
                THEN 'b' || ba.canonical || '|' || coalesce(k.category, '') || '|' || k.name_key || '|' || k.size_key
           END AS attr_key
      FROM keyed k LEFT JOIN brands_all ba ON ba.key = k.brand_key),
product_keyed AS MATERIALIZED (
    -- a new product's key: the batch's first row of its enterprise id names it (the chain's other
    -- spellings of it in the batch join it), else its own brand, category, name and sizes
    SELECT a.*, CASE WHEN a.enterprise_product_id IS NOT NULL
                     THEN first_value(coalesce(a.attr_key, 'e:' || a.enterprise_product_id))
                              OVER (PARTITION BY a.enterprise_product_id ORDER BY a.seq)
                     ELSE coalesce(a.attr_key,
                                   's:' || a.dispensary_id || ':' || a.provider || ':' || a.provider_product_id)
                END AS product_key,
           coalesce(
               (SELECT cp.id FROM canonical_products cp
                 WHERE a.enterprise_product_id IS NOT NULL AND cp.enterprise_product_id = a.enterprise_product_id
                 ORDER BY cp.id LIMIT 1),
               (SELECT cp.id FROM canonical_products cp
                 WHERE a.attr_key IS NOT NULL AND cp.canonical_brand_id = a.canonical_brand_id
                   AND cp.name_key = a.name_key AND cp.size_key = a.size_key
                   AND coalesce(cp.category, '') = coalesce(a.category, '')
                 ORDER BY cp.id LIMIT 1),
               (SELECT cp.id FROM canonical_products cp
                 WHERE a.attr_key IS NULL AND a.enterprise_product_id IS NULL
                   AND cp.key = 's:' || a.dispensary_id || ':' || a.provider || ':' || a.provider_product_id)
           ) AS found_id
      FROM product_attrs a),
product_keys AS (
    SELECT DISTINCT ON (product_key) product_key, canonical_brand_id, category, name, name_key, size_key,
           enterprise_product_id
      FROM product_keyed WHERE found_id IS NULL
     ORDER BY product_key, enterprise_product_id NULLS LAST, seq),
products_new AS (
    INSERT INTO canonical_products AS cp (key, canonical_brand_id, category, name, name_key, size_key,
                                          enterprise_product_id)
    SELECT k.product_key, k.canonical_brand_id, k.category, k.name, k.name_key, k.size_key, k.enterprise_product_id
      FROM product_keys k
     ORDER BY k.product_key
    ON CONFLICT (key) DO UPDATE SET key = EXCLUDED.key
    RETURNING cp.key, cp.id),
-- a product first seen without an enterprise id (through Jane, say) learns Dutchie's when a store
-- sends it, so that the chain's other spellings of it join it by the id (rows locked in id order)
products_enterprise AS (
    UPDATE canonical_products cp SET enterprise_product_id = e.enterprise_product_id
      FROM (SELECT c.id, x.enterprise_product_id FROM canonical_products c
              JOIN (SELECT DISTINCT ON (found_id) found_id, enterprise_product_id FROM product_keyed
                     WHERE found_id IS NOT NULL AND enterprise_product_id IS NOT NULL
                     ORDER BY found_id, seq) x ON x.found_id = c.id
             WHERE c.enterprise_product_id IS NULL
             ORDER BY c.id FOR UPDATE OF c) e
     WHERE cp.id = e.id),
linked AS (
    SELECT pk.*, coalesce(pk.found_id, pn.id) AS canonical_product_id
      FROM product_keyed pk LEFT JOIN products_new pn ON pk.found_id IS NULL AND pn.key = pk.product_key),"""


# The writes of a crawl run opened for a task are fenced by the task's lease (docs/architecture.md,
# "Task queue"): the batch carries the lease (task, worker, attempt) of each such run, and the rows
# of a run whose lease is no longer the task's current one (it expired while the worker was paused,
# the task went back to the queue or to another worker, or was cancelled) are not written. The
# check is in the statement that writes; rows of an explicit target's run carry no lease.
FENCE = """
fenced AS MATERIALIZED (
    SELECT l.run FROM jsonb_to_recordset(%t) AS l(run bigint, id bigint, worker text, attempt integer)
     WHERE NOT EXISTS (SELECT 1 FROM worker_tasks t
                        WHERE t.id = l.id AND t.status = 'running' AND t.claimed_by = l.worker
                          AND t.attempts = l.attempt)),"""


def write_statement(columns: tuple[tuple[str, str], ...], link: bool = True) -> str:
    """The batch's statement for rows of `columns`; `link`: with the brands and canonical products
    (without: the statement before migration 016, for benchmarks/ingest.py --market-cost)."""
    target = [name for name, _ in columns if name not in KEYS_ONLY] + (list(LINKS) if link else [])
    updatable = [c for c in target if c not in ("dispensary_id", "provider", "provider_product_id")]
    # Data-modifying CTEs all run, each seeing the batch once. Two crawls of one store in the same
    # batch send a product twice: both are snapshots, the later one is the product row (seq).
    return f"""
WITH {FENCE}
batch AS MATERIALIZED (
    SELECT * FROM (SELECT {json_columns(columns)} FROM jsonb_array_elements(%t) AS r) AS rows
     WHERE NOT EXISTS (SELECT 1 FROM fenced f WHERE f.run = rows.last_crawl_run_id)),{LINK if link else ""}
upserted AS (
    INSERT INTO store_products AS sp ({", ".join(target)}, is_in_stock, stock_status, consecutive_misses,
                                      last_seen_at, updated_at)
    SELECT DISTINCT ON (dispensary_id, provider, provider_product_id)
           {", ".join(target)}, true, 'in_stock', 0, now(), now()
      FROM {"linked" if link else "batch"}
     ORDER BY dispensary_id, provider, provider_product_id, seq DESC
    ON CONFLICT (dispensary_id, provider, provider_product_id) DO UPDATE SET
        {", ".join(f"{c} = EXCLUDED.{c}" for c in updatable)},
        is_in_stock = true, stock_status = 'in_stock', consecutive_misses = 0,
        last_seen_at = now(), updated_at = now()
    RETURNING (xmax = 0) AS inserted, id, dispensary_id, provider, provider_product_id, last_crawl_run_id),
snapshots AS (  -- every batch row, named by its product's id (two crawls' rows share the one id)
    INSERT INTO product_snapshots ({", ".join(SNAPSHOT)})
    SELECT {", ".join(SNAPSHOT.values())}
      FROM batch b JOIN upserted u USING (dispensary_id, provider, provider_product_id))
SELECT dispensary_id, last_crawl_run_id, count(*) FROM upserted WHERE inserted
 GROUP BY dispensary_id, last_crawl_run_id
UNION ALL SELECT NULL, run, NULL FROM fenced
"""


WRITE = write_statement(COLUMNS)


class ProductWriterPipeline(BatchWriterPipeline):
    item_class = StoreProduct
    statement = WRITE
    seq = 0

    def __init__(self, crawler: Crawler):
        super().__init__(crawler)
        self.store.ledger.products_writer = True  # a store's close waits for its rows (units/crawl_close.py)

    def row(self, p: StoreProduct) -> tuple[Any, ...]:
        self.seq += 1
        return (
            self.seq,
            p.dispensary_id,
            p.provider,
            p.provider_product_id,
            p.name_raw,
            p.name,
            p.brand_name_raw,
            p.brand_id,
            p.category,
            p.subcategory,
            p.strain_type,
            p.price_rec,
            p.price_med,
            p.price_rec_special,
            p.price_med_special,
            p.is_on_special,
            p.options,
            p.thc.value,
            p.thc.unit,
            p.cbd.value,
            p.cbd.unit,
            p.cannabinoids,
            p.specials,
            p.effects,
            p.image_url,
            p.images,
            p.quantity_available,
            p.provider_created_at,
            p.provider_updated_at,
            p.crawl_run_id,
            p.enterprise_product_id,
            p.unit_price,
            p.unit_price_special,
            p.unit_price_basis,
            p.brand_name_key,
            p.name_key,
            p.size_key,
            p.status,
            p.brand_description,
        )

    def after_buffered(self, item: StoreProduct) -> None:
        self.store.ledger.account((item.dispensary_id, item.crawl_run_id))

    async def write(
        self, conn: psycopg.AsyncConnection, batch: Jsonb, keys: list[tuple[Any, ...]]
    ) -> tuple[dict[tuple[Any, ...], int], set[int]]:
        """New rows per store and crawl, and the crawl runs whose rows the lease fenced off; rows
        settled are counted from the batch's keys (after_write)."""
        leases = Jsonb(self.store.runs.leases_of(run for _, run in keys))
        cur = await conn.execute(self.statement, (leases, batch))
        inserted: dict[tuple[Any, ...], int] = {}
        fenced: set[int] = set()
        for d, r, n in await cur.fetchall():
            if d is None:
                fenced.add(r)
            else:
                inserted[(d, r)] = n
        return inserted, fenced

    def after_refused(self, keys: list[tuple[Any, ...]], *, bad_rows: bool = False, reason: str = "") -> None:
        # settled, if not stored: the store's completion need not wait out its timeout for them
        for run_key, n in Counter(keys).items():
            self.store.ledger.written(run_key, n, 0)
            if bad_rows:
                self.store.ledger.refuse(run_key, n, reason)
        self.crawler.stats.inc_value("cannaspider/items_not_stored", len(keys))  # they went on to the feed

    def after_unencodable(self, key: tuple[Any, ...], item: StoreProduct, exc: Exception) -> None:
        super().after_unencodable(key, item, exc)
        # dropped (it could not go to a feed either); accounted and settled so completion goes on
        self.store.ledger.account(key)
        self.store.ledger.written(key, 1, 0)
        self.store.ledger.refuse(key, 1, f"unexpected {type(exc).__name__}: {exc}")

    def after_lost_at_close(self, rows: int) -> None:
        self.crawler.stats.inc_value("cannaspider/items_not_stored", rows)

    def describe_item(self, item: StoreProduct) -> str:
        return f"dispensary {item.dispensary_id} product {item.provider_product_id!r}"

    def describe_row(self, row: bytes) -> str:
        values = orjson.loads(row)
        return f"dispensary {values[1]} product {values[3]!r}"

    def after_write(self, keys: list[tuple[Any, ...]], written: tuple[dict[tuple[Any, ...], int], set[int]]) -> None:
        inserted, fenced = written
        stored = 0
        for run_key, n in Counter(keys).items():
            self.store.ledger.written(run_key, n, inserted.get(run_key, 0))  # settled, stored or not
            if run_key[1] in fenced:
                logger.warning(
                    "dispensary %s: %d product row(s) of crawl run %s not written: its task's lease was lost",
                    run_key[0],
                    n,
                    run_key[1],
                )
                self.crawler.stats.inc_value("cannaspider/products_fenced", n)
            else:
                stored += n
        self.crawler.stats.inc_value("cannaspider/products_written", stored)
        self.crawler.stats.inc_value("cannaspider/snapshots_written", stored)
