"""What the product writer keeps of every field the seed names (pipelines/product_writer.py, on the
real database): Status on the row and each snapshot, brand.description on the brand, rawOptions in
the options (and a product sold under tier names linked to the one sold by size), texts the
normalizer bounded stored whole, and implausible unit prices left out while the price is kept.

And its rows fenced by the task's lease: a worker whose lease was lost (paused past it, the task
re-queued and claimed by another worker) writes no product row or snapshot of that store
afterwards, while the rows written under its lease stand."""

from __future__ import annotations

import asyncio
import copy
import random

import psycopg

from cannaspider import storable
from cannaspider.items import RawProduct
from cannaspider.tasks import queue
from cannaspider.units.crawl_close import StoreOutcome
from sandbox.catalog import _product
from tests.pipelines.test_writers import Chain
from tests.pipelines.test_writers import raw as raw_product


def flower(index: int, **changes: object) -> dict:
    """A sandbox product made an eighth-and-quarter flower of one brand, with `changes`."""
    raw = copy.deepcopy(_product(42, "fields-store", index, 0, "http://127.0.0.1:1"))
    raw.update(
        {
            "Name": "Blue Dream",
            "brandName": "Bud Bros",
            "brandId": "0d3f5a9e-1b2c-4d5e-8f90-123456789abc",
            "brand": {"id": "0d3f5a9e-1b2c-4d5e-8f90-123456789abc", "name": "Bud Bros", "description": None},
            "enterpriseProductId": None,
            "type": "Flower",
            "Options": ["1/8oz", "1/4oz"],
            "rawOptions": ["3.5g", "7g"],
            "Prices": [35, 60],
            "recPrices": [35, 60],
            "medicalPrices": [],
            "recSpecialPrices": [],
            "medicalSpecialPrices": [],
            "POSMetaData": None,
        }
    )
    raw.update(changes)
    return raw


def crawl(chain: Chain, dispensary: int, products: list[dict]):
    async def run() -> None:
        run_id = await chain.store.start_run(dispensary, "product_resync")
        for raw in products:
            await chain.feed(RawProduct(dispensary, run_id, raw))
        seen = [raw["_id"] for raw in products]
        await chain.feed(StoreOutcome(dispensary, run_id, True, len(products), 1, seen_product_ids=seen))

    return run()


def second_store(db: str) -> int:
    with psycopg.connect(db, autocommit=True) as conn:
        return conn.execute(
            "INSERT INTO dispensaries (name, platform_dispensary_id) VALUES ('T', %s) RETURNING id", ("e" * 24,)
        ).fetchone()[0]


def test_status_is_on_the_row_and_each_snapshot_and_the_description_on_the_brand(dispensary, sql):
    async def scenario():
        chain = Chain()
        brand = {"id": "0d3f5a9e-1b2c-4d5e-8f90-123456789abc", "name": "Bud Bros"}
        await crawl(chain, dispensary, [flower(1, Status="Active", brand={**brand, "description": "Grown in AZ."})])
        await crawl(chain, dispensary, [flower(1, Status="Inactive", brand={**brand, "description": "Since 2014."})])
        await crawl(chain, dispensary, [flower(1, Status=None, brand={**brand, "description": None})])
        await chain.close()

    asyncio.run(scenario())
    assert sql("SELECT status FROM store_products") == [(None,)]  # the row is the latest crawl's
    assert sql("SELECT status FROM snapshot_history ORDER BY captured_at, crawl_run_id") == [
        ("Active",),
        ("Inactive",),
        (None,),
    ]
    # the brand keeps the latest description sent (none sent: it stays)
    assert sql("SELECT key, description FROM brands") == [("d:0d3f5a9e-1b2c-4d5e-8f90-123456789abc", "Since 2014.")]
    assert sql("SELECT status FROM crawl_runs") == [("complete",)] * 3


def test_a_product_sold_by_tier_names_is_the_product_sold_by_size(dispensary, db, sql):
    other = second_store(db)

    async def scenario():
        chain = Chain()
        await crawl(chain, dispensary, [flower(1)])
        await crawl(chain, other, [flower(2, Options=["Tier 1", "Tier 2"], rawOptions=["3.5g", "7g"])])
        await chain.close()

    asyncio.run(scenario())
    rows = sql(
        "SELECT dispensary_id, canonical_product_id, unit_price::float8, unit_price_basis, options "
        "FROM store_products ORDER BY dispensary_id"
    )
    assert [r[0] for r in rows] == [dispensary, other]
    assert rows[0][1] == rows[1][1] is not None  # one canonical product
    assert [r[2:4] for r in rows] == [(10.0, "g"), (10.0, "g")]
    tiered = rows[1][4]
    assert [(o["option"], o["raw_option"], o["size_value"]) for o in tiered] == [
        ("Tier 1", "3.5g", 3.5),
        ("Tier 2", "7g", 7.0),
    ]


