"""The sandbox's forward proxy (proxy.py): relays over loopback, enforces basic auth, names itself
so the sandbox can block one proxy and not another; the sandbox's identity coherence check."""

from __future__ import annotations

import base64
import json
from urllib.parse import urlencode

import pytest

from cannaspider.platforms.dutchie.operations import QUERIES, products_variables
from sandbox.forward_proxy import ForwardProxy
from tests.httpclient import http

pytestmark = pytest.mark.integration  # spawns (tests/tiers.py)


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


def graphql_url(sandbox) -> str:
    variables = json.dumps(products_variables(sandbox.stores("AZ")[0]["id"], 0, 10))
    query = urlencode(
        {"operationName": "FilteredProducts", "variables": variables, "query": QUERIES["FilteredProducts"]}
    )
    return f"{sandbox.urls.graphql}?{query}"


def test_the_sandbox_blocks_one_named_proxy_and_not_another(sandbox):
    one, two = ForwardProxy(name="one").start(), ForwardProxy(name="two").start()
    try:
        sandbox.faults({"kind": "block403", "proxy": "one"}, {"kind": "challenge503", "proxy": "two", "times": 1})
        headers = {"apollo-require-preflight": "true"}
        blocked = http("GET", graphql_url(sandbox), headers=headers, proxy=one.url)
        challenged = http("GET", graphql_url(sandbox), headers=headers, proxy=two.url)
        passed = http("GET", graphql_url(sandbox), headers=headers, proxy=two.url)
        direct = http("GET", graphql_url(sandbox), headers=headers)
    finally:
        one.stop()
        two.stop()
    assert blocked.status == 403 and "Sorry, you have been blocked" in blocked.text
    assert challenged.status == 503 and "Just a moment" in challenged.text
    assert passed.status == 200 and direct.status == 200
    seen = sandbox.requests()
    assert seen["via:one"] == 1 and seen["via:two"] == 2


CHROME = (
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/147.0.0.0 Safari/537.36"
)
HINTS = {"sec-ch-ua": '"Google Chrome";v="147", "Not.A/Brand";v="8", "Chromium";v="147"', "sec-ch-ua-mobile": "?0"}
SAFARI = (
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/26.4 "
    "Safari/605.1.15"
)


@pytest.mark.parametrize(
    "headers, status",
    [
        ({"user-agent": CHROME}, 403),  # Chrome without its client hints: not a real Chrome
        ({"user-agent": CHROME, **HINTS}, 200),
        ({"user-agent": SAFARI, **HINTS}, 403),  # Safari sends no client hints
        ({"user-agent": SAFARI}, 200),
    ],
)
def test_the_sandbox_rejects_incoherent_identities(sandbox, headers, status):
    reply = http("GET", graphql_url(sandbox), headers={"apollo-require-preflight": "true", **headers})
    assert reply.status == status


def test_the_sandbox_process_stops_its_proxy_on_sigterm():
    """`terminate()` of a sandbox process (benchmarks, scripts) takes its forward proxy with it: the
    proxy runs in a session of its own and would otherwise be left listening."""
    import json
    import socket
    import subprocess
    import sys

    from tests.helpers import ROOT

    argv = ["--port", "0", "--firecrawl-port", "0", "--proxy", "--states", "AZ", "--stores-per-state", "1"]
    proc = subprocess.Popen([sys.executable, "-m", "sandbox", *argv], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert proc.stdout is not None
        port = int(json.loads(proc.stdout.readline())["proxy"].rsplit(":", 1)[1])
        socket.create_connection(("127.0.0.1", port), timeout=5).close()  # listening
    finally:
        proc.terminate()
        proc.wait(30)
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=2)


def test_a_proxy_can_answer_on_its_own_and_relay_again(sandbox):
    """A misbehaving proxy (tests of the pool's failure rules): its own plain-text 403, then relaying."""
    p = ForwardProxy(name="own").start()
    try:
        p.answer(403, "Forbidden", reason="Forbidden")
        own = http("GET", graphql_url(sandbox), headers={"apollo-require-preflight": "true"}, proxy=p.url)
        p.answer(502, "<html><body>Bad Gateway</body></html>", content_type="text/html")
        gateway = http("GET", graphql_url(sandbox), headers={"apollo-require-preflight": "true"}, proxy=p.url)
        p.relay()
        relayed = http("GET", graphql_url(sandbox), headers={"apollo-require-preflight": "true"}, proxy=p.url)
    finally:
        p.stop()
    content_type = {k.lower(): v for k, v in own.headers.items()}.get("content-type")
    assert (own.status, own.text, content_type) == (403, "Forbidden", "text/plain")
    assert gateway.status == 502 and "Bad Gateway" in gateway.text
    assert relayed.status == 200 and relayed.text.startswith('{"data"')
    assert sandbox.requests()["via:own"] == 1  # the proxy's own answers never reached the sandbox
