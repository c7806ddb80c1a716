"""A store's close on the real database: the seed's miss rules and the OOS guard that keeps an emptied
or collapsed menu from being read as evidence (README, "Crawl correctness"), which are
the SQL and transaction of cannaspider/units/crawl_close.py; a queue task
completed in the transaction that applies the misses, and a lost lease that rolls it back."""

from __future__ import annotations

import asyncio
import inspect
import logging

import psycopg
import pytest

from cannaspider import settings as defaults
from cannaspider.db.crawl_database import CrawlDatabase
from cannaspider.items import RawProduct
from cannaspider.pipelines.normalize import NormalizeProductPipeline
from cannaspider.pipelines.product_writer import ProductWriterPipeline
from cannaspider.tasks import queue
from cannaspider.tasks.drain import TaskDrain
from cannaspider.units.crawl_close import CrawlClose, StoreOutcome
from sandbox.catalog import _product
from tests.helpers import leases_lapsed, project_crawler

BASE = "http://127.0.0.1:1"


def product(index: int) -> dict:
    return _product(42, "guard-store", index, 0, BASE)


class Pipelines:
    """normalize → products, built as Scrapy builds them, and the store's close."""

    def __init__(self, db_url: str, **settings):
        self.crawler = project_crawler(DATABASE_URL=db_url, **settings)
        self.normalize = NormalizeProductPipeline.from_crawler(self.crawler)
        self.products = ProductWriterPipeline.from_crawler(self.crawler)
        self.completion = CrawlClose.for_crawler(self.crawler)
        self.store = CrawlDatabase.for_crawler(self.crawler)

    async def crawl(self, dispensary_id: int, indices: list[int]) -> int:
        """A complete crawl that saw the products `indices`; returns its run id."""
        run_id = await self.store.start_run(dispensary_id, "product_resync")
        raws = [product(i) for i in indices]
        for raw in raws:
            item = self.normalize.process_item(RawProduct(dispensary_id, run_id, raw))
            result = self.products.process_item(item)
            if inspect.isawaitable(result):
                await result
        await self.completion.close(StoreOutcome(dispensary_id, run_id, True, len(raws), 1, [r["_id"] for r in raws]))
        return run_id

    async def close(self) -> None:
        await self.products.close_spider()
        await self.store.close()


def misses(sql, dispensary) -> list[int]:
    return [r[0] for r in sql("SELECT consecutive_misses FROM store_products WHERE dispensary_id = %s", (dispensary,))]


def run_row(sql, run_id) -> tuple:
    return sql("SELECT status, suspect, suspect_reason, products_missed FROM crawl_runs WHERE id = %s", (run_id,))[0]


def twice(db, dispensary, first: list[int], second: list[int], **settings) -> int:
    async def scenario():
        pipelines = Pipelines(db, **settings)
        await pipelines.crawl(dispensary, first)
        run_id = await pipelines.crawl(dispensary, second)
        await pipelines.close()
        return run_id

    return asyncio.run(scenario())


def test_an_empty_menu_on_a_complete_crawl_is_empty_not_suspect_and_counts_no_misses(db, dispensary, sql, caplog):
    caplog.set_level(logging.WARNING)
    run_id = twice(db, dispensary, list(range(20)), [], OOS_GUARD_MIN_SHARE=0.5)
    assert misses(sql, dispensary) == [0] * 20
    assert run_row(sql, run_id) == ("complete", False, None, 0)
    assert sql("SELECT empty FROM crawl_runs WHERE id = %s", (run_id,)) == [(True,)]
    assert "menu is EMPTY" in caplog.text and "its 20 products in stock left as it was" in caplog.text


def test_a_collapsed_menu_is_suspect_and_its_seen_products_stay_in_stock(db, dispensary, sql):
    # 8 of 20 seen (40 %), plus new products that must not dilute the share
    run_id = twice(db, dispensary, list(range(20)), list(range(8)) + list(range(100, 130)), OOS_GUARD_MIN_SHARE=0.5)
    assert set(misses(sql, dispensary)) == {0}
    assert run_row(sql, run_id)[:2] == ("complete", True)
    assert "saw 8 of the 20" in run_row(sql, run_id)[2]


def test_a_normal_turnover_counts_misses_and_is_not_suspect(db, dispensary, sql):
    run_id = twice(db, dispensary, list(range(20)), list(range(10, 20)), OOS_GUARD_MIN_SHARE=0.5)  # exactly half
    assert sorted(misses(sql, dispensary)) == [0] * 10 + [1] * 10
    assert run_row(sql, run_id) == ("complete", False, None, 10)


