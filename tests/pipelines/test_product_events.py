"""Events written by a complete crawl's close (docs/analytics.md, "Events"), on the real database:
one row per change, judged against the last event-writing crawl, none from an incomplete crawl, only
the confirmed out-of-stock from a suspect one, never twice."""

from __future__ import annotations

import asyncio
import inspect

import orjson
import psycopg

from cannaspider import settings as defaults
from cannaspider.items import RawProduct
from cannaspider.tasks import queue
from cannaspider.tasks.drain import TaskDrain
from cannaspider.units.crawl_close import CLOSE_COMPLETE, StoreOutcome
from tests.helpers import leases_lapsed
from tests.units.test_crawl_close import Pipelines, product

Menu = dict[int, dict]  # product index → overrides of its raw fields


def raw(index: int, changes: dict) -> dict:
    out = product(index)
    out.update(changes)
    return out


def on_special(price: float, special: float) -> dict:
    return {**priced(price), "recSpecialPrices": [special], "special": True}


def priced(price: float) -> dict:
    return {"Prices": [price], "recPrices": [price], "recSpecialPrices": [], "special": None, "specialData": None}


async def crawl(
    pipelines: Pipelines, dispensary: int, menu: Menu, *, complete: bool = True, task=None, before=None
) -> int:
    run_id = await pipelines.store.start_run(dispensary, "product_resync", task.lease if task else None)
    raws = [raw(i, changes) for i, changes in menu.items()]
    for r in raws:
        result = pipelines.products.process_item(pipelines.normalize.process_item(RawProduct(dispensary, run_id, r)))
        if inspect.isawaitable(result):
            await result
    if before is not None:
        await before()
    error = None if complete else "a page was blocked"
    seen = [r["_id"] for r in raws]
    await pipelines.completion.close(
        StoreOutcome(dispensary, run_id, complete, len(raws), 1, seen, error=error, task=task)
    )
    return run_id


def run_crawls(db, dispensary, *menus, incomplete=(), **settings) -> list[int]:
    async def scenario():
        pipelines = Pipelines(db, **settings)
        runs = [await crawl(pipelines, dispensary, m, complete=n not in incomplete) for n, m in enumerate(menus)]
        await pipelines.close()
        return runs

    return asyncio.run(scenario())


def events(sql, dispensary) -> list[tuple]:
    """(run, product index, type, rec_old, rec, rec_special), in the order written"""
    index = {product(i)["_id"]: i for i in range(50)}
    rows = sql(
        "SELECT e.crawl_run_id, sp.provider_product_id, e.type, e.price_rec_old::float, e.price_rec::float, "
        "e.price_rec_special::float FROM product_events e JOIN store_products sp ON sp.id = e.store_product_id "
        "WHERE e.dispensary_id = %s ORDER BY e.id",
        (dispensary,),
    )
    return [(run, index[pid], *rest) for run, pid, *rest in rows]


def plain(n: int) -> Menu:
    return {i: priced(10.0 + i) for i in range(n)}


def test_each_change_of_a_complete_crawl_is_one_event(db, dispensary, sql):
    second = {**plain(4), 1: priced(9.0), 2: on_special(12.0, 8.0), 5: priced(30.0)}
    del second[3]
    third = {**second, 2: priced(12.0)}
    r1, r2, r3 = run_crawls(db, dispensary, plain(4), second, third)
    got = events(sql, dispensary)
    assert sorted(got[:4]) == [(r1, i, "listed", None, 10.0 + i, None) for i in range(4)]
    assert sorted(got[4:]) == sorted(
        [
            (r2, 1, "price_changed", 11.0, 9.0, None),
            (r2, 2, "special_started", None, 12.0, 8.0),
            (r2, 5, "listed", None, 30.0, None),
            (r3, 2, "special_ended", None, 12.0, None),
        ]
    )
    assert sql(
        "SELECT DISTINCT occurred_at = (SELECT started_at FROM crawl_runs WHERE id = %s) FROM product_events "
        "WHERE crawl_run_id = %s",
        (r2, r2),
    ) == [(True,)]


def test_out_of_stock_at_the_third_miss_and_back_in_stock_when_seen_again(db, dispensary, sql):
    many = plain(10)
    without_0 = {i: c for i, c in many.items() if i != 0}
    runs = run_crawls(db, dispensary, many, without_0, without_0, without_0, without_0, many)
    moves = [(run, i, kind) for run, i, kind, *_ in events(sql, dispensary) if kind != "listed"]
    assert moves == [(runs[3], 0, "out_of_stock"), (runs[5], 0, "back_in_stock")]
    assert sql("SELECT store_product_id FROM product_event_state WHERE oos_since IS NOT NULL") == []


