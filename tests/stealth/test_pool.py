"""The proxy pool against the real test database: read from the table, health written in batches,
deactivation at STEALTH_PROXY_MAX_FAILURES failures among the last STEALTH_PROXY_ATTEMPT_WINDOW
attempts, re-read while a crawl runs."""

from __future__ import annotations

import asyncio
import time

from cannaspider.db.crawl_database import CrawlDatabase
from cannaspider.stealth.pool import ProxyPool, ProxyPools
from cannaspider.stealth.proxies import CRAWL_POOL
from tests.helpers import project_crawler

SETTINGS = {
    "STEALTH_PROXY_REFRESH_S": 3600.0,
    "STEALTH_HEALTH_FLUSH_S": 3600.0,  # flushed by hand here
    "STEALTH_PROXY_MAX_FAILURES": 5,
    "STEALTH_PROXY_ATTEMPT_WINDOW": 20,
    "STEALTH_PROXY_BACKOFF_S": 30.0,
    "STEALTH_PROXY_BACKOFF_CAP_S": 600.0,
    "STEALTH_FAILURE_WINDOW_S": 0.0,  # each failure an event of its own (the window: tests below)
    "PROXY_REPROBE_AFTER_S": 300.0,
}


def add(sql, host: str, active: bool = True, failures: int = 0, recent: str = "") -> int:
    return sql(
        "INSERT INTO proxies (host, port, username, password, is_active, failure_count, recent_attempts) "
        "VALUES (%s, 3128, 'u', 'p', %s, %s, %s) RETURNING id",
        (host, active, failures, recent),
    )[0][0]


def recent(sql, pid: int) -> str:
    return sql("SELECT recent_attempts FROM proxies WHERE id = %s", (pid,))[0][0]


def row(sql, pid: int) -> tuple:
    return sql(
        "SELECT is_active, success_count, failure_count, avg_response_time_ms, last_used_at IS NOT NULL, "
        "last_failure_at IS NOT NULL, last_error FROM proxies WHERE id = %s",
        (pid,),
    )[0]


async def with_pool(db: str, scenario, **settings):
    crawler = project_crawler(DATABASE_URL=db, **{**SETTINGS, **settings})
    pool = ProxyPool(crawler)
    try:
        return await scenario(pool)
    finally:
        await pool.close()
        await CrawlDatabase.for_crawler(crawler).close()


def test_health_is_written_in_batches_not_per_request(db, sql):
    a = add(sql, "10.0.0.1")

    async def scenario(pool: ProxyPool):
        await pool.refresh()
        for ms in (100, 200, 300):
            pool.record_success(a, ms / 1000)
        pool.record_failure(a, "blocked: HTTP 403")
        before = row(sql, a)
        await pool.flush()
        return before

    before = asyncio.run(with_pool(db, scenario))
    assert before == (True, 0, 0, None, False, False, None)  # nothing written before the batch
    assert row(sql, a) == (True, 3, 1, 200, True, True, "blocked: HTTP 403")


def test_a_contract_check_writes_no_proxy_health(db, sql):
    a = add(sql, "10.0.0.1")

    async def scenario(pool: ProxyPool):
        await pool.refresh()
        pool.record_success(a, 0.1)
        for _ in range(5):
            pool.record_failure(a, "proxy refused")
        await pool.flush()
        return pool.is_active(a)

    # CONTRACT_MODE: what `scrapy check` sets (the ContractMode add-on, tests/test_contracts.py)
    assert asyncio.run(with_pool(db, scenario, CONTRACT_MODE=True)) is False  # the check itself stops using it…
    assert row(sql, a) == (True, 0, 0, None, False, False, None)  # …but the table is untouched


def test_five_failures_of_the_last_twenty_attempts_deactivate_and_a_success_erases_nothing(db, sql):
    """Earlier crawls' attempts are in the table's window: three failures there, then two more
    here, a success between them, deactivate the proxy. Its counts stay lifetime counts."""
    flaky = add(sql, "10.0.0.2", failures=40, recent="SSFSSSFSF")  # 40 failures in its life, 3 recent
    steady = add(sql, "10.0.0.3", failures=90, recent="F" * 4 + "S" * 16)  # 4 failures, 16 attempts ago

    async def scenario(pool: ProxyPool):
        await pool.refresh()
        assert pool.record_failure(flaky, "blocked") is False
        pool.record_success(flaky, 0.05)  # no longer erases the failures before it
        deactivated = pool.record_failure(flaky, "blocked")
        pool.record_success(steady, 0.05)
        steady_kept = pool.record_failure(steady, "timeout")  # the oldest two failures left the window
        await pool.flush()
        return deactivated, steady_kept, [p.id for p in await pool.refresh()], pool.choose()

    deactivated, steady_kept, active, chosen = asyncio.run(with_pool(db, scenario))
    assert deactivated is True and steady_kept is False
    assert active == [steady] and chosen is not None and chosen.id == steady
    assert row(sql, flaky)[:3] == (False, 1, 42)  # lifetime: 40 + 2 failures, the success counted
    assert recent(sql, flaky) == "SSFSSSFSFFSF" and recent(sql, steady) == "FF" + "S" * 16 + "SF"
    assert row(sql, steady)[:3] == (True, 1, 91)