def test_a_share_of_zero_turns_the_guard_off_for_a_store_that_closed(db, dispensary, sql):
    run_id = twice(db, dispensary, list(range(20)), [0], OOS_GUARD_MIN_SHARE=0)
    assert sorted(misses(sql, dispensary)) == [0] + [1] * 19
    assert run_row(sql, run_id) == ("complete", False, None, 19)


def test_a_share_of_zero_still_counts_no_misses_on_an_empty_menu(db, dispensary, sql):
    runs = crawls(db, dispensary, ALL, [], [], [], OOS_GUARD_MIN_SHARE=0)
    assert stock(sql, dispensary) == {i: ("in_stock", 0) for i in ALL}
    assert [run_row(sql, r) for r in runs[1:]] == [("complete", False, None, 0)] * 3


def test_the_first_crawl_of_a_store_is_not_guarded(db, dispensary, sql):
    async def scenario():
        pipelines = Pipelines(db, OOS_GUARD_MIN_SHARE=0.5)
        run_id = await pipelines.crawl(dispensary, [])
        await pipelines.close()
        return run_id

    assert run_row(sql, asyncio.run(scenario())) == ("complete", False, None, 0)


def crawls(db, dispensary, *seen: list[int], **settings) -> list[int]:
    """Complete crawls of one store, each seeing the products listed; their run ids."""

    async def scenario():
        pipelines = Pipelines(db, **settings)
        runs = [await pipelines.crawl(dispensary, indices) for indices in seen]
        await pipelines.close()
        return runs

    return asyncio.run(scenario())


def stock(sql, dispensary) -> dict[int, tuple]:
    """product index → (stock_status, consecutive_misses)"""
    rows = sql(
        "SELECT provider_product_id, stock_status, consecutive_misses FROM store_products WHERE dispensary_id = %s",
        (dispensary,),
    )
    index = {product(i)["_id"]: i for i in range(200)}
    return {index[pid]: (status, n) for pid, status, n in rows}


def streaks(sql, runs) -> list[tuple]:
    return sql(
        "SELECT suspect, suspect_streak, products_marked_oos FROM crawl_runs WHERE id = ANY(%s) ORDER BY id", (runs,)
    )


ALL, KEPT = list(range(20)), list(range(8))  # a store that drops 60 % of its menu for good keeps 8 of 20


def test_a_collapse_seen_by_three_complete_crawls_marks_exactly_the_missing_products_oos(db, dispensary, sql):
    runs = crawls(db, dispensary, ALL, KEPT, KEPT, KEPT, KEPT)
    assert stock(sql, dispensary) == {i: ("in_stock", 0) if i < 8 else ("oos", 3) for i in ALL}
    # the three suspect crawls stay flagged; the third confirms; the next is judged against the new menu
    assert streaks(sql, runs) == [(False, None, 0), (True, 1, 0), (True, 2, 0), (True, 3, 12), (False, None, 0)]
    reason = sql("SELECT suspect_reason FROM crawl_runs WHERE id = %s", (runs[3],))[0][0]
    assert "confirms the collapse" in reason and "12 products marked out of stock" in reason


def test_a_confirmed_collapse_counts_each_products_misses_over_the_streak(db, dispensary, sql):
    # 9 is seen by the first suspect crawl, then gone; 10 was missed once before the collapse
    runs = crawls(db, dispensary, ALL, [i for i in ALL if i != 10], KEPT + [9], KEPT, KEPT)
    got = stock(sql, dispensary)
    assert got[9] == ("in_stock", 2) and got[10] == ("oos", 3) and got[11] == ("oos", 3) and got[0] == ("in_stock", 0)
    assert streaks(sql, runs)[1:] == [(False, None, 0), (True, 1, 0), (True, 2, 0), (True, 3, 11)]


@pytest.mark.parametrize("collapse", [1, 2])
def test_a_collapse_of_one_or_two_crawls_that_recovers_marks_nothing(db, dispensary, sql, collapse):
    runs = crawls(db, dispensary, ALL, *[KEPT] * collapse, ALL)
    # every product is back in the trusted crawl: the collapse's misses go with the streak
    assert stock(sql, dispensary) == {i: ("in_stock", 0) for i in ALL}
    assert [r[:2] for r in streaks(sql, runs)] == [(False, None)] + [(True, n + 1) for n in range(collapse)] + [
        (False, None)
    ]
    assert [r[2] for r in streaks(sql, runs)] == [0] * (collapse + 2)
    assert sql("SELECT max(suspect_misses) FROM store_products WHERE dispensary_id = %s", (dispensary,)) == [(0,)]


