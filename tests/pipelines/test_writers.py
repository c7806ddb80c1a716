"""Batch writers and crawl completion, built with get_crawler and run on the real database."""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import logging
from types import SimpleNamespace

import psycopg
import pytest
from scrapy.exceptions import DropItem

from cannaspider.db.crawl_database import CrawlDatabase
from cannaspider.db.errors import DatabaseSetupError
from cannaspider.items import DispensaryRecord, Potency, RawProduct, StoreProduct
from cannaspider.pipelines.dispensary_writer import DispensaryWriterPipeline
from cannaspider.pipelines.normalize import NormalizeProductPipeline
from cannaspider.pipelines.product_writer import ProductWriterPipeline
from cannaspider.units.crawl_close import CrawlClose, StoreOutcome
from sandbox.catalog import _product
from tests.helpers import project_crawler


def raw(index: int, dispensary_id: int, run_id: int, epoch: int = 0) -> RawProduct:
    return RawProduct(dispensary_id, run_id, _product(42, "pipeline-store", index, epoch, "http://127.0.0.1:1"))


async def settle(result):
    """process_item returns the item, or an awaitable when its batch is full (as Scrapy allows)."""
    return await result if inspect.isawaitable(result) else result


class Chain:
    """normalize → products (and their snapshots) → completion, as Scrapy would run them."""

    def __init__(self, batch_size: int = 1000, **settings):
        self.crawler = project_crawler(DB_WRITE_BATCH_SIZE=batch_size, **settings)
        self.normalize = NormalizeProductPipeline.from_crawler(self.crawler)
        self.products = ProductWriterPipeline.from_crawler(self.crawler)
        self.completion = CrawlClose.for_crawler(self.crawler)
        self.store = CrawlDatabase.for_crawler(self.crawler)

    async def feed(self, item):
        if isinstance(item, StoreOutcome):
            return await self.completion.close(item)  # the store's close (the lifecycle's, in a crawl)
        try:
            item = self.normalize.process_item(item)
        except DropItem:
            return None
        return await settle(self.products.process_item(item))

    async def crawl(
        self,
        dispensary_id: int,
        indices: list[int],
        *,
        complete: bool = True,
        epoch: int = 0,
        extra_seen: tuple[str, ...] = (),
    ) -> None:
        run_id = await self.store.start_run(dispensary_id, "product_resync")
        items = [raw(i, dispensary_id, run_id, epoch) for i in indices]
        for item in items:
            await self.feed(item)
        seen = [i.raw["_id"] for i in items] + list(extra_seen)
        await self.feed(StoreOutcome(dispensary_id, run_id, complete, len(items), 1, seen_product_ids=seen))

    async def close(self):
        await self.products.close_spider()
        await self.store.close()


@pytest.fixture
def dispensary(db, monkeypatch):
    monkeypatch.setenv("DATABASE_URL", db)
    with psycopg.connect(db, autocommit=True) as conn:
        return conn.execute(
            "INSERT INTO dispensaries (name, platform_dispensary_id) VALUES ('P', %s) RETURNING id", ("c" * 24,)
        ).fetchone()[0]


def state(sql, d):
    return {
        r[0]: (r[1], r[2])
        for r in sql(
            "SELECT provider_product_id, consecutive_misses, stock_status FROM store_products WHERE dispensary_id = %s",
            (d,),
        )
    }


def test_batches_are_written_during_the_crawl_and_the_rest_on_close(dispensary, sql):
    async def settle_writers(chain):
        writer = chain.products
        while writer.inflight and not writer.inflight.done():  # background writes (they chain)
            await writer.inflight

    async def scenario():
        chain = Chain(batch_size=4)
        run_id = await chain.store.start_run(dispensary, "product_resync")
        for i in range(10):
            await chain.feed(raw(i, dispensary, run_id))
        await settle_writers(chain)
        during = sql("SELECT count(*) FROM store_products")[0][0]
        for i in range(10, 12):  # fewer than a batch: they wait in the buffer…
            await chain.feed(raw(i, dispensary, run_id))
        await settle_writers(chain)
        still = sql("SELECT count(*) FROM store_products")[0][0]
        await chain.close()  # …until the crawl closes
        return during, still, chain.crawler.stats.get_value("cannaspider/products_written")

    during, still, written = asyncio.run(scenario())
    assert during >= 4 and still == during
    assert written == 12
    assert sql("SELECT count(*) FROM store_products")[0][0] == 12
    assert sql("SELECT count(*) FROM store_product_snapshots")[0][0] == 12


