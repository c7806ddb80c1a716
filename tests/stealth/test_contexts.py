"""Browser contexts of a crawl: named without credentials, the identity applied to each page over
CDP, idle contexts nobody uses closed (the real browser: tests/middlewares/test_stealth_browser.py)."""

from __future__ import annotations

import asyncio
import random

from scrapy import Request

from cannaspider.stealth import contexts as ctx
from cannaspider.stealth.browser import BrowserIdentityFactory
from cannaspider.stealth.contexts import IDENTITY_META, VERSION_META, BrowserContexts, context_name
from cannaspider.stealth.proxies import ProxyRecord

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