@pytest.mark.parametrize("collapse", [1, 2])
def test_a_product_that_left_during_a_short_collapse_is_oos_at_its_third_miss(db, dispensary, sql, collapse):
    """Issue #28, 2: 18 and 19 left at the crawl after ALL, when a collapse of one or two crawls
    began; the trusted crawls after it miss them too: their suspect misses count, so they are
    'oos' at their third miss in a row, as the seed would have it (not 1-2 crawls later)."""
    runs = crawls(db, dispensary, ALL, *[KEPT] * collapse, *[ALL[:18]] * (3 - collapse))
    assert stock(sql, dispensary) == {i: ("oos", 3) if i >= 18 else ("in_stock", 0) for i in ALL}
    assert [r[2] for r in streaks(sql, runs)] == [0] * (collapse + 1) + [0] * (2 - collapse) + [2]
    events = sql(
        "SELECT crawl_run_id, count(*) FROM product_events WHERE dispensary_id = %s AND type = 'out_of_stock' "
        "GROUP BY 1",
        (dispensary,),
    )
    assert events == [(runs[3], 2)]
    assert sql("SELECT max(suspect_misses) FROM store_products WHERE dispensary_id = %s", (dispensary,)) == [(0,)]


def test_a_streak_broken_by_a_trusted_crawl_starts_again(db, dispensary, sql):
    runs = crawls(db, dispensary, ALL, KEPT, KEPT, ALL, KEPT, KEPT)
    flags = [(False, None), (True, 1), (True, 2)]
    assert [r[:2] for r in streaks(sql, runs)] == flags + flags[:1] + flags[1:]
    assert {s for s, _ in stock(sql, dispensary).values()} == {"in_stock"}


def test_after_a_confirmed_collapse_a_new_collapse_needs_three_crawls_again(db, dispensary, sql):
    runs = crawls(db, dispensary, ALL, KEPT, KEPT, KEPT, [0], [0])
    assert [r[:2] for r in streaks(sql, runs)][4:] == [(True, 1), (True, 2)]
    assert stock(sql, dispensary)[5] == ("in_stock", 0)


# -- empty menus (issue #28, 1; migrations/025_empty_menus.sql) ----------------------------------------
def store_state(sql, dispensary):
    """(menu_empty_since, [(store event type, products, crawl run)])"""
    [(since,)] = sql("SELECT menu_empty_since FROM dispensaries WHERE id = %s", (dispensary,))
    events = sql(
        "SELECT type, products, crawl_run_id FROM store_events WHERE dispensary_id = %s ORDER BY id", (dispensary,)
    )
    return since, events


def started(sql, run_id):
    return sql("SELECT started_at FROM crawl_runs WHERE id = %s", (run_id,))[0][0]


def product_events(sql, dispensary, kind):
    return sql("SELECT count(*) FROM product_events WHERE dispensary_id = %s AND type = %s", (dispensary, kind))[0][0]


def test_an_empty_menu_crawled_again_and_again_marks_nothing_and_is_the_stores_state(db, dispensary, sql, caplog):
    caplog.set_level(logging.WARNING)
    runs = crawls(db, dispensary, ALL, [], [], [], [], OOS_GUARD_MIN_SHARE=0.5)
    assert stock(sql, dispensary) == {i: ("in_stock", 0) for i in ALL}
    assert sql("SELECT max(suspect_misses) FROM store_products WHERE dispensary_id = %s", (dispensary,)) == [(0,)]
    rows = sql(
        "SELECT status, empty, suspect, suspect_streak, products_missed, products_marked_oos FROM crawl_runs "
        "WHERE id = ANY(%s) ORDER BY id",
        (runs,),
    )
    assert rows == [("complete", False, False, None, 0, 0)] + [("complete", True, False, None, 0, 0)] * 4
    since, events = store_state(sql, dispensary)
    assert since == started(sql, runs[1])  # since its first empty crawl
    assert events == [("menu_emptied", 20, runs[1])]  # one store event, not one per crawl or product
    assert product_events(sql, dispensary, "out_of_stock") == 0
    assert caplog.text.count("menu is EMPTY") == 4