def test_oos_rules_apply_only_to_complete_crawls(dispensary, sql):
    ids = [_product(42, "pipeline-store", i, 0, "http://127.0.0.1:1")["_id"] for i in range(6)]

    async def scenario():
        chain = Chain()
        await chain.crawl(dispensary, list(range(6)))
        await chain.crawl(dispensary, [0, 1, 2], complete=False)  # incomplete: nothing missing
        after_incomplete = state(sql, dispensary)
        for _ in range(3):
            await chain.crawl(dispensary, [0, 1, 2])  # 3, 4, 5 miss three times
        after_three = state(sql, dispensary)
        await chain.crawl(dispensary, [0, 1, 2, 3])  # 3 comes back
        await chain.close()
        return after_incomplete, after_three

    after_incomplete, after_three = asyncio.run(scenario())
    assert all(v == (0, "in_stock") for v in after_incomplete.values())
    assert [after_three[i] for i in ids] == [(0, "in_stock")] * 3 + [(3, "oos")] * 3
    final = state(sql, dispensary)
    assert final[ids[3]] == (0, "in_stock") and final[ids[4]] == (3, "oos")
    runs = sql("SELECT status, products_missed, products_marked_oos FROM crawl_runs ORDER BY id")
    assert runs == [
        ("complete", 0, 0),
        ("incomplete", 0, 0),
        ("complete", 3, 0),
        ("complete", 3, 0),
        ("complete", 3, 3),
        ("complete", 0, 0),
    ]


def test_a_product_in_the_feed_that_failed_normalization_is_not_counted_missing(dispensary, sql):
    async def scenario():
        chain = Chain()
        await chain.crawl(dispensary, [0, 1])
        bad_id = _product(42, "pipeline-store", 1, 0, "http://127.0.0.1:1")["_id"]
        for _ in range(3):
            # product 1 is in the feed but unusable this time: it must not gather misses
            await chain.crawl(dispensary, [0], extra_seen=(bad_id,))
        await chain.close()

    asyncio.run(scenario())
    assert {v for v in state(sql, dispensary).values()} == {(0, "in_stock")}


def test_completion_waits_for_products_still_in_flight_and_gives_up_safely(dispensary, sql):
    async def scenario():
        chain = Chain(CRAWL_COMPLETION_WAIT_S=0.3)
        await chain.crawl(dispensary, [0, 1, 2])
        run_id = await chain.store.start_run(dispensary, "product_resync")
        await chain.feed(raw(0, dispensary, run_id))
        # the spider says it yielded 3 products but only one ever arrives
        await chain.feed(StoreOutcome(dispensary, run_id, True, 3, 1, seen_product_ids=[]))
        await chain.close()

    asyncio.run(scenario())
    assert all(v == (0, "in_stock") for v in state(sql, dispensary).values())
    status, error = sql("SELECT status, error FROM crawl_runs ORDER BY id DESC LIMIT 1")[0]
    assert status == "incomplete" and "only 1 of 3 products were written" in error


