"""Drainer memory soak: one `-a follow=1` product_resync drainer fed at a steady, modest rate for a
bounded time, its resident memory sampled, to tell a leak (RSS growing with the work done) from a
plateau (allocator arenas, caches and buffers filling up once).

    python benchmarks/drain_soak.py --minutes 30 --stores 20 --products 60 --every 30

Every `--every` seconds each of the `--stores` sandbox stores is queued once more (what the
schedule does every 4 h, compressed), so the drainer crawls stores * products products per round.
RSS (/proc/<pid>/status VmRSS) is sampled every `--sample` seconds; each sample is printed with the
tasks completed so far, and the summary compares the first and last thirds of the soak: a plateau
shows about the same RSS in both, a leak a rise in proportion to the rounds. Loopback only; the
drainer runs one store at a time by default (`--slots`) to keep it light on a shared machine.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import argparse  # noqa: E402
import signal  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402

import psycopg  # noqa: E402

from benchmarks.ingest import bench_database, crawl_env, register_proxy, seed, start_sandbox  # noqa: E402


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for {pid}")


def enqueue_round(url: str, ids: list[int]) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO worker_tasks (role, platform, dispensary_id, priority) "
            "SELECT 'product_resync', 'dutchie', d, 0 FROM unnest(%s::bigint[]) AS d "
            "ON CONFLICT DO NOTHING",
            (ids,),
        )


def completed(url: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM worker_tasks WHERE status = 'completed'").fetchone()
    return int(row[0]) if row else 0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--stores", type=int, default=20)
    parser.add_argument("--products", type=int, default=60)
    parser.add_argument("--every", type=float, default=30.0, help="seconds between rounds of tasks")
    parser.add_argument("--sample", type=float, default=30.0, help="seconds between RSS samples")
    parser.add_argument("--slots", type=int, default=4, help="TASK_SLOTS of the drainer")
    parser.add_argument("--log", type=Path, default=None, help="the drainer's log (default: discarded)")
    args = parser.parse_args()

    url = bench_database("cannaspider_soak")
    sandbox, urls = start_sandbox(args.stores, args.products)
    log = open(args.log, "w") if args.log else subprocess.DEVNULL
    drainer = None
    try:
        ids = seed(url, urls["base"])
        register_proxy(url, urls["proxy"])
        env = crawl_env(url, urls)
        drainer = subprocess.Popen(
            [sys.executable, "-m", "scrapy", "crawl", "product_resync", "-a", "follow=1", "-s", "FEEDS={}"]
            + ["-s", "LOG_LEVEL=INFO", "-s", f"TASK_SLOTS={args.slots}", "-s", "TASK_POLL_S=1"],
            env=env,
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=log,
        )
        started = time.monotonic()
        end = started + args.minutes * 60
        next_round = started
        next_sample = started + args.sample
        samples: list[tuple[float, float, int]] = []
        print("minute  rss_mb  tasks_completed", flush=True)
        while time.monotonic() < end:
            if drainer.poll() is not None:
                raise SystemExit(f"the drainer exited {drainer.returncode}")
            now = time.monotonic()
            if now >= next_round:
                enqueue_round(url, ids)
                next_round += args.every
            if now >= next_sample:
                sample = ((now - started) / 60, rss_mb(drainer.pid), completed(url))
                samples.append(sample)
                print(f"{sample[0]:6.1f}  {sample[1]:6.1f}  {sample[2]}", flush=True)
                next_sample += args.sample
            time.sleep(max(0.0, min(next_round, next_sample, end) - time.monotonic()))
    finally:
        if drainer is not None and drainer.poll() is None:
            drainer.send_signal(signal.SIGTERM)
            drainer.wait(120)
        sandbox.terminate()
        sandbox.wait(10)
        if args.log:
            log.close()  # type: ignore[union-attr]
    if not samples:
        raise SystemExit("no RSS sample was taken: --minutes must be longer than --sample")
    third = max(len(samples) // 3, 1)
    first = sum(s[1] for s in samples[:third]) / third
    last = sum(s[1] for s in samples[-third:]) / third
    span = samples[-1][0] - samples[0][0] if len(samples) > 1 else 1.0
    slope = (samples[-1][1] - samples[0][1]) / span if len(samples) > 1 else 0.0
    # the second half alone, by least squares: the warm-up (arenas, caches, the first images) is
    # over by then, so a leak shows as a slope there and a plateau as ~0
    half = samples[len(samples) // 2 :]
    late, tasks = half_slope(half), half[-1][2] - half[0][2]
    print(
        f"drain soak: {args.minutes:g} min, {args.stores} stores x {args.products} products every {args.every:g} s, "
        f"{samples[-1][2]} tasks completed; RSS first third {first:.1f} MB, last third {last:.1f} MB "
        f"({last - first:+.1f} MB), first to last sample {slope:+.2f} MB/min; second half "
        f"({half[0][0]:.1f}-{half[-1][0]:.1f} min, {tasks} tasks): {late:+.3f} MB/min, "
        f"{half[-1][1] - half[0][1]:+.1f} MB"
    )


def half_slope(samples: list[tuple[float, float, int]]) -> float:
    """RSS growth in MB per minute over these samples, by least squares (0 for fewer than two)."""
    if len(samples) < 2:
        return 0.0
    mean_t = sum(s[0] for s in samples) / len(samples)
    mean_r = sum(s[1] for s in samples) / len(samples)
    var = sum((s[0] - mean_t) ** 2 for s in samples)
    return sum((s[0] - mean_t) * (s[1] - mean_r) for s in samples) / var if var else 0.0


if __name__ == "__main__":
    main()
