"""Browser pages' identities and contexts (cannaspider/stealth/browser.py): Chrome of the launched
Chromium's version, Chrome's own formats (reduced User-Agent, GREASE brand list), coherent with what
the HTTP side checks; contexts named without credentials, the identity applied to each page over
CDP, idle contexts nobody uses closed (the real browser: tests/middlewares/test_stealth_browser.py).
"""

from __future__ import annotations

import asyncio
import random
import shutil
import subprocess
from collections import Counter

import pytest
from scrapy import Request

from cannaspider.settings import CHROMIUM_PATH
from cannaspider.stealth import browser as ctx
from cannaspider.stealth.browser import (
    IDENTITY_META,
    VERSION_META,
    BrowserContexts,
    BrowserIdentityFactory,
    chrome_brands,
    chromium_version,
    context_name,
    parse_version,
    proxy_settings,
    sec_ch_ua,
)
from cannaspider.stealth.identity import IdentityError, coherence_problems
from cannaspider.stealth.proxies import ProxyRecord

VERSION = "156.0.8078.114"


@pytest.mark.parametrize(
    ("major", "expected"),
    [  # what real Chrome sends (120, 124, 131: captured from Chrome; 156: this Chromium's own list + Chrome)
        (120, '"Not_A Brand";v="8", "Chromium";v="120", "Google Chrome";v="120"'),
        (124, '"Chromium";v="124", "Google Chrome";v="124", "Not-A.Brand";v="99"'),
        (131, '"Google Chrome";v="131", "Chromium";v="131", "Not_A Brand";v="24"'),
        (156, '"Not:A-Brand";v="8", "Chromium";v="156", "Google Chrome";v="156"'),
    ],
)
def test_the_brand_list_is_chromes_grease_for_that_version(major, expected):
    assert sec_ch_ua(chrome_brands(major)) == expected


def test_full_version_list_names_the_real_full_version():
    assert chrome_brands(156, VERSION) == [
        ("Not:A-Brand", "8.0.0.0"),
        ("Chromium", VERSION),
        ("Google Chrome", VERSION),
    ]


def test_every_identity_is_a_coherent_chrome_of_the_browsers_version():
    factory = BrowserIdentityFactory(f"Chromium {VERSION} built on Debian", random.Random(7))
    devices: Counter[str] = Counter()
    for _ in range(3_000):
        who = factory.draw("AZ", "America/Phoenix")
        devices[who.device] += 1
        as_http = who.identity()
        assert coherence_problems(as_http) == [], who  # the HTTP side's own check
        assert "Chrome/156.0.0.0 " in who.user_agent and "Headless" not in who.user_agent
        assert ("Mobile Safari/" in who.user_agent) == (who.device == "mobile")
        hints = who.client_hints()
        assert hints["sec-ch-ua"] == '"Not:A-Brand";v="8", "Chromium";v="156", "Google Chrome";v="156"'
        override = who.user_agent_override()
        assert override["userAgent"] == who.user_agent
        assert override["userAgentMetadata"]["mobile"] == (who.device == "mobile")
        assert f'"{override["userAgentMetadata"]["platform"]}"' == hints["sec-ch-ua-platform"]
        kwargs = who.context_kwargs(ProxyRecord(1, "http", "127.0.0.1", 8080))
        assert kwargs["is_mobile"] == (who.device == "mobile")
        assert kwargs["viewport"]["width"] <= kwargs["screen"]["width"]
        assert who.timezone == "America/Phoenix" and who.accept_language == "en-US,en;q=0.9"
        if who.device != "desktop":
            assert who.os == "android"  # no Safari, no iOS: the engine is Chromium
    shares = {k: 100 * v / 3_000 for k, v in devices.items()}
    assert abs(shares["mobile"] - 62) <= 3 and abs(shares["desktop"] - 36) <= 3


def test_puerto_rico_speaks_spanish_first_and_a_bad_time_zone_is_not_passed_on():
    who = BrowserIdentityFactory(VERSION, random.Random(1)).draw("PR", "Not/A_Zone")
    assert who.accept_language.startswith("es-PR,es;q=0.9") and who.locale == "es-PR"
    assert who.user_agent_override()["acceptLanguage"] == "es-PR,es,en-US,en"  # Chromium adds the q-values
    assert who.timezone == "America/Puerto_Rico"  # the state's, not the store's invalid one


@pytest.mark.parametrize(
    ("state", "timezone", "expected"),
    [
        ("AZ", None, "America/Phoenix"),  # was America/New_York: the store's state was ignored
        ("az", "", "America/Phoenix"),
        ("MI", None, "America/Detroit"),
        ("CA", "Mars/Olympus", "America/Los_Angeles"),
        ("TX", "America/Denver", "America/Denver"),  # the store's own zone (El Paso) wins over its state's
        (None, None, "America/New_York"),  # nothing known
    ],
)
def test_a_store_without_a_time_zone_gets_its_states(state, timezone, expected):
    who = BrowserIdentityFactory(VERSION, random.Random(2)).draw(state, timezone)
    assert who.timezone == expected
    assert who.context_kwargs(ProxyRecord(1, "http", "127.0.0.1", 8080))["timezone_id"] == expected


