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

from cannaspider.settings import CHROMIUM_PATH
from cannaspider.stealth.browser import chrome_brands, sec_ch_ua
from sandbox.forward_proxy import ForwardProxy
from sandbox.websites import VISITS
from tests.helpers import ROOT, SANDBOX_PROXY_AUTH, add_store, register_proxy, scrapy_environment

pytestmark = pytest.mark.skipif(
    shutil.which(CHROMIUM_PATH) is None, reason=f"no Chromium at {CHROMIUM_PATH} (./dev setup installs it)"
)

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

    result = subprocess.run(
        [sys.executable, "-m", "tests.middlewares.ordered_pool_crawl", "crawl", "entry_point_discovery"]
        + ["-a", "state=AZ", "-s", "LOG_LEVEL=DEBUG", "-s", "STEALTH_HEALTH_FLUSH_S=0.2"],
        env=scrapy_environment(db, sandbox.urls, tmp_path),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
    )
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
    # beside the browser (stealth/browser_handler.py)
    lookups = counts.get("ConsumerDispensaries", 0)
    assert re.search(rf"'cannaspider/tls_impersonated': {lookups}\b", log), (lookups, counts)
    # a browser context per proxy, named by its row id: credentials appear nowhere in the log
    assert re.search(rf"Browser context started: 'stealth-proxy{good}-[0-9a-f]{{10}}'", log)
    for secret in (WRONG_AUTH[1], BLOCKED_AUTH[1], SANDBOX_PROXY_AUTH[1], "pa55%40w0rd", "s3cret%2Fpw"):
        assert secret not in log
