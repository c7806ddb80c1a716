"""A queue-draining crawl whose proxy pool empties (cannaspider/stealth/stopping.py): `scrapy crawl
product_resync -a follow=1` against the sandbox, its only proxy blocked until deactivated, then
enabled again by the operator."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest

from cannaspider.tasks import queue
from tests.helpers import ROOT, add_store, holds_for, run_scrapy

pytestmark = pytest.mark.integration  # spawns (tests/tiers.py)

OUTAGE_SETTINGS = {
    "STEALTH_PROXY_MAX_FAILURES": "2",  # deactivated by the first page's blocks
    "STEALTH_FAILURE_WINDOW_S": "0",  # each block an event: the outage comes at once
    "STEALTH_PROXY_BACKOFF_S": "0",
    "STEALTH_OUTAGE_POLL_S": "0.5",
    "STEALTH_HEALTH_FLUSH_S": "0.2",
    "TASK_POLL_S": "0.5",
}


def enqueue(db: str, dispensary_id: int) -> int:
    async def main() -> int:
        async with await psycopg.AsyncConnection.connect(db, autocommit=True) as conn:
            return (await queue.enqueue(conn, "product_resync", dispensary_id=dispensary_id)).task.id

    return asyncio.run(main())


@contextmanager
def follow_drainer(scrapy_env: dict, log: Path, **settings: str) -> Iterator[subprocess.Popen]:
    """`scrapy crawl product_resync -a follow=1` in the background (its log in `log`), stopped
    with SIGTERM at the end."""
    argv = [sys.executable, "-m", "scrapy", "crawl", "product_resync", "-a", "follow=1"]
    for name, value in {**OUTAGE_SETTINGS, **settings}.items():
        argv += ["-s", f"{name}={value}"]
    with log.open("w") as err:
        proc = subprocess.Popen(
            argv, cwd=ROOT, env={**scrapy_env, "CANNASPIDER_LOG_LEVEL": "INFO"}, stdout=subprocess.DEVNULL, stderr=err
        )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def wait_for(what: str, check, timeout: float = 60.0, proc: subprocess.Popen | None = None):
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return found
        assert proc is None or proc.poll() is None, f"the drainer exited while waiting for {what}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def test_a_follow_drainer_waits_out_a_proxy_outage_and_burns_no_attempt(
    scrapy_env, db, sandbox, sandbox_proxy, sql, tmp_path
):
    """Was: the middleware's stop was for good; after the operator enabled the proxy again every
    task the drainer claimed failed at once, until all had used their attempts."""
    ids = [add_store(db, s) for s in sandbox.stores("AZ")[:3]]
    sandbox.faults({"kind": "block403", "proxy": "sandbox"})  # the pool's only exit is blocked
    first = enqueue(db, ids[0])
    log = tmp_path / "drainer.log"
    with follow_drainer(scrapy_env, log) as proc:
        wait_for("the deactivation", lambda: sql("SELECT NOT is_active FROM proxies")[0][0], proc=proc)
        # the crawl in progress ended, its task went back to the queue with its attempt not counted
        wait_for(
            "the task given back",
            lambda: sql("SELECT status = 'pending' AND attempts = 0 FROM worker_tasks WHERE id = %s", (first,))[0][0],
            proc=proc,
        )
        later = [enqueue(db, d) for d in ids[1:]]  # queued during the outage
        # four polls of the table and of the queue: nothing is claimed without a proxy
        unclaimed = [("pending", 0, None)] * 3
        holds_for(
            2.0,
            lambda: sql("SELECT status, attempts, claimed_by FROM worker_tasks ORDER BY id") == unclaimed,
            "every task pending, unclaimed, its attempts untouched",
        )
        sandbox.faults()  # the exit is clean again; the operator brings the proxy back
        assert run_scrapy("proxies", "enable", str(sandbox_proxy), env=scrapy_env).returncode == 0
        done = wait_for(
            "the tasks completed",
            lambda: (
                (rows := sql("SELECT status, attempts FROM worker_tasks ORDER BY id"))
                and all(r[0] == "completed" for r in rows)
                and rows
            ),
            proc=proc,
        )
    assert done == [("completed", 1)] * 3  # one attempt each: the one that did the crawl
    assert [r[0] for r in sql("SELECT id FROM worker_tasks ORDER BY id")] == [first, *later]
    assert sql("SELECT count(*) FROM crawl_runs WHERE status = 'complete'")[0][0] == 3
    text = log.read_text()
    assert "Traceback" not in text, text[-4000:]
    assert "ALERT: every proxy of the pool is deactivated" in text and "the product_resync queue waits" in text
    assert "1 product_resync task(s) given back to the queue, attempts not counted" in text
    assert "proxy pool: 1 active proxy(ies) again: the product_resync queue goes on" in text
    assert "pa55@w0rd" not in text


def test_a_drainer_whose_pool_empties_gives_its_tasks_back_and_stops(scrapy_env, db, sandbox, sandbox_proxy, sql):
    """Without follow: the alert and the stop as for any crawl, but the claimed batch goes back to
    the queue untouched. Was: every task it held, and every one it claimed after, failed an attempt."""
    import socket

    ids = [add_store(db, s) for s in sandbox.stores("AZ")[:3]]
    queued = [enqueue(db, d) for d in ids]
    sql("UPDATE proxies SET is_active = false WHERE id = %s", (sandbox_proxy,))
    with socket.socket() as s:  # a proxy nobody listens on: the pool's only one
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]
    sql("INSERT INTO proxies (host, port, username, password) VALUES ('127.0.0.1', %s, 'nobody', 'x')", (dead,))
    argv = ["crawl", "product_resync"]
    for name, value in OUTAGE_SETTINGS.items():
        argv += ["-s", f"{name}={value}"]
    result = run_scrapy(*argv, env=scrapy_env)
    assert "Traceback" not in result.stderr, result.stderr[-4000:]
    rows = sql("SELECT id, status, attempts, claimed_by FROM worker_tasks ORDER BY id")
    assert rows == [(t, "pending", 0, None) for t in queued]
    assert result.returncode == 2 and "ALERT: every proxy of the pool is deactivated" in result.stderr
    assert "3 product_resync task(s) given back to the queue, attempts not counted" in result.stderr


def test_a_follow_drainer_started_without_proxy_says_why_on_a_batch_then_waits_for_one(
    scrapy_env, db, sandbox, sandbox_proxy, sql, tmp_path
):
    """Was: it failed the batch and exited (2); restarted by its supervisor it failed another batch
    each time, until the tasks had used their attempts."""
    task = enqueue(db, add_store(db, sandbox.stores("AZ")[0]))
    sql("UPDATE proxies SET is_active = false")  # `proxies disable`
    log = tmp_path / "drainer.log"
    with follow_drainer(scrapy_env, log, TASK_RETRY_BACKOFF_S="0.5") as proc:
        said = wait_for(
            "the reason on the task",
            lambda: (
                sql("SELECT status, attempts, error FROM worker_tasks WHERE id = %s", (task,))[0][2] is not None
                and sql("SELECT status, attempts, error FROM worker_tasks WHERE id = %s", (task,))[0]
            ),
            proc=proc,
        )
        # the drainer waits (it does not exit, it sends nothing)
        holds_for(2.0, lambda: proc.poll() is None and sandbox.requests() == {}, "the drainer up and silent")
        assert run_scrapy("proxies", "enable", str(sandbox_proxy), env=scrapy_env).returncode == 0
        done = wait_for(
            "the task completed",
            lambda: (
                (r := sql("SELECT status, attempts FROM worker_tasks WHERE id = %s", (task,))[0])[0] == "completed"
                and r
            ),
            proc=proc,
        )
    assert said[:2] == ("pending", 1) and "no active proxy in the proxies table" in said[2]
    assert done == ("completed", 2)  # the attempt that said why, and the one that crawled
    text = log.read_text()
    assert "Traceback" not in text, text[-4000:]
    assert "proxy pool: 1 active proxy(ies): the product_resync queue starts" in text
