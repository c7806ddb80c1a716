"""The sandbox's store websites, over real HTTP on loopback: what a Cloudflare-fronted store site
refuses (headless or incoherent browsers, a blocked proxy) and what it records of each visit."""

from __future__ import annotations

import pytest

from sandbox.websites import VISITS
from tests.httpclient import http

pytestmark = pytest.mark.integration  # spawns (tests/tiers.py)

CHROME = (
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/156.0.0.0 Safari/537.36"
)
HINTS = {
    "sec-ch-ua": '"Not:A-Brand";v="8", "Chromium";v="156", "Google Chrome";v="156"',
    "sec-ch-ua-mobile": "?0",
    "sec-ch-ua-platform": '"Windows"',
}


@pytest.fixture
def site(sandbox) -> str:
    store = next(s for s in sandbox.stores("AZ") if "/sites/" in s["menu_url"])
    sandbox.server.dutchie_app[VISITS].clear()
    return store["menu_url"]


def test_a_coherent_chrome_gets_the_page_and_the_visit_is_recorded(sandbox, site):
    reply = http("GET", site, headers={"user-agent": CHROME, **HINTS, "x-sandbox-proxy": "p1"})
    assert reply.status == 200 and b"dutchie--embed" in reply.body
    (visit,) = sandbox.server.dutchie_app[VISITS]
    assert visit["via"] == "p1" and visit["user-agent"] == CHROME and visit["sec-ch-ua"] == HINTS["sec-ch-ua"]
    assert sandbox.requests()["website via:p1"] == 1


@pytest.mark.parametrize(
    "headers",
    [
        {"user-agent": CHROME.replace("Chrome/", "HeadlessChrome/"), **HINTS},  # headless, even with hints
        {"user-agent": CHROME},  # a Chrome without client hints
        {"user-agent": CHROME, **HINTS, "sec-ch-ua": '"Chromium";v="120", "Google Chrome";v="120"'},  # other version
        {"user-agent": CHROME.replace("Safari/537.36", "Mobile Safari/537.36"), **HINTS},  # mobile UA, ?0
    ],
    ids=["headless", "no-hints", "version", "mobile"],
)
def test_a_headless_or_incoherent_browser_gets_the_block_page(sandbox, site, headers):
    reply = http("GET", site, headers=headers)
    assert reply.status == 403 and b"Sorry, you have been blocked" in reply.body
    assert sandbox.requests()["website incoherent_identity"] == 1


def test_website_faults_hit_one_proxy_and_not_another(sandbox, site):
    sandbox.faults(
        {"kind": "block403", "proxy": "bad", "operation": "website"},
        {"kind": "challenge503", "proxy": "slow", "operation": "website"},
    )
    chrome = {"user-agent": CHROME, **HINTS}
    assert http("GET", site, headers={**chrome, "x-sandbox-proxy": "bad"}).status == 403
    challenge = http("GET", site, headers={**chrome, "x-sandbox-proxy": "slow"})
    assert challenge.status == 503 and b"Just a moment" in challenge.body
    assert http("GET", site, headers={**chrome, "x-sandbox-proxy": "good"}).status == 200
