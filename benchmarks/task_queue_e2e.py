"""End-to-end queue benchmark: N sandbox stores resynced through the task queue by two draining
processes, against the same crawl given as `-a dispensary_id=` lists (half the stores each) to two
processes. The difference is the queue's cost: claiming, leases and heartbeats, the per-task
store lookup and crawl-run insert, completing each task in its store's close transaction.

    python benchmarks/task_queue_e2e.py --stores 1000 --products 60
    python benchmarks/task_queue_e2e.py --stores 200 --products 60 --repeats 2     # a loaded machine

Both variants are update crawls (a first crawl inserts every product before measuring), timed
wall-clock from the two processes' start to the last one's exit, alternated `--repeats` times;
the fastest of each is reported. The draining processes hold TASK_SLOTS = CONCURRENT_REQUESTS
stores each, the concurrency the explicit crawl gets from Scrapy. Loopback only.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import argparse  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402

import psycopg  # noqa: E402

from benchmarks.ingest import bench_database, crawl_env, register_proxy, seed, start_sandbox  # noqa: E402

CRAWL = [sys.executable, "-m", "scrapy", "crawl", "product_resync", "-s", "FEEDS={}", "-s", "LOG_LEVEL=INFO"]


def run_two(env: dict, argv_pairs: list[list[str]]) -> float:
    started = time.monotonic()
    procs = [
        subprocess.Popen(
            [*CRAWL, *argv],
            env=env,
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for argv in argv_pairs
    ]
    errors = [p.communicate(timeout=3600)[1] for p in procs]
    elapsed = time.monotonic() - started
    for proc, err in zip(procs, errors, strict=True):
        if proc.returncode != 0 or "Traceback" in err:
            raise SystemExit(f"crawl failed:\n{err[-3000:]}")
    return elapsed


def complete_runs(url: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM crawl_runs WHERE status = 'complete'").fetchone()
    return int(row[0]) if row else 0


def enqueue_all(url: str, ids: list[int]) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("DELETE FROM worker_tasks")
        conn.execute(
            "INSERT INTO worker_tasks (role, platform, dispensary_id, priority) "
            "SELECT 'product_resync', 'dutchie', d, 0 FROM unnest(%s::bigint[]) AS d",
            (ids,),
        )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--stores", type=int, default=1000)
    parser.add_argument("--products", type=int, default=60)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=32, help="CONCURRENT_REQUESTS")
    parser.add_argument("--slots", type=int, default=None, help="TASK_SLOTS (default: --concurrency)")
    args = parser.parse_args()

    url = bench_database("cannaspider_bench_queue_e2e")
    sandbox, urls = start_sandbox(args.stores, args.products)
    try:
        ids = seed(url, urls["base"])
        register_proxy(url, urls["proxy"])
        env = crawl_env(url, urls)
        common = ["-s", f"CONCURRENT_REQUESTS={args.concurrency}"]
        halves = [ids[0::2], ids[1::2]]
        direct_argv = [[*common, "-a", "dispensary_id=" + ",".join(map(str, half))] for half in halves]
        slots = args.slots or args.concurrency
        queue_argv = [[*common, "-s", f"TASK_SLOTS={slots}"]] * 2
        run_two(env, direct_argv)  # the first crawl inserts every product: both measured variants update
        direct: list[float] = []
        queued: list[float] = []
        for _ in range(args.repeats):
            before = complete_runs(url)
            direct.append(run_two(env, direct_argv))
            assert complete_runs(url) - before == len(ids), "the explicit crawl left stores incomplete"
            enqueue_all(url, ids)
            before = complete_runs(url)
            queued.append(run_two(env, queue_argv))
            with psycopg.connect(url, autocommit=True) as conn:
                done = conn.execute(
                    "SELECT count(*), count(DISTINCT claimed_by) FROM worker_tasks "
                    "WHERE status = 'completed' AND attempts = 1"
                ).fetchone()
            assert done is not None and done[0] == len(ids), f"tasks not all completed once: {done}"
            assert complete_runs(url) - before == len(ids), "the queued crawl left stores incomplete"
            workers = done[1]
    finally:
        sandbox.terminate()
        sandbox.wait(10)

    d, q = min(direct), min(queued)
    per_store_ms = (q - d) / len(ids) * 1000
    print(
        f"queue end-to-end benchmark: {len(ids)} stores x {args.products} products, two processes, "
        f"CONCURRENT_REQUESTS = {args.concurrency}, TASK_SLOTS = {args.slots or args.concurrency}; "
        f"fastest of {args.repeats} (all: "
        f"direct {', '.join(f'{x:.1f}' for x in direct)} s; queue {', '.join(f'{x:.1f}' for x in queued)} s)"
    )
    print(f"  -a dispensary_id lists      {d:8.1f} s   ({d / len(ids) * 1000:.1f} ms per store, wall clock)")
    print(f"  drained from the queue      {q:8.1f} s   ({workers} workers completed the tasks)")
    print(f"  queue overhead per store    {per_store_ms:8.2f} ms  = {(q - d) / d * 100:+.1f}% of the crawl time")
    print("                                          (target <= 5%)")


if __name__ == "__main__":
    main()
