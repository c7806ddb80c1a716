"""`scrapy proxies`: add, import, list, check (through the real download path), enable, disable."""

from __future__ import annotations

import pytest

from sandbox.forward_proxy import ForwardProxy
from sandbox.socks_proxy import SocksProxy
from tests.helpers import SANDBOX_PROXY_AUTH, run_scrapy

pytestmark = pytest.mark.integration  # spawns (tests/tiers.py)


def test_add_list_disable_enable_and_passwords_are_never_printed(scrapy_env, sql):
    added = run_scrapy("proxies", "add", "http://alice:t0p%40secret@10.1.2.3:3128", "10.1.2.4:8080", env=scrapy_env)
    assert added.returncode == 0, added.stderr
    assert "added #2 http://alice:***@10.1.2.3:3128" in added.stdout and "added #3 http://10.1.2.4:8080" in added.stdout
    assert sql("SELECT username, password FROM proxies WHERE id = 2") == [("alice", "t0p@secret")]
    listed = run_scrapy("proxies", "list", env=scrapy_env)
    assert "http://alice:***@10.1.2.3:3128" in listed.stdout and "http://scout:***@127.0.0.1" in listed.stdout
    assert "secret" not in listed.stdout + listed.stderr and SANDBOX_PROXY_AUTH[1] not in listed.stdout
    assert run_scrapy("proxies", "disable", "2", env=scrapy_env).stdout.strip() == "#2 disabled"
    assert sql("SELECT is_active FROM proxies WHERE id = 2") == [(False,)]
    sql("UPDATE proxies SET failure_count = 7, recent_attempts = 'SFFSFF' WHERE id = 2")
    assert "  7     4/6  " in run_scrapy("proxies", "list", env=scrapy_env).stdout  # lifetime, then recent
    assert run_scrapy("proxies", "enable", "2", env=scrapy_env).returncode == 0
    # a fresh start: an empty window of recent attempts; the lifetime count stays
    assert sql("SELECT is_active, failure_count, recent_attempts FROM proxies WHERE id = 2") == [(True, 7, "")]


def test_socks4_and_bad_input_are_refused_with_one_line(scrapy_env, sql):
    result = run_scrapy("proxies", "add", "socks4://bob:hunter2@10.0.0.9:1080", env=scrapy_env)
    assert result.returncode == 2 and result.stderr.strip().count("\n") == 0
    assert "socks4 proxies are not supported" in result.stderr and "hunter2" not in result.stderr
    assert run_scrapy("proxies", "enable", "999", env=scrapy_env).returncode == 2
    assert sql("SELECT count(*) FROM proxies") == [(1,)]  # only the sandbox's


def test_import_adds_the_good_lines_and_names_the_bad_ones(scrapy_env, sql, tmp_path):
    listing = tmp_path / "proxies.txt"
    listing.write_text(
        "# pool\nhttp://u1:p1@10.0.0.1:3128\nsocks4://u2:p2@10.0.0.2:1080\n10.0.0.3:8080\nsocks5h://u4:p4@10.0.0.4:1080\n"
    )
    result = run_scrapy("proxies", "import", str(listing), env=scrapy_env)
    assert result.returncode == 2
    assert "line 3: socks4://10.0.0.2: socks4 proxies are not supported" in result.stderr
    assert "p2" not in result.stderr and "p4" not in result.stdout + result.stderr
    assert sql("SELECT protocol, host FROM proxies ORDER BY id") == [
        ("http", "127.0.0.1"),
        ("http", "10.0.0.1"),
        ("http", "10.0.0.3"),
        ("socks5h", "10.0.0.4"),
    ]