def test_a_proxy_failing_one_request_in_three_is_deactivated(db, sql):
    """The defect of a count that a success reset: failures spread among successes never reached
    five in a row. Under load (the failure window of 5 s) each failure after a success is an event
    of its own, so the proxy is out within its first twenty attempts."""
    a = add(sql, "10.0.0.11")

    async def scenario(pool: ProxyPool):
        await pool.refresh()
        outcomes = []
        for n in range(30):
            if n % 3 == 2:
                outcomes.append(pool.record_failure(a, f"timeout {n}", sent_at=time.monotonic()))
            else:
                pool.record_success(a, 0.05)
            if not pool.is_active(a):
                break
        await pool.flush()
        return n + 1, outcomes

    attempts, outcomes = asyncio.run(with_pool(db, scenario, STEALTH_FAILURE_WINDOW_S=5.0))
    assert outcomes == [False] * 4 + [True] and attempts == 15
    assert row(sql, a)[:3] == (False, 10, 5) and recent(sql, a) == "SSF" * 5


def test_the_table_is_re_read_proxies_added_and_disabled_take_effect(db, sql):
    a = add(sql, "10.0.0.4")

    async def scenario(pool: ProxyPool):
        first = [p.id for p in await pool.refresh()]
        b = add(sql, "10.0.0.5")
        sql("UPDATE proxies SET is_active = false WHERE id = %s", (a,))
        second = [p.id for p in await pool.refresh()]
        return first, second, b, {pool.choose().id for _ in range(20)}

    first, second, b, chosen = asyncio.run(with_pool(db, scenario))
    assert first == [a] and second == [b] and chosen == {b}


def test_a_failed_proxy_is_avoided_while_another_is_fresh(db, sql):
    a, b = add(sql, "10.0.0.6"), add(sql, "10.0.0.7")

    async def scenario(pool: ProxyPool):
        await pool.refresh()
        pool.record_failure(a, "refused")  # backing off (up to 30 s)
        after_failure = {pool.choose().id for _ in range(20)}
        pool.record_failure(b, "refused")  # every proxy resting: still one is used, never a hang
        return after_failure, pool.choose(avoid={b})

    after_failure, resting = asyncio.run(with_pool(db, scenario))
    assert after_failure == {b} and resting is not None and resting.id == a


def test_concurrent_failures_of_one_moment_are_one_event(db, sql):
    """A sub-second blip: sixteen requests in flight fail at once. One failure, not sixteen; the
    proxy keeps its place in the pool (the old count deactivated it at the fifth)."""
    a = add(sql, "10.0.0.8")

    async def scenario(pool: ProxyPool):
        await pool.refresh()
        for _ in range(12):
            pool.record_success(a, 0.05)
        sent = time.monotonic()
        deactivated = [pool.record_failure(a, f"timeout {n}", sent_at=sent) for n in range(16)]
        await pool.flush()
        return deactivated, pool.is_active(a)

    deactivated, active = asyncio.run(with_pool(db, scenario, STEALTH_FAILURE_WINDOW_S=5.0))
    assert deactivated == [False] * 16 and active
    assert row(sql, a)[:3] == (True, 12, 1) and row(sql, a)[6] == "timeout 15"  # the last error is kept


def test_a_request_in_flight_when_the_event_began_joins_it_even_after_the_window(db, sql):
    a = add(sql, "10.0.0.9")

    async def scenario(pool: ProxyPool):
        await pool.refresh()
        sent_before = time.monotonic()  # a slow request, sent before the proxy's first failure
        await asyncio.sleep(0.01)
        pool.record_failure(a, "refused", sent_at=time.monotonic())
        await asyncio.sleep(0.3)  # past the window
        late = pool.record_failure(a, "timeout", sent_at=sent_before)
        fresh = pool.record_failure(a, "refused", sent_at=time.monotonic())  # sent after: a new event
        await pool.flush()
        return late, fresh

    late, fresh = asyncio.run(with_pool(db, scenario, STEALTH_FAILURE_WINDOW_S=0.2))
    assert (late, fresh) == (False, False)
    assert row(sql, a)[2] == 2  # two events: the first and the fresh one


def test_failures_in_a_row_past_the_window_still_deactivate_after_five(db, sql):
    """The seed's rule for real failures: five events in a row deactivate the proxy, in the table
    too, with its first re-probe scheduled (it was deactivated by failures, not by an operator)."""
    a = add(sql, "10.0.0.10")

    async def scenario(pool: ProxyPool):
        await pool.refresh()
        results = []
        for n in range(5):
            if n:
                await asyncio.sleep(0.06)
            results.append(pool.record_failure(a, f"refused {n}", sent_at=time.monotonic()))
        await pool.flush()
        return results, pool.is_active(a)

    results, active = asyncio.run(with_pool(db, scenario, STEALTH_FAILURE_WINDOW_S=0.05))
    assert results == [False] * 4 + [True] and not active
    (state,) = sql(
        "SELECT is_active, failure_count, deactivated_at IS NOT NULL, next_probe_at - deactivated_at, probe_failures "
        "FROM proxies WHERE id = %s",
        (a,),
    )
    assert state[:3] == (False, 5, True) and state[3].total_seconds() == 300 and state[4] == 0


def test_one_pool_per_crawler_and_nothing_set_on_the_crawler():
    crawler = project_crawler()
    attributes = set(vars(crawler))
    pool = ProxyPool.for_crawler(crawler)
    assert ProxyPool.for_crawler(crawler) is pool
    assert ProxyPool.for_crawler(project_crawler()) is not pool
    assert set(vars(crawler)) == attributes  # the pool is kept beside the crawler (Scrapy's object)


def test_the_pools_are_an_extension_declared_in_settings():
    crawler = project_crawler()
    pools = crawler.get_extension(ProxyPools)
    assert pools is not None  # enabled in EXTENSIONS, built with the crawler's other extensions
    crawl = ProxyPool.for_crawler(crawler)
    images = ProxyPool.for_crawler(crawler, "images")
    assert pools.pools == {CRAWL_POOL: crawl, "images": images} and crawl is not images
    assert (crawl.name, images.name) == (CRAWL_POOL, "images")
