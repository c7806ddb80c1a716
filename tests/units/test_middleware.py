"""A callback that raises closes its unit of work (units/middleware.py): the sandbox answers
with JSON nested 5000 levels deep (its deep_nesting fault), on which json.loads raises
RecursionError inside the callback. `scrapy crawl` subprocesses, with explicit targets and
draining the queue: the unit ends incomplete (its task fails, the attempt counted; `failed` once
its attempts are used up), the process goes on with the other units and exits 3."""

from __future__ import annotations

import psycopg
import pytest

from cannaspider.commands.crawl import EXIT_INCOMPLETE
from cannaspider.tasks import queue
from tests.helpers import add_store, products_of, run_scrapy, runs_of

pytestmark = pytest.mark.integration  # spawns (tests/tiers.py)


def enqueue(db: str, role: str, max_attempts: int = 5, **target) -> int:
    import asyncio

    async def main() -> int:
        async with await psycopg.AsyncConnection.connect(db, autocommit=True) as conn:
            return (await queue.enqueue(conn, role, max_attempts=max_attempts, **target)).task.id

    return asyncio.run(main())


def crawl(env: dict, spider: str, *args: str):
    return run_scrapy("crawl", spider, *args, "-s", "RETRY_ENABLED=0", env=env, timeout=150)


def test_a_hostile_page_makes_an_explicit_crawl_incomplete_and_the_exit_non_zero(scrapy_env, db, sandbox):
    stores = sandbox.stores("AZ")
    hostile = max(stores, key=lambda s: s["product_count"])  # several pages: page 1 is the hostile one
    good = next(s for s in stores if s["id"] != hostile["id"])
    d, other = add_store(db, hostile), add_store(db, good)
    sandbox.faults({"kind": "deep_nesting", "store": hostile["id"], "pages": [1]})
    result = crawl(scrapy_env, "product_resync", "-a", f"dispensary_id={d},{other}")
    assert result.returncode == EXIT_INCOMPLETE, result.stderr[-3000:]
    [(status, error, *_)] = runs_of(db, d)
    assert status == "incomplete" and "parse_products raised RecursionError" in error, error
    assert runs_of(db, other)[0][0] == "complete"
    assert all(misses == 0 for misses, _, _ in products_of(db, d).values())
    assert "'cannaspider/callback_errors/RecursionError': 1" in result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith("error: 1 unit(s) of work incomplete")


def test_a_poison_task_fails_after_its_attempts_and_the_drain_goes_on(scrapy_env, db, sandbox, sql):
    hostile, good = sandbox.stores("AZ")[:2]
    d, other = add_store(db, hostile), add_store(db, good)
    sandbox.faults({"kind": "deep_nesting", "store": hostile["id"]})
    poison = enqueue(db, "product_resync", max_attempts=3, dispensary_id=d)
    fine = enqueue(db, "product_resync", dispensary_id=other)
    # no backoff: the drain takes the poison task again at once, until its attempts are used up
    result = crawl(scrapy_env, "product_resync", "-s", "TASK_RETRY_BACKOFF_S=0", "-s", "TASK_RETRY_BACKOFF_MAX_S=0")
    assert result.returncode == EXIT_INCOMPLETE, result.stderr[-3000:]
    [(status, attempts, error)] = sql("SELECT status, attempts, error FROM worker_tasks WHERE id = %s", (poison,))
    assert (status, attempts) == ("failed", 3) and "RecursionError" in error, error
    assert sql("SELECT status, error FROM worker_tasks WHERE id = %s", (fine,)) == [("completed", None)]
    assert [r[0] for r in runs_of(db, d)] == ["incomplete"] * 3
    assert sql("SELECT count(*) FROM store_products WHERE consecutive_misses > 0")[0][0] == 0


def test_a_hostile_answer_fails_a_discovery_task(scrapy_env, db, sandbox, sql):
    store = sandbox.stores("AZ")[0]
    d = add_store(db, store, resolved=False)
    task = enqueue(db, "entry_point_discovery", dispensary_id=d)
    sandbox.faults({"kind": "deep_nesting", "operation": "ConsumerDispensaries"})
    result = crawl(scrapy_env, "entry_point_discovery", "-s", "TASK_RETRY_BACKOFF_S=3600")
    assert result.returncode == EXIT_INCOMPLETE, result.stderr[-3000:]
    [(status, attempts, error)] = sql("SELECT status, attempts, error FROM worker_tasks WHERE id = %s", (task,))
    assert (status, attempts) == ("pending", 1), error
    assert "parse_dispensary raised RecursionError" in error, error

    sandbox.reset()
    enqueue(db, "store_discovery", state="NV")
    sandbox.faults({"kind": "deep_nesting", "operation": "DispensarySearch", "times": 1})
    result = crawl(scrapy_env, "store_discovery", "-s", "TASK_RETRY_BACKOFF_S=3600")
    assert result.returncode == EXIT_INCOMPLETE, result.stderr[-3000:]
    [(status, attempts, error)] = sql("SELECT status, attempts, error FROM worker_tasks WHERE role = 'store_discovery'")
    assert (status, attempts) == ("pending", 1) and "parse_search raised RecursionError" in error, error