def test_the_proxy_goes_to_the_context_with_its_credentials_apart():
    with_auth = ProxyRecord(3, "http", "10.0.0.1", 3128, "scout", "pa55@w0rd")
    assert proxy_settings(with_auth) == {"server": "http://10.0.0.1:3128", "username": "scout", "password": "pa55@w0rd"}
    assert proxy_settings(ProxyRecord(4, "https", "10.0.0.2", 443)) == {"server": "https://10.0.0.2:443"}
    # Chromium knows no socks5h; its socks5 leaves name resolution to the proxy already
    assert proxy_settings(ProxyRecord(5, "socks5h", "10.0.0.3", 1080)) == {"server": "socks5://10.0.0.3:1080"}


def test_no_version_no_identity():
    with pytest.raises(IdentityError, match="no browser version"):
        parse_version("command not found")
    with pytest.raises(IdentityError, match="cannot read the version"):
        asyncio.run(chromium_version("/nonexistent/chromium"))


@pytest.mark.integration
@pytest.mark.skipif(shutil.which(CHROMIUM_PATH) is None, reason=f"no Chromium at {CHROMIUM_PATH}")
def test_the_version_is_read_from_the_real_browser():
    out = subprocess.run([CHROMIUM_PATH, "--version"], capture_output=True, text=True, timeout=30).stdout
    assert asyncio.run(chromium_version(CHROMIUM_PATH)) == out.split()[1]


def test_a_rotation_never_draws_the_identity_a_block_just_burnt(monkeypatch):
    factory = BrowserIdentityFactory(VERSION, random.Random(5))
    burnt, other = factory.draw(), factory.draw()
    assert burnt.key != other.key
    draws = iter([burnt, burnt, other])
    monkeypatch.setattr(factory, "_draw", lambda *_: next(draws))
    assert factory.draw(avoid=frozenset({burnt.key})) == other


# Browser contexts of a crawl: named without credentials, the identity applied to each page over
# CDP, idle contexts nobody uses closed (the real browser: tests/middlewares/test_stealth_browser.py).

IDENTITY = BrowserIdentityFactory("156.0.8078.114", random.Random(3)).draw("AZ", "America/Phoenix")


class FakeContext:
    def __init__(self, pages: int = 0):
        self.pages = [object()] * pages
        self.closed = False
        self.browser = type("Browser", (), {"version": "156.0.8078.114"})()
        self.sent: list[tuple[str, dict]] = []

    async def close(self) -> None:
        self.closed = True

    async def new_cdp_session(self, page):
        context = self

        class Session:
            async def send(self, method: str, params: dict) -> None:
                context.sent.append((method, params))

        return Session()


class FakePage:
    def __init__(self, context: FakeContext):
        self.context = context
        self.handlers: dict = {}

    def on(self, event, handler) -> None:
        self.handlers[event] = handler


def test_the_name_is_the_row_id_and_the_identity_key_never_the_credentials():
    proxy = ProxyRecord(12, "http", "10.1.2.3", 3128, "scout", "pa55@w0rd")
    name = context_name(proxy, IDENTITY)
    assert name == f"stealth-proxy12-{IDENTITY.key}"
    assert not any(part in name for part in ("scout", "pa55", "10.1.2.3", "3128"))


def test_each_page_gets_the_identity_over_cdp_and_reports_the_browser_version():
    contexts, context = BrowserContexts(), FakeContext()
    request = Request("http://127.0.0.1/", meta={"playwright_context": "c1", IDENTITY_META: IDENTITY})
    asyncio.run(contexts.init_page(FakePage(context), request))
    assert request.meta[VERSION_META] == "156.0.8078.114"
    assert contexts.contexts == {"c1": context}
    (m1, override), (m2, locale) = context.sent
    assert (m1, m2) == ("Emulation.setUserAgentOverride", "Emulation.setLocaleOverride")
    assert override == IDENTITY.user_agent_override() and locale == {"locale": "en-US"}


def test_idle_contexts_nobody_uses_are_closed_busy_ones_and_the_requested_one_kept(monkeypatch):
    monkeypatch.setattr(ctx, "KEEP_IDLE", 2)
    contexts = BrowserContexts()
    made = {name: FakeContext() for name in "abcde"}
    made["busy-retired"] = FakeContext(pages=1)
    made["retired"] = FakeContext()
    contexts.contexts.update(made)
    live = set("abcde")
    closed = asyncio.run(contexts.sweep(lambda name: name in live, keep="a"))
    # retired and idle: closed; then the oldest idle live ones beyond 2 (a is the one asked for)
    assert closed == ["retired", "b", "c"]
    assert [n for n, c in made.items() if c.closed] == ["b", "c", "retired"]
    assert list(contexts.contexts) == ["a", "d", "e", "busy-retired"]