def test_database_outage_keeps_buffered_rows_and_the_crawl_marks_nothing_missing(dispensary, sql, db, admin_url):
    name = psycopg.conninfo.conninfo_to_dict(db)["dbname"]

    def outage(away: bool) -> None:
        # a real outage for the client: its connections cut and its database gone until renamed back
        src, dst = (name, f"{name}_away") if away else (f"{name}_away", name)
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (src,))
            conn.execute(f'ALTER DATABASE "{src}" RENAME TO "{dst}"')

    async def scenario():
        chain = Chain(batch_size=2, DB_POOL_TIMEOUT_S=2)
        run_id = await chain.store.start_run(dispensary, "product_resync")
        await chain.store.close()
        outage(True)
        try:
            await chain.feed(raw(0, dispensary, run_id))
            await settle(chain.products.process_item(chain.normalize.process_item(raw(1, dispensary, run_id))))
            await chain.products.inflight  # the background write fails: the server is gone
            assert len(chain.products.buffer) == 2  # kept, not dropped
            with pytest.raises(DatabaseSetupError):
                await chain.products.flush()
            assert len(chain.products.buffer) == 2
        finally:
            outage(False)  # the server is back
        await chain.close()

    asyncio.run(scenario())
    assert sql("SELECT count(*) FROM store_products WHERE dispensary_id = %s", (dispensary,))[0][0] == 2


def bad(product: StoreProduct, kind: str) -> StoreProduct:
    """A product with one value PostgreSQL refuses (as if the normalizer had let it through)."""
    if kind == "price":
        return dataclasses.replace(product, price_rec=1e15)  # > numeric(12, 2)
    if kind == "potency":
        return dataclasses.replace(product, thc=Potency(1e12, "percent"))  # > numeric(12, 3)
    if kind == "quantity":
        return dataclasses.replace(product, quantity_available=10**10)  # > integer
    assert kind == "nul"
    return dataclasses.replace(product, name="Bad\x00Name")  # text cannot hold NUL


def test_bad_rows_are_isolated_and_every_good_row_of_every_store_is_written(dispensary, sql, db, caplog):
    """One batch of three stores, with four bad rows among them: only those four are lost."""
    with psycopg.connect(db, autocommit=True) as conn:
        others = [
            conn.execute(
                "INSERT INTO dispensaries (name, platform_dispensary_id) VALUES ('Q', %s) RETURNING id", (c * 24,)
            ).fetchone()[0]
            for c in "de"
        ]
    stores = [dispensary, *others]
    kinds = {(0, 1): "price", (1, 3): "potency", (2, 0): "quantity", (2, 4): "nul"}

    async def scenario():
        chain = Chain(batch_size=1000, CRAWL_COMPLETION_WAIT_S=60)
        runs, seen = [], {}
        for s, d in enumerate(stores):
            run_id = await chain.store.start_run(d, "product_resync")
            runs.append(run_id)
            products = [chain.normalize.process_item(raw(i, d, run_id)) for i in range(5)]
            products = [bad(p, kinds[s, i]) if (s, i) in kinds else p for i, p in enumerate(products)]
            seen[d] = [p.provider_product_id for p in products]
            for p in products:
                await settle(chain.products.process_item(p))  # all 15 rows wait in one batch
        started = asyncio.get_running_loop().time()
        for d, run_id in zip(stores, runs, strict=True):
            await chain.feed(StoreOutcome(d, run_id, True, 5, 1, seen_product_ids=seen[d]))
        waited = asyncio.get_running_loop().time() - started
        await chain.close()
        return waited, chain.crawler.stats.get_stats(), seen

    with caplog.at_level(logging.ERROR):
        waited, stats, seen = asyncio.run(scenario())
    assert waited < 30  # settled at once, not after the completion's 60 s wait
    for s, d in enumerate(stores):
        good = {seen[d][i] for i in range(5) if (s, i) not in kinds}
        stored = {r[0] for r in sql("SELECT provider_product_id FROM store_products WHERE dispensary_id = %s", (d,))}
        snapshots = sql("SELECT provider_product_id FROM store_product_snapshots WHERE dispensary_id = %s", (d,))
        assert stored == good and {r[0] for r in snapshots} == good and len(snapshots) == len(good)
    assert stats["cannaspider/products_written"] == 11
    assert stats["cannaspider/products_refused"] == 4
    assert stats["cannaspider/items_not_stored"] == 4
    refused = [r.getMessage() for r in caplog.records if "refused by the database, not stored" in r.getMessage()]
    assert len(refused) == 4  # each bad row once, with its store and product
    for (s, i), _ in kinds.items():
        assert sum(f"dispensary {stores[s]} product '{seen[stores[s]][i]}'" in m for m in refused) == 1
    # rows were lost: no crawl is complete (nothing is missed), each says how many and why
    runs = sql("SELECT dispensary_id, status, errors, products_missed, error FROM crawl_runs ORDER BY id")
    assert [r[:4] for r in runs] == [
        (stores[0], "incomplete", 1, 0),
        (stores[1], "incomplete", 1, 0),
        (stores[2], "incomplete", 2, 0),
    ]
    assert [r[4] for r in runs] == [
        "1 of this store's rows were not stored: numeric field overflow",
        "1 of this store's rows were not stored: numeric field overflow",
        "2 of this store's rows were not stored: " + 'value "10000000000" is out of range for type integer',
    ]


