"""Task-queue benchmark: tasks claimed + completed per second through the real path (TaskDrain:
claim_task() in batches, completions batched by complete_many(), chaining checks included), with
1, 2 and 4 worker processes, against a one-task-per-transaction loop (claim 1, complete 1), all
in this one run; plus how fast a following worker wakes for a new task with LISTEN/NOTIFY and
with a short poll. No crawling: each task is completed as soon as it is claimed.

    python benchmarks/task_queue.py                     # 20,000 tasks per batched run, 3,000 per baseline run
    python benchmarks/task_queue.py --tasks 50000 --batch 100

Targets (2-core machine): ≥ 5,000 tasks/s batched, ≥ 5× the one-at-a-time loop.
Everything talks to 127.0.0.1 only; the database is DATABASE_URL's server or the embedded one.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import argparse  # noqa: E402
import asyncio  # noqa: E402
import multiprocessing as mp  # noqa: E402
import os  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

import psycopg  # noqa: E402

from cannaspider import settings  # noqa: E402
from cannaspider.db import database_url, migrations  # noqa: E402
from cannaspider.tasks import queue  # noqa: E402
from cannaspider.tasks.drain import DrainConfig, TaskDrain  # noqa: E402

ROLE = "product_resync"
DBNAME = "cannaspider_bench_queue"


def bench_database() -> str:
    admin = database_url()
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{DBNAME}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{DBNAME}"')
    info = psycopg.conninfo.conninfo_to_dict(admin)
    info["dbname"] = DBNAME
    url = psycopg.conninfo.make_conninfo(**info)
    migrations.apply(url, log=lambda _: None)
    return url


def fill(url: str, tasks: int) -> None:
    """`tasks` pending resync tasks, one per store (stores created once)."""
    with psycopg.connect(url, autocommit=True) as conn:
        have = conn.execute("SELECT count(*) FROM dispensaries").fetchone()[0]
        if have < tasks:
            conn.execute(
                "INSERT INTO dispensaries (name, platform_dispensary_id) "
                "SELECT 'store ' || i, 'p' || i FROM generate_series(%s::integer, %s::integer) i",
                (have + 1, tasks),
            )
        conn.execute("TRUNCATE worker_tasks RESTART IDENTITY")
        conn.execute(
            "INSERT INTO worker_tasks (role, dispensary_id) SELECT %s, id FROM dispensaries ORDER BY id LIMIT %s",
            (ROLE, tasks),
        )
        conn.execute("VACUUM ANALYZE worker_tasks")


async def drain_worker(url: str, batch: int) -> int:
    drain = TaskDrain(url, ROLE, DrainConfig.of_project(slots=batch, batch=batch))
    done: list[asyncio.Future] = []
    async for task in drain.tasks():
        done.append(asyncio.ensure_future(drain.complete(task, queue.TaskResult(pages=1, products=1))))
    await asyncio.gather(*done)
    await drain.close()
    return drain.completed


async def one_at_a_time_worker(url: str, _batch: int) -> int:
    worker = queue.worker_name()
    n = 0
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute("SET synchronous_commit TO off")  # as TaskDrain's connection: only batching differs
        while True:
            claimed = await queue.claim(conn, ROLE, worker, 1, lease_s=settings.TASK_LEASE_S)  # one transaction
            if not claimed:
                return n
            await queue.complete(conn, claimed[0].lease, queue.TaskResult(pages=1, products=1))  # another
            n += 1


WORKERS = {"batched": drain_worker, "one-at-a-time": one_at_a_time_worker}


def _child(kind: str, url: str, batch: int, barrier, results) -> None:
    barrier.wait()
    results.put(asyncio.run(WORKERS[kind](url, batch)))


def measure(kind: str, url: str, tasks: int, processes: int, batch: int) -> float:
    fill(url, tasks)
    ctx = mp.get_context("fork")
    barrier = ctx.Barrier(processes + 1)
    results = ctx.Queue()
    procs = [ctx.Process(target=_child, args=(kind, url, batch, barrier, results)) for _ in range(processes)]
    for p in procs:
        p.start()
    barrier.wait()
    started = time.perf_counter()
    counts = [results.get(timeout=600) for _ in procs]
    elapsed = time.perf_counter() - started
    for p in procs:
        p.join()
    with psycopg.connect(url) as conn:
        completed = conn.execute("SELECT count(*) FROM worker_tasks WHERE status = 'completed'").fetchone()[0]
    assert completed == sum(counts) == tasks, (completed, counts, tasks)  # every task once, none lost
    return tasks / elapsed


async def wake_latency(url: str, listen: bool, poll_s: float, samples: int) -> list[float]:
    """Seconds from enqueue (committed) to the following worker's claim."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("TRUNCATE worker_tasks RESTART IDENTITY")
    drain = TaskDrain(url, ROLE, DrainConfig.of_project(follow=True, listen=listen, poll_s=poll_s))
    claimed: asyncio.Queue[float] = asyncio.Queue()

    async def consume() -> None:
        async for task in drain.tasks():
            claimed.put_nowait(time.perf_counter())
            await drain.complete(task)

    consumer = asyncio.ensure_future(consume())
    latencies = []
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await asyncio.sleep(0.5)
        for i in range(samples):
            await asyncio.sleep(0.137 * (1 + i % 3))  # not in step with the poll
            sent = time.perf_counter()
            await queue.enqueue(conn, ROLE, dispensary_id=i + 1)
            latencies.append(await asyncio.wait_for(claimed.get(), poll_s * 4 + 10) - sent)
    drain.stop()
    await consumer
    await drain.close()
    return latencies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=20_000, help="tasks per batched measurement")
    parser.add_argument("--baseline-tasks", type=int, default=3_000, help="tasks per one-at-a-time measurement")
    parser.add_argument("--batch", type=int, default=100, help="claim batch (and slots) per batched worker")
    parser.add_argument("--processes", default="1,2,4")
    args = parser.parse_args()
    url = bench_database()
    procs = [int(p) for p in args.processes.split(",")]
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"task queue benchmark: claim + complete, batch {args.batch}, {mp.cpu_count()} CPUs, load average {load}")
    rows = []
    for n in procs:
        batched = measure("batched", url, args.tasks, n, args.batch)
        single = measure("one-at-a-time", url, args.baseline_tasks, n, args.batch)
        rows.append((n, batched, single))
        print(
            f"  {n} process(es): batched {batched:8,.0f} tasks/s   one-at-a-time {single:7,.0f} tasks/s   "
            f"ratio {batched / single:5.1f}x",
            flush=True,
        )
    best = max(r[1] for r in rows)
    best_single = max(r[2] for r in rows)
    print(f"  best batched {best:,.0f} tasks/s (target >= 5,000); best one-at-a-time {best_single:,.0f} tasks/s")
    print(f"  batched / one-at-a-time (best of each): {best / best_single:.1f}x (target >= 5x)")

    for label, listen, poll in (("LISTEN/NOTIFY (poll 5 s)", True, 5.0), ("poll every 0.5 s", False, 0.5)):
        lat = asyncio.run(wake_latency(url, listen, poll, 15))
        print(
            f"  following worker wakes for a new task, {label:24}: median {statistics.median(lat) * 1000:6.1f} ms, "
            f"max {max(lat) * 1000:6.1f} ms"
        )
    with psycopg.connect(database_url(), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{DBNAME}" WITH (FORCE)')


if __name__ == "__main__":
    main()
