"""Browser identities: the device/browser mix, coherence per browser, header order, locale."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from cannaspider.stealth import identity as ident
from cannaspider.stealth.identity import Identity, IdentityError, IdentityFactory, accept_language, coherence_problems


@pytest.fixture(scope="module")
def factory() -> IdentityFactory:
    return IdentityFactory(random.Random(1234))


def test_device_mix_over_10000_draws_is_within_2_points_of_62_36_2(factory):
    counts = Counter(factory.draw_device_browser()[0] for _ in range(10_000))
    shares = {k: 100 * v / 10_000 for k, v in counts.items()}
    assert abs(shares["mobile"] - 62) <= 2
    assert abs(shares["desktop"] - 36) <= 2
    assert abs(shares["tablet"] - 2) <= 2


def test_every_drawn_identity_is_coherent_and_one_of_four_browsers(factory):
    seen = Counter()
    for _ in range(2_000):
        who = factory.draw("AZ", "America/Phoenix")
        assert coherence_problems(who) == [], who
        seen[who.browser] += 1
        headers = dict(who.headers)
        if who.browser in ("chrome", "edge"):
            assert {"sec-ch-ua", "sec-ch-ua-mobile", "sec-ch-ua-platform"} <= set(headers)
            brand = "Microsoft Edge" if who.browser == "edge" else "Google Chrome"
            assert brand in headers["sec-ch-ua"]
            assert headers["sec-ch-ua-mobile"] == ("?1" if who.device == "mobile" else "?0")
        else:
            assert not any(k.startswith("sec-ch-ua") for k in headers)  # as real Firefox and Safari
        assert headers["accept-language"].startswith("en-US,en;q=")
        assert headers["sec-fetch-mode"] == "cors"
    assert set(seen) == {"chrome", "safari", "edge", "firefox"}


def test_header_order_is_the_browsers_and_a_new_identity_replaces_the_old_ones_headers(factory):
    chrome = next(i for i in iter(lambda: factory.draw(), None) if i.browser == "chrome")
    safari = next(i for i in iter(lambda: factory.draw(), None) if i.browser == "safari")
    own = [("Content-Type", "application/json"), ("x-apollo-operation-name", "FilteredProducts")]
    on_chrome = chrome.apply(own + [("User-Agent", "Scrapy/2.19")])
    names = [k for k, _ in on_chrome]
    assert names.index("sec-ch-ua-platform") < names.index("user-agent") < names.index("content-type")
    assert names.index("x-apollo-operation-name") < names.index("accept-language")
    assert dict(on_chrome)["user-agent"] == chrome.user_agent
    # rotation: the Chrome headers are the request's when the Safari identity takes over
    on_safari = dict(safari.apply(on_chrome))
    assert not any(k.startswith("sec-ch-ua") for k in on_safari)
    assert on_safari["user-agent"] == safari.user_agent and on_safari["content-type"] == "application/json"


def test_accept_language_follows_the_state():
    assert accept_language("chrome", "AZ", "America/Phoenix") == "en-US,en;q=0.9"
    assert accept_language("firefox", "MI") == "en-US,en;q=0.5"
    assert accept_language("safari", "PR").startswith("es-PR,es;q=0.9")
    assert accept_language("chrome", None, "America/Puerto_Rico").startswith("es-PR")


def test_incoherent_header_sets_are_named():
    ua = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/147.0.0.0 Safari/537"
    bare = Identity("chrome", "desktop", "windows", ua, (("user-agent", ua),))
    assert "a Chromium User-Agent without client hints" in coherence_problems(bare)
    ff = "Mozilla/5.0 (X11; Linux x86_64; rv:150.0) Gecko/20100101 Firefox/150.0"
    hinted = Identity("firefox", "desktop", "linux", ff, (("user-agent", ff), ("sec-ch-ua", '"Firefox";v="150"')))
    assert "firefox sends no client hints" in coherence_problems(hinted)


def test_a_generator_that_cannot_produce_a_coherent_identity_raises_no_fallback(factory, monkeypatch):
    class Broken:
        def generate(self, **_):
            return {"User-Agent": "Mozilla/5.0 (Windows NT 10.0) Chrome/147.0.0.0 Safari/537.36"}

    monkeypatch.setattr(factory, "_generator", Broken())
    monkeypatch.setattr(ident, "BROWSERS_BY_DEVICE", {d: (("chrome", "windows", 1),) for d in ident.DEVICE_WEIGHTS})
    with pytest.raises(IdentityError, match="no coherent chrome"):
        factory.draw()