def test_check_goes_through_each_proxy_and_records_its_health(scrapy_env, sandbox, sandbox_proxy, sql):
    blocked = ForwardProxy(name="blocked").start()
    try:
        run_scrapy("proxies", "add", blocked.url, env=scrapy_env)
        sandbox.faults({"kind": "block403", "proxy": "blocked"})
        result = run_scrapy("proxies", "check", env=scrapy_env)
    finally:
        blocked.stop()
    lines = result.stdout.splitlines()
    assert result.returncode == 1  # one proxy failed its check
    assert any(line.startswith(f"#{sandbox_proxy} http://scout:***@") and ": ok (" in line for line in lines), lines
    assert any(": failed: ProxyBlocked: blocked: HTTP 403" in line for line in lines), lines
    assert sql("SELECT success_count, failure_count FROM proxies ORDER BY id") == [(1, 0), (0, 1)]
    assert SANDBOX_PROXY_AUTH[1] not in result.stdout + result.stderr


def test_check_of_an_inactive_proxy_records_it_and_leaves_it_inactive(scrapy_env, sandbox, sandbox_proxy, sql):
    blocked = ForwardProxy(name="blocked").start()
    try:
        run_scrapy("proxies", "add", blocked.url, env=scrapy_env)
        sandbox.faults({"kind": "block403", "proxy": "blocked"})
        assert run_scrapy("proxies", "disable", str(sandbox_proxy), "2", env=scrapy_env).returncode == 0
        result = run_scrapy("proxies", "check", str(sandbox_proxy), "2", env=scrapy_env)
    finally:
        blocked.stop()
    assert result.returncode == 1, result.stdout + result.stderr[-2000:]  # the blocked one failed
    rows = sql(
        "SELECT is_active, success_count, failure_count, last_used_at IS NOT NULL, avg_response_time_ms IS NOT NULL, "
        "last_error FROM proxies ORDER BY id"
    )
    assert rows[0] == (False, 1, 0, True, True, None)
    assert rows[1][:4] == (False, 0, 1, True) and rows[1][5].startswith("ProxyBlocked: blocked: HTTP 403"), rows


def test_socks5_proxies_are_added_and_checked_through_a_socks_proxy(scrapy_env, sandbox, sandbox_proxy, sql):
    """Was: socks5 refused at `add`. Now the crawl's own download path (curl_cffi) goes through a
    SOCKS5 proxy with a password (RFC 1929), a `:` in it included; a wrong one is that proxy's
    recorded failure, never printed."""
    socks = SocksProxy("scout", "pa:ss@w0rd/x").start()
    try:
        hp = socks.host_port
        added = run_scrapy("proxies", "add", f"socks5h://scout:pa%3Ass%40w0rd%2Fx@{hp}", env=scrapy_env)
        assert added.returncode == 0, added.stderr
        assert f"added #{sandbox_proxy + 1} socks5h://scout:***@{hp}" in added.stdout
        assert run_scrapy("proxies", "add", f"socks5://scout:wrong@{hp}", env=scrapy_env).returncode == 0
        result = run_scrapy("proxies", "check", env=scrapy_env)
    finally:
        socks.stop()
    out = result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert result.returncode == 1, out[-3000:]  # the wrong password failed
    assert any(line.startswith(f"#{sandbox_proxy + 1} socks5h://scout:***@") and ": ok (" in line for line in lines)
    assert any(
        line.startswith(f"#{sandbox_proxy + 2} socks5://scout:***@") and "rejected by the SOCKS5 server" in line
        for line in lines
    ), lines
    assert socks.stats["auth_ok"] == 1 and socks.stats["auth_failed"] == 1 and socks.stats["connect"] == 1
    seen = sandbox.requests()
    assert seen["ConsumerDispensaries"] == 2 and seen["via:sandbox"] == 1  # the other one through SOCKS
    rows = sql("SELECT protocol, success_count, failure_count, last_error FROM proxies ORDER BY id")
    assert rows[1][:3] == ("socks5h", 1, 0) and rows[2][:3] == ("socks5", 0, 1) and rows[2][3]
    for secret in ("pa:ss@w0rd/x", "pa%3Ass", "wrong", SANDBOX_PROXY_AUTH[1]):
        assert secret not in out and secret not in rows[2][3]
