"""Re-probing deactivated proxies from `scrapy schedule` (cannaspider/stealth/probe.py,
cannaspider/tasks/schedule.py): through the proxy to the sandbox's GraphQL API, a pass makes the
proxy active again, a failure schedules the next probe later; operators' decisions stand."""

from __future__ import annotations

import pytest

from sandbox.forward_proxy import ForwardProxy
from sandbox.socks_proxy import SocksProxy
from tests.helpers import SANDBOX_PROXY_AUTH, register_proxy, run_scrapy

pytestmark = pytest.mark.integration  # spawns (tests/tiers.py)

BAD_AUTH = ("other", "s3cret/pw")
DEACTIVATED = (
    "UPDATE proxies SET is_active = false, failure_count = 5, recent_attempts = 'SFFFFF', "
    "deactivated_at = now() - interval '10 minutes', "
    "next_probe_at = now() + %s * interval '1 second', last_error = 'blocked: HTTP 403' WHERE id = %s"
)


@pytest.fixture
def own_answer_proxy():
    proxy = ForwardProxy(*BAD_AUTH, name="own").start()
    proxy.answer(403, "Forbidden")
    yield proxy
    proxy.stop()


def state(sql, pid: int) -> tuple:
    return sql(
        "SELECT is_active, failure_count, deactivated_at IS NOT NULL, probe_failures, "
        "round(extract(epoch FROM next_probe_at - now())), last_error, success_count, recent_attempts "
        "FROM proxies WHERE id = %s",
        (pid,),
    )[0]


def test_the_schedule_re_probes_due_proxies_and_a_healthy_one_is_active_again(
    scrapy_env, db, sandbox, sandbox_proxy, own_answer_proxy, sql
):
    """Was: a deactivated proxy stayed out of the pool until an operator ran `proxies enable`."""
    healed = sandbox_proxy  # deactivated by a blip, healthy again
    still_bad = register_proxy(db, own_answer_proxy.url, BAD_AUTH)
    not_due = register_proxy(db, sandbox.urls.proxy, SANDBOX_PROXY_AUTH)
    disabled = register_proxy(db, sandbox.urls.proxy, SANDBOX_PROXY_AUTH)
    for pid, due_in in ((healed, -60), (still_bad, -60), (not_due, 3600)):
        sql(DEACTIVATED, (due_in, pid))
    sql("UPDATE proxies SET is_active = false WHERE id = %s", (disabled,))  # `proxies disable`: no re-probe
    untouched = "SELECT * FROM proxies WHERE id IN (%s, %s) ORDER BY id"
    before = sql(untouched, (not_due, disabled))

    result = run_scrapy("schedule", "--once", env=scrapy_env)
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout + result.stderr
    # active again with a fresh window of recent attempts; its lifetime failures stay counted
    assert state(sql, healed) == (True, 5, False, 0, None, "blocked: HTTP 403", 1, "")
    active, failures, deactivated, probes, next_in, error, successes, recent = state(sql, still_bad)
    assert (active, failures, deactivated, probes, successes, recent) == (False, 5, True, 1, 0, "SFFFFF")
    assert 500 <= next_in <= 600  # PROXY_REPROBE_AFTER_S (300) · 2^1 from the probe (a loaded machine: slow)
    assert error == "re-probe: proxy_error: HTTP 403 text/plain, 9 bytes: not an answer of the API"
    assert sql(untouched, (not_due, disabled)) == before
    seen = sandbox.requests()
    assert seen["ConsumerDispensaries"] == 1 and seen["via:sandbox"] == 1  # through the proxy, to the API
    assert "incoherent_identity" not in seen  # a real browser identity
    assert f"proxy #{healed} http://scout:***@127.0.0.1:" in out and "re-probe passed" in out
    assert f"proxy #{still_bad} http://other:***@127.0.0.1:" in out and "re-probe failed: proxy_error" in out
    assert SANDBOX_PROXY_AUTH[1] not in out and BAD_AUTH[1] not in out

    # the next tick: nothing due (the failed one waits its backoff), nothing sent
    again = run_scrapy("schedule", "--once", env=scrapy_env)
    assert again.returncode == 0 and "re-probe" not in again.stdout
    assert sandbox.requests()["ConsumerDispensaries"] == 1


def test_a_dead_proxy_fails_its_re_probe_with_a_masked_reason(scrapy_env, db, sandbox, sql):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dead = register_proxy(db, f"http://127.0.0.1:{port}", BAD_AUTH)
    sql(DEACTIVATED, (-1, dead))
    result = run_scrapy("schedule", "--once", "-s", "PROXY_PROBE_TIMEOUT_S=5", env=scrapy_env)
    assert result.returncode == 0, result.stderr[-3000:]
    active, _, _, probes, _, error, _, _ = state(sql, dead)
    assert (active, probes) == (False, 1) and error.startswith("re-probe: ") and "Refused" in error
    assert BAD_AUTH[1] not in result.stdout + result.stderr + error


def test_a_socks5_proxy_is_re_probed_through_socks(scrapy_env, db, sandbox, sql):
    socks = SocksProxy("scout", "pa:ss@w0rd").start()
    try:
        pid = register_proxy(db, f"socks5h://{socks.host_port}", ("scout", "pa:ss@w0rd"))
        sql(DEACTIVATED, (-1, pid))
        result = run_scrapy("schedule", "--once", env=scrapy_env)
    finally:
        socks.stop()
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"proxy #{pid} socks5h://scout:***@{socks.host_port}: re-probe passed" in result.stdout
    assert state(sql, pid)[:4] == (True, 5, False, 0) and socks.stats["auth_ok"] == 1
    assert sandbox.requests()["ConsumerDispensaries"] == 1 and "pa:ss" not in result.stdout + result.stderr
