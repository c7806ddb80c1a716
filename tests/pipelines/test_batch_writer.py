"""The batch writer and a month without its partition (the crawl began in the month before): the
write makes the partitions and retries the batch (every row stored, the crawl complete); when they
cannot be made, the batch fails its store's crawl (incomplete, with the reason), never a complete
run with its rows lost."""

from __future__ import annotations

import asyncio

from tests.helpers import month_without_partitions
from tests.pipelines.test_writers import Chain, dispensary  # noqa: F401 - the fixture


def crawl_into_a_new_month(db: str, d: int, products: int, *, stray_table: bool = False) -> dict:
    async def scenario() -> dict:
        chain = Chain()
        await chain.store.open()  # the crawl starts (and makes its partitions) before the month ends
        with month_without_partitions(db, stray_table=stray_table):
            await chain.crawl(d, list(range(products)))
            await chain.close()
        return chain.crawler.stats.get_stats()

    return asyncio.run(scenario())


def test_a_month_without_its_partition_is_made_by_the_write_and_no_row_is_lost(dispensary, sql, db):  # noqa: F811
    stats = crawl_into_a_new_month(db, dispensary, 5)
    assert stats["cannaspider/partitions_made"] == 1 and "cannaspider/products_refused" not in stats
    assert sql("SELECT count(*) FROM store_products")[0][0] == 5
    assert sql("SELECT count(*) FROM product_snapshots")[0][0] == 5
    assert sql("SELECT status, error FROM crawl_runs") == [("complete", None)]


def test_rows_refused_for_a_missing_partition_fail_the_stores_crawl(dispensary, sql, db):  # noqa: F811
    stats = crawl_into_a_new_month(db, dispensary, 5, stray_table=True)  # the partition cannot be made
    assert stats["cannaspider/products_refused"] == 5
    assert sql("SELECT count(*) FROM store_products")[0][0] == 0
    [(status, error)] = sql("SELECT status, error FROM crawl_runs")
    assert status == "incomplete"
    assert error.startswith("a batch of this store's rows was refused by the database: no partition of relation")
