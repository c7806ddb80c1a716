"""The sandbox's forward proxy (proxy.py): relays over loopback, enforces basic auth."""

from __future__ import annotations

import base64

import pytest

from cannaspider.sandbox.forward_proxy import ForwardProxy
from tests.httpclient import http


@pytest.fixture(scope="module")
def proxy():
    p = ForwardProxy("scout", "pa55").start()
    yield p
    p.stop()


def test_proxy_requires_credentials(proxy, sandbox):
    reply = http("GET", sandbox.urls.base + "/competitors/page-a.html", proxy=proxy.url)
    assert reply.status == 407


def test_proxy_relays_with_credentials(proxy, sandbox):
    token = base64.b64encode(b"scout:pa55").decode()
    reply = http(
        "GET",
        sandbox.urls.base + "/competitors/page-a.html",
        proxy=proxy.url,
        headers={"Proxy-Authorization": f"Basic {token}"},
    )
    assert reply.status == 200 and "Best Widgets 2025" in reply.text


def test_proxy_without_auth_relays_anything_on_loopback(sandbox):
    p = ForwardProxy().start()
    try:
        reply = http("GET", sandbox.urls.base + "/competitors/page-a.html", proxy=p.url)
        assert reply.status == 200
    finally:
        p.stop()
    assert p.process is None
