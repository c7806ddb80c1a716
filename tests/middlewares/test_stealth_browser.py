"""Browser pages through the proxy pool, end to end: `entry_point_discovery` renders the sandbox's
store websites in real headless Chromium, through the sandbox's forward proxies with credentials.

One crawl (one browser launch) with three proxies tried in row-id order (ordered_pool_crawl.py):
the sandbox's proxy with a wrong password, a proxy whose website pages the sandbox blocks with a
403, and the sandbox's proxy with the right credentials. Every page ends up through the good one,
with a Chrome identity of the real Chromium's version; the two bad ones carry their failures."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys

import pytest

from cannaspider.commands.crawl import EXIT_INCOMPLETE
from cannaspider.settings import CHROMIUM_PATH
from cannaspider.stealth.browser import chrome_brands, sec_ch_ua
from sandbox.forward_proxy import ForwardProxy
from sandbox.socks_proxy import SocksProxy
from sandbox.websites import VISITS
from tests.helpers import ROOT, SANDBOX_PROXY_AUTH, add_store, register_proxy, scrapy_environment

pytestmark = [
    pytest.mark.integration,  # spawns (tests/tiers.py)
    pytest.mark.skipif(
        shutil.which(CHROMIUM_PATH) is None, reason=f"no Chromium at {CHROMIUM_PATH} (./dev setup installs it)"
    ),
]

WRONG_AUTH = (SANDBOX_PROXY_AUTH[0], "not-the-password")
BLOCKED_AUTH = ("other", "s3cret/pw")
PLATFORM_IN_UA = {'"Windows"': "Windows NT", '"macOS"': "Macintosh", '"Linux"': "X11; Linux", '"Android"': "Android"}


@pytest.fixture
def blocked_proxy():
    proxy = ForwardProxy(*BLOCKED_AUTH, name="blocked").start()
    yield proxy
    proxy.stop()


def chromium_major() -> int:
    out = subprocess.run([CHROMIUM_PATH, "--version"], capture_output=True, text=True, timeout=30).stdout
    found = re.search(r"\b(\d+)\.\d+\.\d+\.\d+\b", out)
    assert found, out
    return int(found.group(1))


def run_pages(db, sandbox, tmp_path) -> subprocess.CompletedProcess[str]:
    """`entry_point_discovery` of the AZ stores, proxies tried in row-id order (ordered_pool_crawl.py)."""
    return subprocess.run(
        [sys.executable, "-m", "tests.middlewares.ordered_pool_crawl", "crawl", "entry_point_discovery"]
        + ["-a", "state=AZ", "-s", "LOG_LEVEL=DEBUG", "-s", "STEALTH_HEALTH_FLUSH_S=0.2"],
        env=scrapy_environment(db, sandbox.urls, tmp_path),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
    )


def test_website_pages_rotate_past_a_wrong_password_and_a_403_to_the_good_proxy_as_a_real_chrome(
    db, sandbox, blocked_proxy, sql, tmp_path
):
    sites = {add_store(db, s, resolved=False): s for s in sandbox.stores("AZ") if "/sites/" in s["menu_url"]}
    assert len(sites) == 2
    wrong = register_proxy(db, sandbox.urls.proxy, WRONG_AUTH)
    blocked = register_proxy(db, blocked_proxy.url, BLOCKED_AUTH)
    good = register_proxy(db, sandbox.urls.proxy, SANDBOX_PROXY_AUTH)
    assert wrong < blocked < good  # the order the pages try them in
    sandbox.faults({"kind": "block403", "proxy": "blocked", "operation": "website"})
    visits = sandbox.server.dutchie_app[VISITS]
    visits.clear()

    result = run_pages(db, sandbox, tmp_path)
    log = result.stdout + result.stderr
    assert result.returncode == 0, result.stderr[-4000:]
    assert "Traceback" not in result.stderr, result.stderr[-4000:]

    # every store resolved from its rendered page
    for d, s in sites.items():
        assert sql("SELECT platform_dispensary_id, resolution_error FROM dispensaries WHERE id = %s", (d,)) == [
            (s["id"], None)
        ]
    # the failures are on the bad proxies, as for HTTP requests; the successes on the good one
    rows = {r[0]: r[1:] for r in sql("SELECT id, success_count, failure_count, last_error FROM proxies")}
    assert rows[wrong][0] == 0 and rows[wrong][1] >= 1 and "HTTP 407" in rows[wrong][2]
    assert rows[blocked][0] == 0 and rows[blocked][1] >= 1 and "Cloudflare block page" in rows[blocked][2]
    assert rows[good][0] >= len(sites) and rows[good][1] == 0
    # the site saw the pages come through the proxies (stamped by them), never directly
    counts = sandbox.requests()
    assert counts.get("website via:sandbox") == len(sites)  # one good visit per store
    assert counts.get("website via:blocked", 0) >= 1
    assert "website via:-" not in counts and "website incoherent_identity" not in counts
    # …each from a Chrome of the real Chromium's version, with its client hints
    major = chromium_major()
    good_visits = [v for v in visits if v["via"] == "sandbox"]
    assert len(good_visits) == len(sites)
    for visit in good_visits:
        ua = visit["user-agent"]
        assert f"Chrome/{major}.0.0.0 " in ua and "Headless" not in ua, ua
        assert visit["sec-ch-ua"] == sec_ch_ua(chrome_brands(major))
        assert visit["sec-ch-ua-mobile"] == ("?1" if " Mobile " in ua else "?0")
        assert PLATFORM_IN_UA[visit["sec-ch-ua-platform"]] in ua
        assert visit["accept-language"] == "en-US,en;q=0.9"
    # the spider's GraphQL lookups (a slug read from a page's iframe) keep their TLS impersonation
    # beside the browser (stealth/browser_pages.py)
    lookups = counts.get("ConsumerDispensaries", 0)
    assert re.search(rf"'cannaspider/tls_impersonated': {lookups}\b", log), (lookups, counts)
    # a browser context per proxy, named by its row id: credentials appear nowhere in the log
    assert re.search(rf"Browser context started: 'stealth-proxy{good}-[0-9a-f]{{10}}'", log)
    for secret in (WRONG_AUTH[1], BLOCKED_AUTH[1], SANDBOX_PROXY_AUTH[1], "pa55%40w0rd", "s3cret%2Fpw"):
        assert secret not in log


def test_pages_go_through_a_socks5_proxy_and_never_one_with_a_password_chromium_cannot_use(db, sandbox, sql, tmp_path):
    """Chromium does SOCKS5 without a password (the pages through the sandbox's SOCKS proxy, as
    a real Chrome), not with one (Playwright refuses the context): such a proxy, first in row-id
    order, is passed over for pages without a failure recorded; with only it in the pool, each
    page fails with the reason and the crawl ends, its stores' units incomplete (exit 3, as for a
    drained task: docs/architecture.md, "One start path")."""
    sites = {add_store(db, s, resolved=False): s for s in sandbox.stores("AZ") if "/sites/" in s["menu_url"]}
    with_password = SocksProxy("scout", "pa:ss@w0rd").start()
    open_socks = SocksProxy().start()
    try:
        locked = register_proxy(db, f"socks5h://{with_password.host_port}", ("scout", "pa:ss@w0rd"))
        usable = register_proxy(db, f"socks5://{open_socks.host_port}", None)
        assert locked < usable  # the one Chromium cannot use would be tried first
        result = run_pages(db, sandbox, tmp_path)
        log = result.stdout + result.stderr
        assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr[-4000:]
        for d, s in sites.items():
            assert sql("SELECT platform_dispensary_id, resolution_error FROM dispensaries WHERE id = %s", (d,)) == [
                (s["id"], None)
            ]
        # every page through the open SOCKS proxy, none through the one with a password
        assert open_socks.stats["connect"] >= len(sites) and open_socks.stats["broken"] == 0
        assert sandbox.requests().get("website via:-") == len(sites)  # not through the http proxy
        assert with_password.stats["auth_failed"] == 0
        rows = {r[0]: r[1:] for r in sql("SELECT id, success_count, failure_count, last_error FROM proxies")}
        assert rows[locked][1:] == (0, None) and rows[usable][0] >= len(sites) and rows[usable][1] == 0
        assert "socks5 proxy authentication" not in log  # Playwright's refusal never reached

        # only the proxy Chromium cannot use: each page fails with the reason, the proxy unblamed
        sql("UPDATE proxies SET is_active = false WHERE id = %s", (usable,))
        sql("UPDATE dispensaries SET resolution_error = NULL, platform_dispensary_id = NULL")
        sandbox.reset()
        result = run_pages(db, sandbox, tmp_path)
        log = result.stdout + result.stderr
    finally:
        with_password.stop()
        open_socks.stop()
    assert result.returncode == EXIT_INCOMPLETE and "Traceback" not in result.stderr, result.stderr[-4000:]
    assert f"error: {len(sites)} unit(s) of work incomplete" in result.stderr
    why = "no proxy of the pool can carry a browser page: Chromium does not support socks5 proxies with a password"
    errors = [r[0] for r in sql("SELECT resolution_error FROM dispensaries ORDER BY id")]
    assert len(errors) == len(sites) and all(why in (e or "") for e in errors), errors
    assert log.count(why) >= 1 and "WARNING" in log.split(why)[0].rsplit("\n", 1)[-1]
    assert sql("SELECT failure_count, is_active FROM proxies WHERE id = %s", (locked,)) == [(0, True)]
    assert "website via:-" not in sandbox.requests()
    assert "pa:ss@w0rd" not in log and "pa%3Ass" not in log