def test_an_incomplete_crawl_writes_none_and_its_changes_come_with_the_next_complete_one(db, dispensary, sql):
    changed = {**plain(3), 0: priced(5.0)}
    runs = run_crawls(db, dispensary, plain(3), changed, plain(3) | {0: priced(5.0)}, incomplete={1})
    assert [e for e in events(sql, dispensary) if e[2] != "listed"] == [(runs[2], 0, "price_changed", 10.0, 5.0, None)]
    assert not [e for e in events(sql, dispensary) if e[0] == runs[1]]


def test_a_product_first_seen_by_an_incomplete_crawl_is_listed_by_the_next_complete_one(db, dispensary, sql):
    runs = run_crawls(db, dispensary, plain(2), plain(3), plain(3), incomplete={1})
    assert [e[:3] for e in events(sql, dispensary)][2:] == [(runs[2], 2, "listed")]


def test_a_suspect_crawl_writes_only_the_out_of_stock_of_a_confirmed_collapse(db, dispensary, sql):
    full, kept = plain(20), {**plain(8), 0: priced(1.0)}  # the collapse also changes a price
    runs = run_crawls(db, dispensary, full, kept, kept, kept, kept)
    after_listing = [e[:3] for e in events(sql, dispensary)][20:]
    assert sorted(after_listing) == sorted(
        [(runs[3], i, "out_of_stock") for i in range(8, 20)] + [(runs[4], 0, "price_changed")]
    )  # the price change the suspect crawls saw is reported by the first trusted crawl after them


def test_a_close_run_twice_writes_no_event_twice(db, dispensary, sql):
    [run] = run_crawls(db, dispensary, plain(3))
    before = sql("SELECT count(*) FROM product_events")
    sql("DELETE FROM product_event_state")  # as if not listed yet: the close would list them again
    seen = [product(i)["_id"] for i in range(3)]
    figures = {
        "d": dispensary,
        "seen": orjson.dumps(seen).decode(),
        "limit": 3,
        "run": run,
        "pages": 1,
        "seen_n": 3,
        "empty": False,
        "new": 0,
        "errors": 0,
        "min_share": 0.5,
        "events": True,
    }
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute(CLOSE_COMPLETE, figures)
    assert sql("SELECT count(*) FROM product_events") == before == [(3,)]


def test_events_off_writes_none(db, dispensary, sql):
    run_crawls(db, dispensary, plain(3), {0: priced(1.0)}, PRODUCT_EVENTS_ENABLED=False)
    assert events(sql, dispensary) == []


def test_a_crawl_whose_lease_was_lost_writes_no_event_and_the_next_reports_the_change_once(db, dispensary, sql):
    changed = {**plain(3), 1: priced(4.0)}

    async def lose_the_lease():
        while not leases_lapsed(db):  # the lease (1 s) expires: another worker takes the task
            await asyncio.sleep(0.1)
        async with await psycopg.AsyncConnection.connect(db, autocommit=True) as conn:
            assert len(await queue.claim(conn, "product_resync", "other-worker", 1, lease_s=defaults.TASK_LEASE_S)) == 1

    async def scenario():
        pipelines = Pipelines(db)
        await crawl(pipelines, dispensary, plain(3))
        async with await psycopg.AsyncConnection.connect(db, autocommit=True) as conn:
            await queue.enqueue(conn, "product_resync", dispensary_id=dispensary)
        drain = TaskDrain.from_crawler(pipelines.crawler, "product_resync", db, lease_s=1.0)
        async for task in drain.tasks():
            lost = await crawl(pipelines, dispensary, changed, task=task, before=lose_the_lease)
            break
        await drain.close()
        later = await crawl(pipelines, dispensary, changed)
        await pipelines.close()
        return lost, later

    lost, later = asyncio.run(scenario())
    # the other worker's claim closed the run as failed (lease expired); the resumed close leaves it so
    assert sql("SELECT status FROM crawl_runs WHERE id = %s", (lost,)) == [("failed",)]
    assert [e for e in events(sql, dispensary) if e[2] != "listed"] == [(later, 1, "price_changed", 11.0, 4.0, None)]
