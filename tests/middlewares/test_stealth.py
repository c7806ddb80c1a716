"""The stealth layer end to end: `scrapy crawl` against the sandbox through real forward proxies
(proxy.py with basic auth) registered in the test database."""

from __future__ import annotations

import asyncio
import signal
import socket
import subprocess
import sys
import time

import psycopg
import pytest

from cannaspider.tasks import queue
from sandbox.forward_proxy import ForwardProxy
from tests.helpers import NO_IMAGES, ROOT, SANDBOX_PROXY_AUTH, add_store, products_of, register_proxy, runs_of

pytestmark = pytest.mark.integration  # spawns (tests/tiers.py)

BAD_AUTH = ("other", "s3cret/pw")


def dead_proxy_url() -> str:
    """A loopback port nobody listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


@pytest.fixture
def blocked_proxy():
    """A second sandbox proxy, with other credentials, whose requests the sandbox can block."""
    proxy = ForwardProxy(*BAD_AUTH, name="blocked").start()
    yield proxy
    proxy.stop()


@pytest.fixture
def store(sandbox):
    return sandbox.stores("AZ")[0]


def proxy_rows(sql) -> dict[int, tuple]:
    rows = sql(
        "SELECT id, is_active, success_count, failure_count, last_error, avg_response_time_ms, last_used_at "
        "FROM proxies ORDER BY id"
    )
    return {r[0]: r[1:] for r in rows}


def test_a_dead_and_a_blocked_proxy_are_deactivated_and_every_page_comes_through_the_good_one(
    scrapy_env, db, sandbox, sandbox_proxy, blocked_proxy, sql
):
    # a state's 6 stores, one request at a time: each store's session meets the blocked proxy, then
    # the dead one, first, each failure its own event (requests in flight together are one): twice
    # the stores each bad one needs to reach its STEALTH_PROXY_MAX_FAILURES. Every store of the
    # catalog, 18, all at once, reached it only by the spread of their start, for three times the
    # crawl and its 3,600 images.
    stores = sandbox.stores("AZ")
    ids = [add_store(db, s) for s in stores]
    # the pool tries the lowest row id first (ordered_crawl): the blocked proxy, then the dead one,
    # then the good one, so each bad one meets its STEALTH_PROXY_MAX_FAILURES whatever a random
    # pick would have drawn (it was: a run whose sessions drew the blocked proxy twice only failed)
    sql("UPDATE proxies SET is_active = false WHERE id = %s", (sandbox_proxy,))
    blocked_id = register_proxy(db, blocked_proxy.url, BAD_AUTH)
    dead_id = register_proxy(db, dead_proxy_url(), ("nobody", "x"))
    good_id = register_proxy(db, sandbox.urls.proxy, SANDBOX_PROXY_AUTH)
    sandbox.faults({"kind": "block403", "proxy": "blocked"})  # Cloudflare has this exit's address
    result = resync_in_order(
        scrapy_env,
        ids,
        "STEALTH_PROXY_MAX_FAILURES=3",  # fewer stores than a real pool sees: deactivate sooner
        "STEALTH_FAILURE_WINDOW_S=0",  # each failure counts (a short crawl: no time for events apart)
        "CONCURRENT_REQUESTS=1",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    rows = proxy_rows(sql)
    good = rows[good_id]
    assert good[0] is True and good[2] == 0 and good[3] is None  # active, no failure, no error
    assert rows[blocked_id][0] is False and "blocked: HTTP 403 Cloudflare block page" in rows[blocked_id][3]
    assert rows[dead_id][0] is False and "ConnectionRefused" in rows[dead_id][3]
    assert rows[blocked_id][1] == rows[dead_id][1] == 0  # no success through the bad ones
    # every page of every store came through the good proxy, with its own credentials on retries
    pages = 0
    for store, d in zip(stores, ids, strict=True):
        assert set(products_of(db, d)) == set(sandbox.menu(store["id"], 0))
        run = runs_of(db, d)[-1]
        assert run[0] == "complete" and run[4] == 0  # nothing marked missing
        pages += run[6]
    # (images go through their store's session too, but do not judge the proxy: not counted)
    assert good[1] == pages and good[4] is not None and good[5] is not None
    seen = sandbox.requests()
    assert seen["via:sandbox"] == pages and seen.get("via:blocked", 0) >= 3
    assert "image via:-" not in seen  # images: through a proxy of the pool, never direct
    assert "incoherent_identity" not in seen  # every identity passed the sandbox's coherence check
    assert f"proxy #{blocked_id} http://other:***@" in result.stderr  # the deactivation, masked
    assert f"'cannaspider/proxy/{blocked_id}/blocked': " in result.stderr  # blocks per proxy (crawl health)
    assert BAD_AUTH[1] not in result.stderr and "pa55@w0rd" not in result.stderr


def test_a_proxy_failing_one_request_in_three_is_deactivated_between_its_successes(
    scrapy_env, db, sandbox, sandbox_proxy, blocked_proxy, sql
):
    """Was: each success reset failure_count, so a proxy blocked on a third of its requests never
    had five failures in a row and stayed in the pool. One request at a time, each failure its own
    event (STEALTH_FAILURE_WINDOW_S=0: the pages alone, without the images that once spaced them out,
    come seconds apart), the flaky proxy first for every new store session."""
    stores = sandbox.stores()
    ids = [add_store(db, s) for s in stores]
    sql("UPDATE proxies SET is_active = false WHERE id = %s", (sandbox_proxy,))
    flaky_id = register_proxy(db, blocked_proxy.url, BAD_AUTH)
    good_id = register_proxy(db, sandbox.urls.proxy, SANDBOX_PROXY_AUTH)
    sandbox.faults({"kind": "block403", "proxy": "blocked", "rate": 0.34})
    # (no images: they go through their store's session but never judge a proxy; 3,600 of them,
    # one at a time, were most of this crawl)
    result = resync_in_order(scrapy_env, ids, "CONCURRENT_REQUESTS=1", "STEALTH_FAILURE_WINDOW_S=0", NO_IMAGES[1])
    assert result.returncode == 0, result.stderr[-3000:]
    rows = proxy_rows(sql)
    flaky, good = rows[flaky_id], rows[good_id]
    ((recent,),) = sql("SELECT recent_attempts FROM proxies WHERE id = %s", (flaky_id,))
    assert flaky[0] is False and flaky[2] >= 5 and flaky[1] > 0, (flaky, recent)  # out, with successes too
    assert recent.count("F") >= 5 and "S" in recent.strip("S")  # successes between its failures
    assert good[0] is True and good[2] == 0
    for d in ids:
        assert runs_of(db, d)[-1][0] == "complete"  # each blocked page retried through the good one
    assert f"proxy #{flaky_id} http://other:***@" in result.stderr and "attempts failed" in result.stderr


def test_a_blocked_page_is_retried_three_times_then_the_crawl_is_incomplete(crawl, db, sandbox, store, sql):
    d = add_store(db, store)
    assert crawl("product_resync", dispensary_id=d).returncode == 0
    before = products_of(db, d)
    sandbox.epoch(3)
    sandbox.faults({"kind": "challenge503", "store": store["id"], "pages": [1]})
    result = crawl("product_resync", dispensary_id=d)
    assert result.stderr.count("rotating proxy and identity") == 3
    assert "ProxyBlocked: challenge: HTTP 503 Cloudflare challenge page" in result.stderr
    assert "crawl incomplete, no product will be marked missing" in result.stderr
    status, error, *_ = runs_of(db, d)[-1]
    assert status == "incomplete" and "still after 3 retries" in error
    after = products_of(db, d)
    assert all(after[p][:2] == (0, "in_stock") for p in before)
    (row,) = proxy_rows(sql).values()
    # 4 blocks within a moment: one failure event (docs/stealth.md, "Failures"), still active
    assert row[0] is True and row[2] == 1 and "challenge" in row[3]
    assert "'cannaspider/proxy_failures_in_one_event': 3" in result.stderr


def test_no_active_proxy_refuses_to_start_with_one_line(crawl, db, sandbox, store, sql):
    d = add_store(db, store)
    sql("UPDATE proxies SET is_active = false")
    result = crawl("product_resync", dispensary_id=d)
    errors = [line for line in result.stderr.splitlines() if "] ERROR:" in line]
    # one line says why; the crawl-health monitor's alert (docs/health.md) is the only other ERROR
    assert "no active proxy in the proxies table" in errors[0]
    assert len(errors) == 2 and "[cannaspider.monitors" in errors[1], errors
    assert result.returncode == 2 and result.stderr.strip().splitlines()[-1].startswith("error: no active proxy")
    assert sandbox.requests() == {}  # nothing was sent
    assert runs_of(db, d) == []


def test_no_active_proxy_fails_the_queued_tasks_with_that_reason(crawl, db, sandbox, store, sql):
    """A worker draining the queue with no proxy fails what it claims (retried later, once a proxy
    is back): the reason shows on the task, nothing is sent, the store keeps its products."""
    d = add_store(db, store)

    async def enqueue() -> int:
        async with await psycopg.AsyncConnection.connect(db, autocommit=True) as conn:
            return (await queue.enqueue(conn, "product_resync", dispensary_id=d)).task.id

    task_id = asyncio.run(enqueue())
    sql("UPDATE proxies SET is_active = false")
    result = crawl("product_resync")  # no target: drain the queue
    assert result.returncode == 2 and "error: no active proxy" in result.stderr
    ((status, attempts, error, run_after),) = sql(
        "SELECT status, attempts, error, run_after > now() FROM worker_tasks WHERE id = %s", (task_id,)
    )
    assert (status, attempts, run_after) == ("pending", 1, True), (status, attempts, error)
    assert "no active proxy in the proxies table" in error
    assert sandbox.requests() == {} and runs_of(db, d) == []


def test_every_proxy_dead_stops_the_crawl_with_an_alert_and_marks_nothing_missing(crawl, db, sandbox, sql):
    stores = sandbox.stores("AZ")
    ids = [add_store(db, s) for s in stores]
    assert crawl("product_resync", *NO_IMAGES, state="AZ").returncode == 0  # (the state's 1,100 images: not the point)
    before = {d: products_of(db, d) for d in ids}
    sql("UPDATE proxies SET is_active = false")
    dead_id = register_proxy(db, dead_proxy_url(), None)
    sandbox.epoch(3)
    # each failure counts: the short crawl's failures are all of one moment (one event otherwise)
    result = crawl("product_resync", "-s", "STEALTH_FAILURE_WINDOW_S=0", state="AZ")
    assert "ALERT: every proxy of the pool is deactivated" in result.stderr
    assert proxy_rows(sql)[dead_id][0] is False
    for d in ids:
        assert runs_of(db, d)[-1][0] == "incomplete"  # none complete, none left running
        after = products_of(db, d)
        assert all(after[p][:2] == (0, "in_stock") for p in before[d])
    assert "'cannaspider/fatal_error': 'ALERT: every proxy" in result.stderr


def test_sigint_still_stops_a_crawl_through_the_proxies(scrapy_env, db, sandbox, store):
    d = add_store(db, store)
    sandbox.faults({"kind": "slow", "store": store["id"], "delay": 3.0})
    env = {**scrapy_env, "CANNASPIDER_LOG_LEVEL": "INFO"}
    crawl = subprocess.Popen(
        [sys.executable, "-m", "scrapy", "crawl", "product_resync", "-a", f"dispensary_id={d}"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while sandbox.requests().get("FilteredProducts", 0) == 0:  # a page is in flight
            assert time.monotonic() < deadline and crawl.poll() is None
            time.sleep(0.1)
        crawl.send_signal(signal.SIGINT)
        _, stderr = crawl.communicate(timeout=30)  # stops (after the page in flight), never hangs
    finally:
        if crawl.poll() is None:
            crawl.kill()
    assert "Received SIGINT, shutting down gracefully" in stderr and "Traceback" not in stderr
    assert crawl.returncode is not None


@pytest.fixture
def own_answer_proxy():
    """A sandbox proxy that answers every request itself (a misbehaving real proxy)."""
    proxy = ForwardProxy(*BAD_AUTH, name="own").start()
    yield proxy
    proxy.stop()


def ordered_crawl(env: dict, *argv: str) -> subprocess.CompletedProcess:
    """`scrapy crawl …` whose pool tries proxies in row-id order (tests/middlewares/ordered_pool_crawl.py)."""
    result = subprocess.run(
        [sys.executable, "-m", "tests.middlewares.ordered_pool_crawl", "crawl", *argv],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=480,  # a bound against a hang: a crawl of many stores takes minutes on a loaded 2-core machine
    )
    assert "Traceback" not in result.stderr, result.stderr[-4000:]
    return result


def resync_in_order(env: dict, ids: list[int], *settings: str) -> subprocess.CompletedProcess:
    """`product_resync` of these stores by ordered_crawl, a failed proxy tried again by the next
    new session (no backoff), with these extra settings."""
    argv = ["product_resync", "-a", f"dispensary_id={','.join(map(str, ids))}", "-s", "STEALTH_PROXY_BACKOFF_S=0"]
    for setting in settings:
        argv += ["-s", setting]
    return ordered_crawl(env, *argv)


@pytest.mark.parametrize(
    "status, body, content_type",
    [
        (403, "Forbidden", "text/plain"),
        (404, "Not Found", "text/plain"),
        (500, "<html><body><h1>500 Internal Server Error</h1></body></html>", "text/html"),
        (502, "<html><head><title>502 Bad Gateway</title></head><body>Bad Gateway</body></html>", "text/html"),
    ],
)
def test_a_proxys_own_error_answer_is_its_failure_and_the_page_comes_through_another(
    scrapy_env, db, sandbox, sandbox_proxy, own_answer_proxy, store, sql, status, body, content_type
):
    """Was: the proxy's plain-text 403 (or its 500/502/404) counted as a success of that proxy,
    and the crawl through it ended incomplete."""
    d = add_store(db, store)
    own_answer_proxy.answer(status, body, content_type)
    sql("UPDATE proxies SET is_active = false WHERE id = %s", (sandbox_proxy,))
    own = register_proxy(db, own_answer_proxy.url, BAD_AUTH)
    good = register_proxy(db, sandbox.urls.proxy, SANDBOX_PROXY_AUTH)  # tried after `own` (row-id order)
    result = ordered_crawl(scrapy_env, "product_resync", "-a", f"dispensary_id={d}")
    assert result.returncode == 0, result.stderr[-3000:]
    assert runs_of(db, d)[-1][0] == "complete"
    rows = proxy_rows(sql)
    active, successes, failures, error = rows[own][:4]
    assert (active, successes, failures) == (True, 0, 1), rows[own]
    assert error.startswith(f"proxy_error: HTTP {status} {content_type}, {len(body)} bytes: not an answer of the API")
    assert rows[good][1] == runs_of(db, d)[-1][6] and rows[good][2] == 0  # every page through the good one
    assert f"proxy_error: HTTP {status} {content_type}" in result.stderr  # the rotation's line says why
    assert "Cloudflare" not in result.stderr  # no block was logged
    assert f"'cannaspider/stealth_proxy_answers/{status}': 1" in result.stderr
    assert sandbox.requests().get("via:own", 0) == 0  # its own answers: nothing reached the API
    assert BAD_AUTH[1] not in result.stderr
