"""`scrapy enqueue`, `scrapy tasks`, `scrapy schedule --once`, `scrapy serve`, run as users run them."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import pytest

from tests.helpers import ROOT, run_scrapy
from tests.httpclient import http
from tests.tasks.conftest import add_store

pytestmark = pytest.mark.integration  # spawns (tests/tiers.py)


def env_for(db: str, **extra: str) -> dict:
    return {**os.environ, "DATABASE_URL": db, **extra}


def test_enqueue_reuses_and_refuses_bad_input_with_one_line(db, sql):
    d = add_store(sql)
    env = env_for(db)
    first = run_scrapy("enqueue", "product_resync", "--dispensary-id", str(d), "--priority", "20", env=env)
    assert first.returncode == 0 and first.stdout.strip() == (
        f"queued task 1 (product_resync, dispensary {d}, priority 20, pending)"
    )
    again = run_scrapy("enqueue", "product_resync", "--dispensary-id", str(d), "--platform", "dutchie", env=env)
    assert again.returncode == 0 and again.stdout.startswith("already queued: task 1")
    for argv, message in (
        (["enqueue", "product_rescan", "--dispensary-id", str(d)], "error: unknown role 'product_rescan'"),
        (["enqueue", "product_resync", "--dispensary-id", "999"], "error: dispensary 999 does not exist"),
        (["enqueue", "store_discovery"], "error: store_discovery needs state"),
        (
            ["enqueue", "product_resync", "--dispensary-id", str(d), "--platform", "weedmaps"],
            "error: unknown platform 'weedmaps' (supported: dutchie, jane)",
        ),
        (["tasks", "cancel", "abc"], "error: task id must be an integer, got 'abc'"),
        (["tasks", "--status", "done"], "error: unknown status 'done'"),
    ):
        bad = run_scrapy(*argv, env=env)
        assert bad.returncode == 2 and bad.stderr.strip().startswith(message), (argv, bad.stderr)
        assert len(bad.stderr.strip().splitlines()) == 1 and "Traceback" not in bad.stderr
    assert sql("SELECT count(*) FROM worker_tasks")[0][0] == 1
    jane = run_scrapy("enqueue", "product_resync", "--dispensary-id", str(d), "--platform", "jane", env=env)
    assert jane.returncode == 0 and jane.stdout.startswith("queued task "), jane.stderr
    assert sql("SELECT platform FROM worker_tasks ORDER BY id") == [("dutchie",), ("jane",)]


def test_schedule_once_then_tasks_cancel_and_retry(db, sql):
    add_store(sql, last_crawl_at="2020-01-01")
    env = env_for(db)
    once = run_scrapy("schedule", "--once", "-s", "SCHEDULE_DISCOVERY_STATES=AZ", env=env)
    assert once.returncode == 0 and "created 1 product_resync, 1 store_discovery, 1 analytics_refresh" in once.stdout
    twice = run_scrapy("schedule", "--once", "-s", "SCHEDULE_DISCOVERY_STATES=AZ", env=env)
    assert "created 0 product_resync, 0 store_discovery, 0 analytics_refresh" in twice.stdout
    listed = run_scrapy("tasks", "--role", "store_discovery", env=env)
    assert listed.returncode == 0 and "store_discovery" in listed.stdout and " AZ " in listed.stdout
    assert "product_resync" not in listed.stdout
    assert run_scrapy("tasks", "cancel", "2", env=env).stdout.startswith("cancelled task 2")
    assert run_scrapy("tasks", "retry", "2", env=env).stdout.startswith("retrying task 2")
    assert sql("SELECT status, attempts FROM worker_tasks WHERE id = 2") == [("pending", 0)]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_serve_answers_and_never_prints_the_token(db):
    port = _free_port()
    token = "do-not-print-this-token"
    proc = subprocess.Popen(
        [sys.executable, "-m", "scrapy", "serve", "--port", str(port)],
        cwd=ROOT,
        env=env_for(db, CANNASPIDER_API_TOKEN=token),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if http("GET", f"http://127.0.0.1:{port}/openapi.json", timeout=2).status == 200:
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline and proc.poll() is None, "scrapy serve did not start"
            time.sleep(0.3)
        auth = {"Authorization": f"Bearer {token}"}
        created = http("POST", f"http://127.0.0.1:{port}/api/tasks", {"role": "analytics_refresh"}, auth)
        assert created.status == 201, created.text
        assert http("POST", f"http://127.0.0.1:{port}/api/tasks", {"role": "analytics_refresh"}).status == 401
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=20)
    assert token not in out and "POST /api/tasks" in out