def test_a_menu_that_returns_ends_the_state_and_marks_nothing(db, dispensary, sql):
    runs = crawls(db, dispensary, ALL, [], [], [], ALL[:19], ALL[:19])
    # the menu is back: 19 was missed by the crawls after it only (the empty ones count nothing)
    assert stock(sql, dispensary) == {i: ("in_stock", 2 if i == 19 else 0) for i in ALL}
    assert [r[0] for r in streaks(sql, runs)] == [False] * 6
    since, events = store_state(sql, dispensary)
    assert since is None
    assert events == [("menu_emptied", 20, runs[1]), ("menu_returned", 19, runs[4])]
    assert (
        product_events(sql, dispensary, "out_of_stock") == 0 and product_events(sql, dispensary, "back_in_stock") == 0
    )


def test_a_menu_that_returns_in_part_is_judged_by_the_guard_against_the_menu_before(db, dispensary, sql):
    runs = crawls(db, dispensary, ALL, [], KEPT, KEPT, KEPT)
    # the empty crawl is not one of the streak: the three partial crawls after it confirm it
    assert [r for r in streaks(sql, runs)] == [
        (False, None, 0),
        (False, None, 0),
        (True, 1, 0),
        (True, 2, 0),
        (True, 3, 12),
    ]
    assert stock(sql, dispensary) == {i: ("in_stock", 0) if i < 8 else ("oos", 3) for i in ALL}
    assert store_state(sql, dispensary)[0] is None


def test_an_empty_menu_inside_a_collapse_neither_breaks_nor_lengthens_its_streak(db, dispensary, sql):
    runs = crawls(db, dispensary, ALL, KEPT, [], KEPT, KEPT)
    assert [r for r in streaks(sql, runs)] == [
        (False, None, 0),
        (True, 1, 0),
        (False, None, 0),
        (True, 2, 0),
        (True, 3, 12),
    ]
    assert stock(sql, dispensary) == {i: ("in_stock", 0) if i < 8 else ("oos", 3) for i in ALL}
    assert [e[0] for e in store_state(sql, dispensary)[1]] == ["menu_emptied", "menu_returned"]


def test_an_empty_menu_is_not_an_incomplete_crawl(db, dispensary, sql):
    async def scenario():
        pipelines = Pipelines(db)
        await pipelines.crawl(dispensary, ALL)
        run_id = await pipelines.store.start_run(dispensary, "product_resync")
        await pipelines.completion.close(StoreOutcome(dispensary, run_id, False, 0, 1, [], error="page 1: HTTP 500"))
        await pipelines.close()
        return run_id

    run_id = asyncio.run(scenario())
    assert sql("SELECT status, empty, error FROM crawl_runs WHERE id = %s", (run_id,)) == [
        ("incomplete", False, "page 1: HTTP 500")
    ]
    assert store_state(sql, dispensary) == (None, [])


def test_the_empty_menu_of_a_new_store_is_its_state_too(db, dispensary, sql):
    runs = crawls(db, dispensary, [], [])
    assert store_state(sql, dispensary) == (started(sql, runs[0]), [("menu_emptied", 0, runs[0])])


def test_a_share_outside_zero_to_one_is_refused():
    with pytest.raises(ValueError, match="OOS_GUARD_MIN_SHARE must be within"):
        CrawlClose.for_crawler(project_crawler(OOS_GUARD_MIN_SHARE=50))


# -- queue tasks ---------------------------------------------------------------------------------------
async def crawl_task(pipelines: Pipelines, drain: TaskDrain, task, indices: list[int], before=None) -> int:
    run_id = await pipelines.store.start_run(task.dispensary_id, "product_resync", task.lease)
    raws = [product(i) for i in indices]
    for raw in raws:
        result = pipelines.products.process_item(
            pipelines.normalize.process_item(RawProduct(task.dispensary_id, run_id, raw))
        )
        if inspect.isawaitable(result):
            await result
    if before is not None:
        await before()
    await pipelines.completion.close(
        StoreOutcome(task.dispensary_id, run_id, True, len(raws), 1, [r["_id"] for r in raws], task=task)
    )
    return run_id


def scenario(db, dispensary, second_crawl_before=None):
    async def main():
        async with await psycopg.AsyncConnection.connect(db, autocommit=True) as conn:
            await queue.enqueue(conn, "product_resync", dispensary_id=dispensary)
        pipelines = Pipelines(db)
        drain = TaskDrain.from_crawler(pipelines.crawler, "product_resync", db, lease_s=1.0)
        got = []
        async for task in drain.tasks():
            await crawl_task(pipelines, drain, task, [0, 1, 2, 3])
            got.append(task)
        async with await psycopg.AsyncConnection.connect(db, autocommit=True) as conn:
            await queue.enqueue(conn, "product_resync", dispensary_id=dispensary)
        drain2 = TaskDrain.from_crawler(pipelines.crawler, "product_resync", db, lease_s=1.0)  # the crawler's now
        async for task in drain2.tasks():
            # a second crawl that did not see product 3 (it would be missed)
            await crawl_task(pipelines, drain2, task, [0, 1, 2], before=second_crawl_before)
            got.append(task)
            break
        await drain2.close()
        await drain.close()
        await pipelines.close()
        return got

    return asyncio.run(main())


