"""Scrapyd: build the egg with scrapyd-deploy, upload it, schedule.json a crawl, see it land; nodes
that drain the queue (two Scrapyd on two ports share it, no task run twice), a cancelled job gives
its task back, and `scrapy schedule --scrapyd` starts draining jobs without piling them up.

This is also the guard against the PyPI `typing` backport: Scrapyd's runner puts site-packages on
PYTHONPATH, where that backport would shadow the standard library and break the job."""

from __future__ import annotations

import base64
import json
import os
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import psycopg
import pytest

from cannaspider.analytics.refresh import VIEWS
from cannaspider.tasks import queue
from tests.helpers import ROOT, add_store, products_of, run_scrapy, runs_of
from tests.httpclient import http
from tests.web.conftest import Service

pytestmark = pytest.mark.integration  # spawns (tests/tiers.py)

BIN = Path(sys.executable).parent


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def scrapyd_env(db: str, tmp_path: Path, **extra: str) -> dict:
    """The environment of a Scrapyd node (or a `scrapy schedule` beside it) on the test database."""
    return {
        **os.environ,
        "DATABASE_URL": db,
        "CANNASPIDER_DATA_DIR": str(tmp_path / "data"),
        "SCRAPYD_USERNAME": "ops",
        "SCRAPYD_PASSWORD": "s3cret",
        **extra,
    }


def _call(port: int, path: str, data: dict | None = None, files: dict | None = None) -> dict:
    headers = {"Authorization": "Basic " + base64.b64encode(b"ops:s3cret").decode()}
    body = None
    if files:
        boundary = "cannaspiderboundary"
        parts = []
        for key, value in (data or {}).items():
            parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{key}"\r\n\r\n{value}\r\n'.encode())
        for key, blob in files.items():
            parts.append(
                f'--{boundary}\r\nContent-Disposition: form-data; name="{key}"; filename="x.egg"\r\n'
                "Content-Type: application/octet-stream\r\n\r\n".encode()
                + blob
                + b"\r\n"
            )
        body = b"".join(parts) + f"--{boundary}--\r\n".encode()
        headers["Content-Type"] = f"multipart/form-data; boundary={boundary}"
    elif data is not None:
        body = urllib.parse.urlencode(data).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/{path}", data=body, headers=headers)
    with urllib.request.urlopen(req, timeout=90) as resp:  # a first schedule.json runs `scrapy list`
        return json.loads(resp.read())