def test_names_10_kb_long_are_stored_cut_to_their_limit_and_the_crawl_is_complete(dispensary, sql):
    rng = random.Random(7)  # random letters: a repeated one would compress under the index's limit
    long = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(10_000))
    crawler_stats = {}

    async def scenario():
        chain = Chain()
        products = [
            flower(1, Name="Blue " + long),
            # no brandId: the brand's key is its name
            flower(2, brandName="Бренд " + long, brandId=None, brand=None, Name="大麻 " + long),
            flower(3),
        ]
        await crawl(chain, dispensary, products)
        await chain.close()
        crawler_stats.update(chain.crawler.stats.get_stats())

    asyncio.run(scenario())
    rows = sql("SELECT length(name_raw), length(name), length(brand_name_raw) FROM store_products ORDER BY 3, 1")
    assert rows == [(10, 10, 8), (storable.NAME, storable.NAME, 8), (storable.NAME, storable.NAME, storable.BRAND_NAME)]
    assert sql("SELECT count(*) FROM store_products WHERE canonical_product_id IS NULL") == [(0,)]
    assert sql("SELECT status, errors FROM crawl_runs") == [("complete", 0)]
    assert crawler_stats["cannaspider/text_truncated"] == 3
    assert "cannaspider/products_refused" not in crawler_stats


def test_an_implausible_unit_price_is_counted_and_left_out_and_the_price_stored_as_sent(dispensary, sql):
    crawler_stats = {}

    async def scenario():
        chain = Chain()
        products = [flower(1, recPrices=[0, 60], Prices=[0, 60]), flower(2)]
        await crawl(chain, dispensary, products)
        await chain.close()
        crawler_stats.update(chain.crawler.stats.get_stats())

    asyncio.run(scenario())
    rows = sql("SELECT price_rec::float8, unit_price::float8, unit_price_basis FROM store_products ORDER BY id")
    assert rows == [(0.0, None, None), (35.0, 10.0, "g")]
    assert sql("SELECT price_rec::float8 FROM product_snapshots ORDER BY price_rec") == [(0.0,), (35.0,)]
    assert crawler_stats["cannaspider/unit_prices_implausible"] == 1


async def _claim(db: str, worker: str) -> queue.Task:
    async with await psycopg.AsyncConnection.connect(db, autocommit=True) as conn:
        [task] = await queue.claim(conn, "product_resync", worker, lease_s=600)
        return task


def test_a_worker_that_lost_its_lease_writes_no_more_rows_of_the_store(dispensary, sql, db):
    async def scenario() -> dict:
        async with await psycopg.AsyncConnection.connect(db, autocommit=True) as conn:
            await queue.enqueue(conn, "product_resync", dispensary_id=dispensary)
        stale = await _claim(db, "stale-worker")
        chain = Chain(batch_size=3)
        run = await chain.store.start_run(dispensary, "product_resync", stale.lease)
        for i in range(3):  # one batch written under the lease
            await chain.feed(raw_product(i, dispensary, run))
        await chain.products.flush()
        # the worker is paused past its lease: the task is re-queued and another worker claims it
        sql("UPDATE worker_tasks SET lease_expires_at = now() - interval '1 second'")
        taken = await _claim(db, "other-worker")
        assert taken.id == stale.id
        for i in range(3, 6):  # the stale worker resumes with more rows of the same store
            await chain.feed(raw_product(i, dispensary, run, epoch=1))
        await chain.products.flush()
        await chain.close()
        return chain.crawler.stats.get_stats()

    stats = asyncio.run(scenario())
    assert sql("SELECT count(*) FROM store_products")[0][0] == 3
    assert sql("SELECT count(*) FROM product_snapshots")[0][0] == 3
    assert stats["cannaspider/products_written"] == 3 and stats["cannaspider/products_fenced"] == 3


def test_rows_of_a_target_without_a_task_are_not_fenced(dispensary, sql):
    async def scenario() -> None:
        chain = Chain()
        await chain.crawl(dispensary, list(range(4)))
        await chain.close()

    asyncio.run(scenario())
    assert sql("SELECT count(*) FROM store_products")[0][0] == 4