def test_a_store_with_a_product_the_database_always_refuses_is_never_complete_and_marks_nothing(dispensary, sql):
    """Never a complete run with rows lost (docs/architecture.md, "Crawl correctness"): such a
    store's crawls say why they are incomplete, and its products' stock stays as it was."""

    async def crawl(chain, indices):
        run_id = await chain.store.start_run(dispensary, "product_resync")
        products = [chain.normalize.process_item(raw(i, dispensary, run_id)) for i in indices]
        products = [bad(p, "price") if i == 0 else p for i, p in zip(indices, products, strict=True)]
        for p in products:
            await chain.feed(p)
        seen = [p.provider_product_id for p in products]
        await chain.feed(StoreOutcome(dispensary, run_id, True, len(seen), 1, seen_product_ids=seen))

    async def scenario():
        chain = Chain()
        await crawl(chain, [0, 1, 2])
        for _ in range(3):
            await crawl(chain, [0, 1])  # product 2 is gone; product 0 is refused every time
        await chain.close()

    asyncio.run(scenario())
    ids = [_product(42, "pipeline-store", i, 0, "http://127.0.0.1:1")["_id"] for i in range(3)]
    assert state(sql, dispensary) == {ids[1]: (0, "in_stock"), ids[2]: (0, "in_stock")}
    assert (
        sql("SELECT status, error FROM crawl_runs ORDER BY id")
        == [("incomplete", "1 of this store's rows were not stored: numeric field overflow")] * 4
    )


def test_a_row_the_writer_cannot_encode_is_dropped_and_never_stalls_completion(dispensary, sql, caplog):
    async def scenario():
        chain = Chain(CRAWL_COMPLETION_WAIT_S=60)
        run_id = await chain.store.start_run(dispensary, "product_resync")
        products = [chain.normalize.process_item(raw(i, dispensary, run_id)) for i in range(3)]
        # a lone surrogate is valid JSON (\ud800) but not UTF-8: orjson raises TypeError
        products[1] = dataclasses.replace(products[1], name="Bad \ud800")
        for p in products[::2]:
            await chain.feed(p)
        with pytest.raises(DropItem, match="not stored: unexpected TypeError"):
            chain.products.process_item(products[1])
        started = asyncio.get_running_loop().time()
        seen = [p.provider_product_id for p in products]
        await chain.feed(StoreOutcome(dispensary, run_id, True, 3, 1, seen_product_ids=seen))
        waited = asyncio.get_running_loop().time() - started
        await chain.close()
        return waited, chain.crawler.stats.get_stats(), products[1].provider_product_id

    with caplog.at_level(logging.ERROR):
        waited, stats, bad_id = asyncio.run(scenario())
    assert waited < 30  # not the completion's 60 s timeout
    assert sql("SELECT count(*) FROM store_products WHERE dispensary_id = %s", (dispensary,))[0][0] == 2
    assert stats["cannaspider/products_refused"] == 1 and "cannaspider/items_not_stored" not in stats
    assert any(f"product {bad_id!r} cannot be stored" in r.getMessage() for r in caplog.records)
    assert sql("SELECT status, errors FROM crawl_runs") == [("incomplete", 1)]
    assert "rows were not stored: unexpected TypeError" in sql("SELECT error FROM crawl_runs")[0][0]