def test_a_held_task_completes_with_the_crawl_and_its_figures(db, dispensary, sql):
    first, second = scenario(db, dispensary)
    rows = sql("SELECT id, status, result, crawl_run_id FROM worker_tasks ORDER BY id")
    assert [r[1] for r in rows] == ["completed", "completed"]
    assert rows[0][2]["products"] == 4 and rows[0][2]["new"] == 4
    assert rows[1][2]["products"] == 3 and rows[1][2]["missed"] == 1
    runs = sql("SELECT task_id, status FROM crawl_runs ORDER BY id")
    assert runs == [(first.id, "complete"), (second.id, "complete")]
    assert sorted(misses(sql, dispensary)) == [0, 0, 0, 1]


def test_a_lost_lease_rolls_back_the_close_and_marks_nothing(db, dispensary, sql):
    async def lose_the_lease():
        while not leases_lapsed(db):  # the lease (1 s) expires: another worker takes the task
            await asyncio.sleep(0.1)
        async with await psycopg.AsyncConnection.connect(db, autocommit=True) as conn:
            [taken] = await queue.claim(conn, "product_resync", "other-worker", 1, lease_s=defaults.TASK_LEASE_S)
            assert taken.attempts == 2

    first, second = scenario(db, dispensary, second_crawl_before=lose_the_lease)
    assert sql("SELECT status, claimed_by FROM worker_tasks WHERE id = %s", (second.id,)) == [
        ("running", "other-worker")
    ]
    [(status, error)] = sql("SELECT status, error FROM crawl_runs WHERE task_id = %s AND id <> %s", (second.id, 0))[-1:]
    # the queue closed the run when the lease expired; the late close leaves it so (issue 16)
    assert status == "failed" and error.startswith("lease expired"), (status, error)
    assert misses(sql, dispensary) == [0, 0, 0, 0]  # nothing counted missing


def test_a_run_already_failed_is_not_overwritten_by_a_resumed_worker(db, dispensary, sql):
    """A worker stopped (SIGSTOP) past its lease: the queue failed its run ('lease expired'); resumed,
    its crawl ends incomplete (its task lost) and must leave the run as the queue closed it."""

    async def main():
        pipelines = Pipelines(db)
        run_id = await pipelines.store.start_run(dispensary, "product_resync")
        async with await psycopg.AsyncConnection.connect(db, autocommit=True) as conn:
            await conn.execute(
                "UPDATE crawl_runs SET status = 'failed', finished_at = now(), "
                "error = 'lease expired: the worker died or lost its task' WHERE id = %s",
                (run_id,),
            )
        await pipelines.completion.close(
            StoreOutcome(dispensary, run_id, False, 0, 1, [], error="page 1: task 7 lost its lease")
        )
        await pipelines.close()
        return run_id

    run_id = asyncio.run(main())
    assert sql("SELECT status, error FROM crawl_runs WHERE id = %s", (run_id,)) == [
        ("failed", "lease expired: the worker died or lost its task")
    ]


def test_a_complete_close_of_a_run_already_closed_marks_nothing(db, dispensary, sql):
    """An explicit crawl (no task, no lease to check) whose run another process closed meanwhile
    (a dead-run sweep, a stop): its complete close counts no misses and leaves the run as it is."""

    async def main():
        pipelines = Pipelines(db)
        await pipelines.crawl(dispensary, [0, 1, 2, 3])
        run_id = await pipelines.store.start_run(dispensary, "product_resync")
        async with await psycopg.AsyncConnection.connect(db, autocommit=True) as conn:
            await conn.execute(
                "UPDATE crawl_runs SET status = 'failed', finished_at = now(), error = 'swept' WHERE id = %s",
                (run_id,),
            )
        await pipelines.completion.close(StoreOutcome(dispensary, run_id, True, 0, 1, [product(0)["_id"]]))
        await pipelines.close()
        return run_id

    run_id = asyncio.run(main())
    assert sql("SELECT status, error FROM crawl_runs WHERE id = %s", (run_id,)) == [("failed", "swept")]
    assert misses(sql, dispensary) == [0, 0, 0, 0]  # products 1-3 unseen, yet not counted missing