@pytest.fixture(scope="module")
def egg(tmp_path_factory) -> bytes:
    """The egg scrapyd-deploy builds from this checkout, built once for the module's tests."""
    path = tmp_path_factory.mktemp("egg") / "cannaspider.egg"
    build = subprocess.run(
        [str(BIN / "scrapyd-deploy"), "--build-egg", str(path)], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert build.returncode == 0 and path.exists(), build.stderr
    return path.read_bytes()


def test_schedule_json_runs_a_crawl_from_the_deployed_egg(nodes, db, sandbox):
    store = sandbox.stores("AZ")[0]
    dispensary = add_store(db, store)
    [node] = nodes(1)  # the egg uploaded with addversion.json
    spiders = _call(node.port, "listspiders.json?project=cannaspider")["spiders"]
    assert {"store_discovery", "entry_point_discovery", "product_discovery", "product_resync"} <= set(spiders)
    job = node.schedule("product_resync", dispensary_id=str(dispensary))
    node.wait_finished(job, timeout=120)  # its log: no Traceback, no password
    assert runs_of(db, dispensary)[0][0] == "complete"
    assert set(products_of(db, dispensary)) == set(sandbox.menu(store["id"], 0))


def test_a_failed_job_says_why_in_its_own_log_and_on_the_jobs_page(nodes, db, sandbox):
    """Scrapyd keeps a job's stderr in its daemon log only, and listjobs.json shows the job finished like
    any other: the `error:` line is in the job's log too, and the job is failed, exit code 2 and its
    reason, in crawl_jobs, GET /api/jobs and /dashboard/jobs (its id: the `-a _job=` Scrapyd passes)."""
    [node] = nodes(1)
    job = node.schedule("product_resync", follow="maybe")
    log = node.wait_finished(job, timeout=60)
    assert "ERROR: error: product_resync: follow must be 1 or 0" in log and "(exit code 2)" in log, log[-3000:]
    with Service(db, None) as service:
        [found] = http("GET", f"{service.base}/api/jobs?job={job}").json()["jobs"]
        page = http("GET", f"{service.base}/dashboard/jobs?status=failed").text
    assert (found["status"], found["exit_code"], found["spider"]) == ("failed", 2, "product_resync")
    assert found["error"].startswith("product_resync: follow must be 1 or 0") and found["error"] in log
    assert found["log_file"] and Path(found["log_file"]).name == f"{job}.log"
    assert found["arguments"] == {"follow": "maybe"}  # _job is the job's id, not an argument shown
    assert f'data-job="{job}" data-status="failed" data-exit="2"' in page


# -- nodes that drain the queue ------------------------------------------------------------------------------
class Node:
    """A Scrapyd on a loopback port with the egg deployed, aimed at the test database and sandbox."""

    def __init__(self, tmp_path: Path, egg: bytes, env: dict, name: str):
        self.port = _free_port()
        self.work = tmp_path / name
        self.work.mkdir()
        (self.work / "scrapyd.conf").write_text(
            (ROOT / "scrapyd.conf").read_text().replace("http_port    = 6800", f"http_port    = {self.port}")
        )
        self.proc = subprocess.Popen(
            [str(BIN / "scrapyd")], cwd=self.work, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    _call(self.port, "daemonstatus.json")
                    break
                except OSError:
                    assert time.monotonic() < deadline, "scrapyd did not start"
                    time.sleep(0.2)
            added = _call(self.port, "addversion.json", {"project": "cannaspider", "version": "1"}, {"egg": egg})
            assert added["status"] == "ok", added
        except BaseException:
            # not in the fixture's list yet: a failed start must not leave its Scrapyd running
            self.proc.terminate()
            self.proc.wait(10)
            raise

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def schedule(self, spider: str, **args: str) -> str:
        job = _call(self.port, "schedule.json", {"project": "cannaspider", "spider": spider, **args})
        assert job["status"] == "ok", job
        return job["jobid"]

    def jobs(self) -> dict:
        return _call(self.port, "listjobs.json?project=cannaspider")

    def log(self, job: str) -> str:
        """The job's log so far ("" before Scrapyd has opened it)."""
        found = next((self.work / ".data" / "scrapyd" / "logs").rglob(f"{job}.log"), None)
        return found.read_text() if found else ""

    def wait_finished(self, job: str, timeout: float = 150) -> str:
        deadline = time.monotonic() + timeout
        while not any(j["id"] == job for j in self.jobs()["finished"]):
            assert time.monotonic() < deadline, self.jobs()
            time.sleep(0.5)
        log = next((self.work / ".data" / "scrapyd" / "logs").rglob(f"{job}.log")).read_text()
        assert "Traceback" not in log and "s3cret" not in log, log[-3000:]
        return log

    def stop(self) -> None:
        """Cancel its jobs, then stop it: Scrapyd leaves running crawls behind when it stops, and a
        draining job (`follow=1`) would outlive the test."""
        for signal_name in ("TERM", "KILL"):
            live = self.jobs()
            for job in live["running"] + live["pending"]:
                _call(self.port, "cancel.json", {"project": "cannaspider", "job": job["id"], "signal": signal_name})
            deadline = time.monotonic() + 15
            while (live := self.jobs())["running"] and time.monotonic() < deadline:
                time.sleep(0.3)
            if not live["running"]:
                break
        self.proc.terminate()
        self.proc.wait(10)


@pytest.fixture
def nodes(tmp_path, egg, db, sandbox, sandbox_proxy):
    started: list[Node] = []
    env = scrapyd_env(db, tmp_path, DUTCHIE_GRAPHQL_URL=sandbox.urls.graphql)

    def start(n: int) -> list[Node]:
        started.extend(Node(tmp_path, egg, env, f"node{len(started) + i}") for i in range(n))
        return started[-n:]

    yield start
    for node in started:
        node.stop()


def _enqueue(db: str, **target) -> int:
    import asyncio

    async def main():
        async with await psycopg.AsyncConnection.connect(db, autocommit=True) as conn:
            return (await queue.enqueue(conn, "product_resync", **target)).task.id

    return asyncio.run(main())


def _sql(db: str, query: str, params=None):
    with psycopg.connect(db, autocommit=True) as conn:
        return conn.execute(query, params).fetchall()


def test_two_nodes_drain_one_queue_and_run_no_task_twice(nodes, db, sandbox):
    stores = sandbox.stores("AZ")[:4] + sandbox.stores("MI")[:4]
    ids = [add_store(db, store) for store in stores]
    sandbox.faults({"kind": "slow", "delay": 0.5})  # each page takes a moment: both nodes get work
    a, b = nodes(2)
    # both nodes wait for work (follow=1), then it arrives: they share it
    jobs = [(node, node.schedule("product_resync", follow="1", setting="TASK_SLOTS=2")) for node in (a, b)]
    deadline = time.monotonic() + 90
    while not all(any(j["id"] == job for j in node.jobs()["running"]) for node, job in jobs):
        assert time.monotonic() < deadline, [node.jobs() for node, _ in jobs]
        time.sleep(0.5)
    # past the crawl's start-up: both drain (and listen) before the work arrives
    for node, job in jobs:
        while "draining the product_resync queue" not in node.log(job):
            assert time.monotonic() < deadline, [node.jobs() for node, _ in jobs]
            time.sleep(0.2)
    for d in ids:
        _enqueue(db, dispensary_id=d)
    while _sql(db, "SELECT count(*) FROM worker_tasks WHERE status = 'completed'") != [(8,)]:
        assert time.monotonic() < deadline + 120, _sql(db, "SELECT status, count(*) FROM worker_tasks GROUP BY 1")
        time.sleep(0.5)
    for node, job in jobs:
        _call(node.port, "cancel.json", {"project": "cannaspider", "job": job})
    logs = [node.wait_finished(job, timeout=60) for node, job in jobs]
    assert _sql(db, "SELECT status, attempts, count(*) FROM worker_tasks GROUP BY 1, 2") == [("completed", 1, 8)]
    assert _sql(db, "SELECT count(*), count(DISTINCT task_id), count(DISTINCT pid) FROM crawl_runs") == [(8, 8, 2)]
    assert all("draining the product_resync queue" in log for log in logs)


def test_a_cancelled_job_gives_its_task_back(nodes, db, sandbox):
    store = sandbox.stores("AZ")[0]
    task = _enqueue(db, dispensary_id=add_store(db, store))
    sandbox.faults({"kind": "slow", "store": store["id"], "delay": 60.0})
    [node] = nodes(1)
    job = node.schedule("product_resync", follow="1")
    deadline = time.monotonic() + 60
    while _sql(db, "SELECT status FROM worker_tasks WHERE id = %s", (task,)) != [("running",)]:
        assert time.monotonic() < deadline
        time.sleep(0.3)
    assert _call(node.port, "cancel.json", {"project": "cannaspider", "job": job})["status"] == "ok"
    node.wait_finished(job, timeout=60)
    assert _sql(db, "SELECT status, attempts FROM worker_tasks WHERE id = %s", (task,)) == [("pending", 0)]
    assert _sql(db, "SELECT status FROM crawl_runs")[0][0] in ("failed", "incomplete")


def test_scrapy_schedule_starts_draining_jobs_without_piling_them_up(nodes, db, sandbox, tmp_path):
    store = sandbox.stores("AZ")[0]
    slow = _enqueue(db, dispensary_id=add_store(db, store))
    sandbox.faults({"kind": "slow", "store": store["id"], "delay": 60.0})
    a, b = nodes(2)
    env = scrapyd_env(db, tmp_path)
    urls = f"{a.url},{b.url}"
    # one slot per job (the schedule gives its jobs its own TASK_SLOTS): node A's job holds the slow
    # store and cannot take the work that arrives next, which must go to node B
    first = run_scrapy("schedule", "--once", "--scrapyd", urls, "-s", "TASK_SLOTS=1", env=env)
    assert first.returncode == 0, first.stderr[-3000:]
    # one pending task: one job is enough
    assert first.stdout.count("started product_resync") == 1 and "s3cret" not in first.stdout + first.stderr
    deadline = time.monotonic() + 60
    while _sql(db, "SELECT status FROM worker_tasks WHERE id = %s", (slow,)) != [("running",)]:
        assert time.monotonic() < deadline
        time.sleep(0.3)
    # more work arrives while that node is busy: the job goes to the other node, never a second one on the first
    for other in sandbox.stores("MI")[:2]:
        _enqueue(db, dispensary_id=add_store(db, other))
    second = run_scrapy("schedule", "--once", "--scrapyd", urls, "-s", "TASK_SLOTS=1", env=env)
    assert second.returncode == 0, second.stderr[-3000:]
    assert second.stdout.count("started product_resync") == 1 and "already pending or running" in second.stdout

    # (the schedule also queues the daily analytics refresh and starts its own job: another spider)
    def resync_jobs(node) -> int:
        jobs = node.jobs()
        return sum(j["spider"] == "product_resync" for j in jobs["running"] + jobs["pending"])

    assert all(resync_jobs(n) <= 1 for n in (a, b)) and any(resync_jobs(n) for n in (a, b))
    bad = run_scrapy("schedule", "--once", "--scrapyd", "ftp://x", env=env)
    assert bad.returncode == 2 and "not an http(s) URL" in bad.stderr


def test_the_schedule_over_many_ticks_completes_every_task_with_one_refresh_a_day(nodes, db, sandbox, tmp_path):
    """Every role `scrapy schedule --scrapyd` starts drains its queue and completes its task: over
    several ticks on two nodes, one product_resync and one analytics refresh (the day's), each task
    completed at its first attempt, never a second refresh started by a tick that finds a node free."""
    store = add_store(db, sandbox.stores("AZ")[0])
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute("TRUNCATE analytics_refreshes")
    a, b = nodes(2)
    env = scrapyd_env(db, tmp_path)
    started = 0
    for _ in range(4):
        tick = run_scrapy("schedule", "--once", "--scrapyd", f"{a.url},{b.url}", env=env)
        assert tick.returncode == 0, tick.stderr[-3000:]
        started += tick.stdout.count(": started ")
        for node in (a, b):  # the jobs it started have run: the next tick finds both nodes free
            deadline = time.monotonic() + 150
            while (jobs := node.jobs())["pending"] or jobs["running"]:
                assert time.monotonic() < deadline, jobs
                time.sleep(0.5)
    for node in (a, b):
        for job in node.jobs()["finished"]:
            node.wait_finished(job["id"])  # each job's log: no Traceback
    assert started == 2  # one job per role, on the first tick only
    tasks = _sql(db, "SELECT role, status, attempts, count(*) FROM worker_tasks GROUP BY 1, 2, 3 ORDER BY 1")
    assert tasks == [("analytics_refresh", "completed", 1, 1), ("product_resync", "completed", 1, 1)]
    assert _sql(db, "SELECT count(DISTINCT view_name), count(*) FROM analytics_refreshes") == [(len(VIEWS), len(VIEWS))]
    assert runs_of(db, store)[0][0] == "complete"
