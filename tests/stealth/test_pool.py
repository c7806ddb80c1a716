"""The proxy pool against the real test database: read from the table, health written in batches,
deactivation at STEALTH_PROXY_MAX_FAILURES consecutive failures, re-read while a crawl runs."""

from __future__ import annotations

import asyncio

from cannaspider.db.crawl_store import CrawlStore
from cannaspider.stealth.pool import ProxyPool
from tests.helpers import project_crawler

SETTINGS = {
    "STEALTH_PROXY_REFRESH_S": 3600.0,
    "STEALTH_HEALTH_FLUSH_S": 3600.0,  # flushed by hand here
    "STEALTH_PROXY_MAX_FAILURES": 5,
    "STEALTH_PROXY_BACKOFF_S": 30.0,
    "STEALTH_PROXY_BACKOFF_CAP_S": 600.0,
}


def add(sql, host: str, active: bool = True, failures: int = 0) -> int:
    return sql(
        "INSERT INTO proxies (host, port, username, password, is_active, failure_count) "
        "VALUES (%s, 3128, 'u', 'p', %s, %s) RETURNING id",
        (host, active, failures),
    )[0][0]


def row(sql, pid: int) -> tuple:
    return sql(
        "SELECT is_active, success_count, failure_count, avg_response_time_ms, last_used_at IS NOT NULL, "
        "last_failure_at IS NOT NULL, last_error FROM proxies WHERE id = %s",
        (pid,),
    )[0]


async def with_pool(db: str, scenario):
    crawler = project_crawler(DATABASE_URL=db, **SETTINGS)
    pool = ProxyPool(crawler)
    try:
        return await scenario(pool)
    finally:
        await pool.close()
        await CrawlStore.for_crawler(crawler).close()


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


def test_a_contract_check_writes_no_proxy_health(db, sql, monkeypatch):
    monkeypatch.setenv("SCRAPY_CHECK", "true")  # what `scrapy check` sets while its spiders run
    a = add(sql, "10.0.0.1")

    async def scenario(pool: ProxyPool):
        await pool.refresh()
        pool.record_success(a, 0.1)
        for _ in range(5):
            pool.record_failure(a, "proxy refused")
        await pool.flush()
        return pool.is_active(a)

    assert asyncio.run(with_pool(db, scenario)) is False  # the check itself stops using it…
    assert row(sql, a) == (True, 0, 0, None, False, False, None)  # …but the table is untouched


def test_five_consecutive_failures_deactivate_and_a_success_resets_the_count(db, sql):
    flaky = add(sql, "10.0.0.2", failures=3)  # failed three times in earlier crawls
    healthy = add(sql, "10.0.0.3", failures=4)

    async def scenario(pool: ProxyPool):
        await pool.refresh()
        pool.record_success(healthy, 0.05)  # the streak is over
        pool.record_failure(healthy, "timeout")
        assert pool.record_failure(flaky, "blocked") is False
        deactivated = pool.record_failure(flaky, "blocked")
        await pool.flush()
        return deactivated, [p.id for p in await pool.refresh()], pool.choose()

    deactivated, active, chosen = asyncio.run(with_pool(db, scenario))
    assert deactivated is True and active == [healthy] and chosen is not None and chosen.id == healthy
    assert row(sql, flaky)[0] is False and row(sql, flaky)[2] == 5
    assert row(sql, healthy)[:3] == (True, 1, 1)


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