def test_an_unexpected_failure_of_a_batch_settles_its_rows_and_closes_the_crawl_incomplete(
    dispensary, sql, monkeypatch
):
    async def scenario():
        chain = Chain(CRAWL_COMPLETION_WAIT_S=60)

        async def broken(conn, batch, keys):
            raise TypeError("a bug in the writer")

        monkeypatch.setattr(chain.products, "write", broken)
        run_id = await chain.store.start_run(dispensary, "product_resync")
        items = [raw(i, dispensary, run_id) for i in range(3)]
        for item in items:
            await chain.feed(item)
        started = asyncio.get_running_loop().time()
        seen = [i.raw["_id"] for i in items]
        await chain.feed(StoreOutcome(dispensary, run_id, True, 3, 1, seen_product_ids=seen))
        waited = asyncio.get_running_loop().time() - started
        monkeypatch.undo()
        await chain.close()
        return waited, chain.crawler.stats.get_stats()

    waited, stats = asyncio.run(scenario())
    assert waited < 30
    assert stats["cannaspider/products_refused"] == 3 and stats["cannaspider/items_not_stored"] == 3
    assert sql("SELECT count(*) FROM store_products")[0][0] == 0
    status, error = sql("SELECT status, error FROM crawl_runs")[0]
    assert status == "incomplete" and "refused by the database" in error


def test_each_product_gets_a_snapshot_per_crawl_with_that_crawls_prices(dispensary, sql):
    async def scenario():
        chain = Chain(batch_size=1000)
        await chain.crawl(dispensary, [0, 1, 2], epoch=0)
        await chain.crawl(dispensary, [0, 1, 2], epoch=1)  # two crawls can share a batch: both snapshots stay
        await chain.close()

    asyncio.run(scenario())
    snaps = sql(
        "SELECT crawl_run_id, provider_product_id, price_rec, is_in_stock FROM store_product_snapshots "
        "WHERE dispensary_id = %s ORDER BY crawl_run_id, provider_product_id",
        (dispensary,),
    )
    runs = [r[0] for r in sql("SELECT id FROM crawl_runs ORDER BY id")]
    assert len(snaps) == 6 and sorted({s[0] for s in snaps}) == runs and all(s[3] for s in snaps)
    current = dict(
        sql("SELECT provider_product_id, price_rec FROM store_products WHERE dispensary_id = %s", (dispensary,))
    )
    assert {s[1]: s[2] for s in snaps if s[0] == runs[1]} == current  # the product row is the latest crawl


def test_completion_knows_the_crawl_is_draining_from_the_engines_public_scheduler():
    class Scheduler:
        pending = True

        def has_pending_requests(self):
            return self.pending

    chain_crawler = project_crawler()
    completion = CrawlClose.for_crawler(chain_crawler)
    assert completion._crawl_is_draining()  # not crawling: nothing will fill a batch
    scheduler, downloader = Scheduler(), SimpleNamespace(active=set())
    # only the engine's public attributes: a crawl with requests still scheduled is not draining
    chain_crawler.engine = SimpleNamespace(scheduler=scheduler, downloader=downloader)
    assert not completion._crawl_is_draining()
    scheduler.pending = False
    assert completion._crawl_is_draining()
    downloader.active.add("a request")
    assert not completion._crawl_is_draining()
    chain_crawler.engine = SimpleNamespace(scheduler=None, downloader=downloader)  # the spider not open yet
    assert completion._crawl_is_draining()


