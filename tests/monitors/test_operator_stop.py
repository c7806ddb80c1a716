"""A stop the operator asked for is not an alert (docs/health.md, "The checks"): a `-a follow=1`
drainer, a real `scrapy crawl` subprocess against the sandbox and the test database, stopped by
SIGTERM or SIGINT (what Scrapyd's cancel.json sends) finishes with reason `shutdown`, its health
report is healthy and the crawl-health webhook (a real receiver on loopback) is sent nothing, idle
or in the middle of a store's crawl."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cannaspider.commands.crawl import EXIT_INCOMPLETE
from tests.helpers import ROOT, add_store
from tests.spiders.test_queue_drain import enqueue

pytestmark = pytest.mark.integration  # spawns (tests/tiers.py)


def start_drainer(scrapy_env: dict, webhook_url: str) -> subprocess.Popen[str]:
    settings = {
        "TASK_POLL_S": "0.5",
        "ALERT_WEBHOOK_URL": webhook_url,
        "WEBHOOK_ALLOW_PRIVATE": "True",
        "HEALTH_CHECK_PERIOD_S": "0",  # judged at close only: the stop's report is the one
    }
    argv = [sys.executable, "-m", "scrapy", "crawl", "product_resync", "-a", "follow=1"]
    for name, value in settings.items():
        argv += ["-s", f"{name}={value}"]
    return subprocess.Popen(argv, env=scrapy_env, cwd=ROOT, stderr=subprocess.PIPE, text=True, start_new_session=True)


def wait_for_status(sql, proc, task_id: int, status: str) -> None:
    deadline = time.monotonic() + 120
    while sql("SELECT status FROM worker_tasks WHERE id = %s", (task_id,)) != [(status,)]:
        assert time.monotonic() < deadline and proc.poll() is None, f"task {task_id} never {status}"
        time.sleep(0.2)


def stop(proc: subprocess.Popen[str], signum: int) -> str:
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=60)
    assert "Traceback" not in err, err[-3000:]
    return err


def the_report(scrapy_env: dict) -> dict:
    [path] = (Path(scrapy_env["CANNASPIDER_DATA_DIR"]) / "reports" / "product_resync").glob("*.json")
    report = json.loads(path.read_text())
    assert report["finish_reason"] == "shutdown"
    assert report["ok"], [m for m in report["monitors"] if m["status"] != "passed"]
    return report


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_an_idle_drainer_stopped_is_healthy_and_alerts_nobody(scrapy_env, db, sandbox, sql, webhook, signum):
    task = enqueue(db, "product_resync", dispensary_id=add_store(db, sandbox.stores("AZ")[0]))
    proc = start_drainer(scrapy_env, webhook.url)
    try:
        wait_for_status(sql, proc, task.id, "completed")
    finally:
        err = stop(proc, signum)
    assert proc.returncode == 0, err[-3000:]  # idle, every task it took completed
    assert the_report(scrapy_env)["figures"]["cannaspider/stores_complete"] == 1
    assert webhook.bodies == [] and "crawl health" not in err


def test_a_drainer_stopped_mid_store_is_healthy_and_still_exits_3(scrapy_env, db, sandbox, sql, webhook):
    """The store the stop interrupted is a unit undone (exit 3), not an incomplete store crawl: 1 of 2
    would otherwise fail HEALTH_MAX_INCOMPLETE_SHARE at every deploy."""
    done = enqueue(db, "product_resync", dispensary_id=add_store(db, sandbox.stores("AZ")[0]))
    slow_store = sandbox.stores("AZ")[1]
    # each page 3 s late: the stop finds one in flight, and a graceful stop waits for it (60 s was
    # the proxy's idle timeout, 10 s, of waiting)
    sandbox.faults({"kind": "slow", "store": slow_store["id"], "delay": 3.0})
    proc = start_drainer(scrapy_env, webhook.url)
    try:
        wait_for_status(sql, proc, done.id, "completed")
        asked = sandbox.pages_asked(0)  # the first store's
        slow = enqueue(db, "product_resync", dispensary_id=add_store(db, slow_store))
        wait_for_status(sql, proc, slow.id, "running")
        deadline = time.monotonic() + 60
        while sandbox.pages_asked(0) == asked:  # its first page is on the way
            assert time.monotonic() < deadline and proc.poll() is None, "its first page never asked for"
            time.sleep(0.1)
    finally:
        err = stop(proc, signal.SIGINT)  # Scrapyd's cancel.json
    assert proc.returncode == EXIT_INCOMPLETE, err[-3000:]
    assert sql("SELECT status, attempts FROM worker_tasks WHERE id = %s", (slow.id,)) == [("pending", 0)]
    # the interrupted store's run is closed incomplete in crawl_runs (a unit undone: exit 3), not counted
    # against the store crawls the health check judges
    assert sql("SELECT status FROM crawl_runs WHERE task_id = %s", (slow.id,)) == [("incomplete",)]
    figures = the_report(scrapy_env)["figures"]
    assert figures["cannaspider/stores_complete"] == 1 and "cannaspider/stores_incomplete" not in figures
    assert webhook.bodies == [] and "crawl health" not in err