def test_a_store_record_the_database_refuses_is_logged_and_the_next_one_is_written(db, monkeypatch, sql, caplog):
    monkeypatch.setenv("DATABASE_URL", db)
    bad_record = DispensaryRecord("b" * 24, "Bad\x00Store", raw={"id": "b" * 24})
    good_record = DispensaryRecord("c" * 24, "Good Store", raw={"id": "c" * 24})

    async def scenario():
        crawler = project_crawler()
        pipeline = DispensaryWriterPipeline.from_crawler(crawler)
        try:
            return [await pipeline.process_item(r) for r in (bad_record, good_record)], crawler.stats.get_stats()
        finally:
            await CrawlDatabase.for_crawler(crawler).close()

    with caplog.at_level(logging.ERROR):
        (bad_out, good_out), stats = asyncio.run(scenario())
    assert bad_out.dispensary_id is None and good_out.dispensary_id  # both go on to the feed
    assert sql("SELECT platform_dispensary_id FROM dispensaries") == [("c" * 24,)]
    assert stats["cannaspider/dispensaries_refused"] == 1 and stats["cannaspider/items_not_stored"] == 1
    assert [r.getMessage() for r in caplog.records if "refused by the database" in r.getMessage()] == [
        f"store {'b' * 24!r} ('Bad\\x00Store') refused by the database, not stored: "
        "PostgreSQL text fields cannot contain NUL (0x00) bytes"
    ]


def test_an_outage_while_a_refused_batch_is_split_keeps_the_rows_not_yet_written(dispensary, sql, monkeypatch):
    async def scenario():
        chain = Chain(batch_size=1000)
        run_id = await chain.store.start_run(dispensary, "product_resync")
        products = [chain.normalize.process_item(raw(i, dispensary, run_id)) for i in range(4)]
        products[3] = bad(products[3], "price")
        for p in products:
            await settle(chain.products.process_item(p))
        real_write, calls = chain.products.write, []

        async def write_then_lose_the_server(conn, batch, keys):
            calls.append(batch)
            if len(calls) == 3:  # the whole batch (refused), its first half (written), then the server goes away
                raise psycopg.OperationalError("server closed the connection unexpectedly")
            return await real_write(conn, batch, keys)

        monkeypatch.setattr(chain.products, "write", write_then_lose_the_server)
        with pytest.raises(psycopg.OperationalError):
            await chain.products.flush()
        kept = len(chain.products.buffer)
        written = sql("SELECT count(*) FROM store_products")[0][0]
        await chain.products.flush()  # the server is back: the rest is written, the bad row refused
        await chain.close()
        return kept, written, chain.crawler.stats.get_stats()

    kept, written, stats = asyncio.run(scenario())
    assert (written, kept) == (2, 2)  # the first half committed; the second kept, not lost nor refused
    assert sql("SELECT count(*) FROM store_products")[0][0] == 3
    assert sql("SELECT count(*) FROM store_product_snapshots")[0][0] == 3  # no row written twice
    assert stats["cannaspider/products_written"] == 3 and stats["cannaspider/products_refused"] == 1


def test_one_platform_id_on_two_platforms_is_two_stores_and_two_discovery_rows(db, monkeypatch, sql):
    """Discovery's log is keyed by (platform, platform id) as dispensaries are (migration 040): a
    Jane store whose id equals a Dutchie store's never overwrites that store's row."""
    monkeypatch.setenv("DATABASE_URL", db)
    records = [
        DispensaryRecord("4242", "Dutchie Store", platform="dutchie", raw={"id": "4242"}),
        DispensaryRecord("4242", "Jane Store", platform="jane", raw={"id": 4242}),
    ]

    async def scenario():
        crawler = project_crawler()
        pipeline = DispensaryWriterPipeline.from_crawler(crawler)
        try:
            for record in records * 2:  # rediscovered: updated, never duplicated
                await pipeline.process_item(record)
        finally:
            await CrawlDatabase.for_crawler(crawler).close()

    asyncio.run(scenario())
    stores = dict(sql("SELECT platform, id FROM dispensaries"))
    assert sorted(stores) == ["dutchie", "jane"]
    seen = sql("SELECT platform, name, dispensary_id, raw FROM discovery_locations ORDER BY platform")
    assert seen == [
        ("dutchie", "Dutchie Store", stores["dutchie"], {"id": "4242"}),
        ("jane", "Jane Store", stores["jane"], {"id": 4242}),
    ]
