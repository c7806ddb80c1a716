"""TLS impersonation (cannaspider/stealth/tls.py): the target follows the identity; on the wire,
through the sandbox's forward proxy with credentials, the identity's headers in its order and the
claimed browser's ClientHello; timeouts, a refused proxy and errors as Scrapy's exceptions.

The in-process tests drive CurlImpersonator with asyncio (no reactor); the crawls at the end run
`scrapy crawl` through the whole stack.

The bytes received, as the crawl's stats count them: per platform, proxy id and kind, and equal to
what a counting proxy relayed, headers and compressed body, less the chunked framing curl does not
count.
"""

from __future__ import annotations

import asyncio
import json
import random
import socket
import struct
import threading
from collections.abc import Callable
from urllib.parse import urlencode

import pytest
from curl_cffi import BrowserType
from scrapy import Request
from scrapy.core.downloader.handlers.http11 import TunnelError
from scrapy.downloadermiddlewares.httpproxy import HttpProxyMiddleware
from scrapy.exceptions import DownloadCancelledError, DownloadTimeoutError
from scrapy.settings import Settings

from cannaspider.commands.crawl import EXIT_INCOMPLETE
from cannaspider.platforms.dutchie.operations import DEFAULT_PERSISTED_HASHES, products_variables
from cannaspider.stealth.identity import Identity, IdentityFactory
from cannaspider.stealth.routing import PROXY_META
from cannaspider.stealth.tls import PREFIX, WIRE_BYTES_META, CurlImpersonator, impersonate_target, mask, stat_names
from sandbox.counting_proxy import CountingProxy
from sandbox.forward_proxy import ForwardProxy
from tests.helpers import (
    NO_IMAGES,
    SANDBOX_PROXY_AUTH,
    add_store,
    products_of,
    project_settings,
    register_proxy,
    run_scrapy,
    runs_of,
)

GREASE = {0x0A0A + 0x1010 * i for i in range(16)}
WEBKIT = "AppleWebKit/537.36 (KHTML, like Gecko)"
CHROME_UA = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) " + WEBKIT + " Chrome/{v}.0.0.0 Safari/537.36"
OWN_HEADERS = [("accept", "*/*"), ("content-type", "application/json"), ("x-app", "1")]


def identity(browser: str, os_name: str, ua: str, device: str = "desktop") -> Identity:
    return Identity(browser, device, os_name, ua, (("user-agent", ua),))


# -- the target --------------------------------------------------------------------------------
def test_the_target_is_the_identitys_browser_at_its_version_on_its_platform():
    assert impersonate_target(identity("chrome", "windows", CHROME_UA.format(v=142))) == "chrome142"
    assert impersonate_target(identity("chrome", "windows", CHROME_UA.format(v=144))) == "chrome142"  # newest ≤ 144
    # Edge is Chromium: Chrome's handshake of that version, not curl_cffi's Edge 101
    edge = CHROME_UA.format(v=146) + " Edg/146.0.0.0"
    assert impersonate_target(identity("edge", "windows", edge)) == "chrome146"
    android = f"Mozilla/5.0 (Linux; Android 10; K) {WEBKIT} Chrome/146.0.0.0 Mobile Safari/537.36"
    assert impersonate_target(identity("chrome", "android", android, "mobile")) == "chrome131_android"
    ios = (
        "Mozilla/5.0 (iPhone; CPU iPhone OS 18_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) "
        "Version/18.4 Mobile/15E148 Safari/604.1"
    )
    assert impersonate_target(identity("safari", "ios", ios, "mobile")) == "safari184_ios"
    mac = (
        "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) "
        "Version/18.5 Safari/605.1.15"
    )
    assert impersonate_target(identity("safari", "macos", mac)) == "safari184"
    firefox = "Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:147.0) Gecko/20100101 Firefox/147.0"
    assert impersonate_target(identity("firefox", "windows", firefox)) == "firefox147"
    old = "Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:115.0) Gecko/20100101 Firefox/115.0"
    assert impersonate_target(identity("firefox", "windows", old)) == "firefox133"  # older than every target


def test_every_drawn_identity_has_a_target_of_its_own_family():
    factory, known = IdentityFactory(random.Random(8)), {b.value for b in BrowserType}
    for _ in range(300):
        who = factory.draw()
        target = impersonate_target(who)
        assert target in known
        family = "chrome" if who.browser == "edge" else who.browser
        assert target.startswith(family), (who.user_agent, target)
        assert target.endswith("_android") == (who.os == "android" and family == "chrome")


# -- loopback servers --------------------------------------------------------------------------
class Recorder:
    """A loopback TCP server that keeps what each connection sent first and answers with
    `answer(first_bytes)` (None: no answer, the connection stays open: a stalled server)."""

    def __init__(self, complete: Callable[[bytes], bool], answer: Callable[[bytes], bytes | None]):
        self.complete, self.answer = complete, answer
        self.received: list[bytes] = []
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.held: list[socket.socket] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn: socket.socket) -> None:
        data = b""
        conn.settimeout(10)
        try:
            while not self.complete(data):
                chunk = conn.recv(65536)
                if not chunk:
                    break
                data += chunk
        except OSError:
            pass
        self.received.append(data)
        reply = self.answer(data)
        if reply is None:
            self.held.append(conn)
            return
        conn.sendall(reply)
        conn.close()

    def close(self) -> None:
        self.sock.close()
        for conn in self.held:
            conn.close()


def http_request_complete(data: bytes) -> bool:
    return b"\r\n\r\n" in data


JSON_OK = b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n{"data":{}}'


def tls_record_complete(data: bytes) -> bool:
    return len(data) >= 5 and len(data) >= 5 + struct.unpack("!H", data[3:5])[0]


def client_hello(data: bytes) -> dict:
    """Cipher suites, extension types and ALPN protocols of a TLS ClientHello record."""
    assert data[0] == 0x16 and data[5] == 0x01, "not a TLS ClientHello"
    body = data[9:]
    pos = 2 + 32
    pos += 1 + body[pos]  # session id
    n = struct.unpack("!H", body[pos : pos + 2])[0]
    ciphers = list(struct.unpack(f"!{n // 2}H", body[pos + 2 : pos + 2 + n]))
    pos += 2 + n
    pos += 1 + body[pos]  # compression methods
    end = pos + 2 + struct.unpack("!H", body[pos : pos + 2])[0]
    pos += 2
    extensions, alpn = [], []
    while pos < end:
        kind, length = struct.unpack("!HH", body[pos : pos + 4])
        value = body[pos + 4 : pos + 4 + length]
        extensions.append(kind)
        if kind == 16:
            i = 2
            while i < len(value):
                alpn.append(value[i + 1 : i + 1 + value[i]].decode())
                i += 1 + value[i]
        pos += 4 + length
    return {"ciphers": ciphers, "extensions": extensions, "alpn": alpn}


@pytest.fixture
def proxy():
    """The sandbox's forward proxy (proxy.py with basic auth), on its own."""
    p = ForwardProxy(*SANDBOX_PROXY_AUTH).start()
    yield p
    p.stop()


def proxied(url: str, proxy: ForwardProxy, who: Identity, auth=SANDBOX_PROXY_AUTH, **meta) -> Request:
    """A request as the stealth middleware and HttpProxyMiddleware leave it: the identity's
    headers in its order, the proxy URL with credentials turned into Proxy-Authorization."""
    user, password = (part.replace("@", "%40") for part in auth)
    proxy_url = f"http://{user}:{password}@127.0.0.1:{proxy.port}"
    request = Request(url, meta={"proxy": proxy_url, "impersonate": impersonate_target(who), **meta})
    for name, value in who.apply(OWN_HEADERS):
        request.headers[name] = value
    HttpProxyMiddleware().process_request(request)
    assert b"Proxy-Authorization" in request.headers
    return request


def download(request: Request, **settings) -> object:
    curl = CurlImpersonator(Settings({**project_settings(), "DOWNLOAD_TIMEOUT": 60, **settings}))

    async def run():
        try:
            return await curl.download(request)
        finally:
            await curl.close()

    return asyncio.run(run())


@pytest.fixture(scope="module")
def identities() -> dict[str, Identity]:
    factory, found = IdentityFactory(random.Random(3)), {}
    while len(found) < 4:
        who = factory.draw()
        found.setdefault(who.browser, who)
    return found


# -- through the authenticated proxy ---------------------------------------------------------
@pytest.mark.integration
@pytest.mark.parametrize("browser", ["chrome", "safari", "firefox", "edge"])
def test_through_the_authenticated_proxy_the_identitys_headers_go_in_its_order(proxy, identities, browser):
    who = identities[browser]
    server = Recorder(http_request_complete, lambda _: JSON_OK)
    try:
        response = download(proxied(f"http://127.0.0.1:{server.port}/api-3/graphql?operationName=X", proxy, who))
    finally:
        server.close()
    assert response.status == 200 and response.json() == {"data": {}}  # the proxy took our credentials
    assert "impersonate" in response.flags
    lines = server.received[0].decode("latin-1").split("\r\n\r\n")[0].split("\r\n")[1:]
    wire = [line.split(":", 1)[0].lower() for line in lines]
    values = {line.split(":", 1)[0].lower(): line.split(":", 1)[1].strip() for line in lines}
    expected = ["host", *(k for k, _ in who.apply(OWN_HEADERS))]
    assert [n for n in wire if n in expected] == expected
    assert values["user-agent"] == who.user_agent and values["accept-encoding"] == who.header("accept-encoding")
    # the proxy's credentials stayed with the proxy; none of curl-impersonate's navigation defaults
    for absent in ("proxy-authorization", "upgrade-insecure-requests", "sec-fetch-user", "upgrade", "cookie"):
        assert absent not in wire
    if browser in ("safari", "firefox"):
        assert not any(n.startswith("sec-ch-ua") for n in wire)


@pytest.mark.integration
def test_a_session_is_kept_per_identity_and_the_least_recently_used_one_closes(proxy, identities):
    server = Recorder(http_request_complete, lambda _: JSON_OK)
    curl = CurlImpersonator(Settings({**project_settings(), "TLS_IMPERSONATE_MAX_SESSIONS": 2}))
    url = f"http://127.0.0.1:{server.port}/api-3/graphql"

    async def run() -> list[int]:
        counts = []
        try:
            for browser in ("chrome", "chrome", "firefox", "safari"):
                response = await curl.download(proxied(url, proxy, identities[browser]))
                assert response.status == 200
                counts.append(len(curl.sessions))
            return counts
        finally:
            await curl.close()

    try:
        assert asyncio.run(run()) == [1, 1, 2, 2]  # Chrome's twice in one session; Safari's evicts it
    finally:
        server.close()
    assert curl.sessions == {}


@pytest.mark.integration
def test_a_clienthello_through_the_proxy_is_the_claimed_browsers_not_scrapys(proxy, identities, tmp_path):
    server = Recorder(tls_record_complete, lambda _: b"")  # record the ClientHello, then hang up
    try:
        hellos = {}
        for browser in ("chrome", "firefox", "safari"):
            request = proxied(f"https://127.0.0.1:{server.port}/api-3/graphql", proxy, identities[browser])
            with pytest.raises(Exception):  # noqa: B017 - the server hangs up mid-handshake
                download(request)
            hellos[browser] = client_hello(server.received[-1])
        # plain Scrapy (its defaults, outside the project) from a `scrapy fetch`
        run_scrapy("fetch", "--nolog", f"https://127.0.0.1:{server.port}/", env={}, cwd=tmp_path, timeout=60)
        hellos["scrapy"] = client_hello(server.received[-1])
    finally:
        server.close()
    chrome, firefox, safari, scrapy_ = (hellos[k] for k in ("chrome", "firefox", "safari", "scrapy"))
    # Chromium and Safari send GREASE values; Firefox and OpenSSL (Scrapy) don't
    assert GREASE & set(chrome["ciphers"]) and GREASE & set(safari["ciphers"])
    assert not GREASE & set(firefox["ciphers"]) and not GREASE & set(scrapy_["ciphers"])
    # TLS 1.3 suites in each browser's own order; Firefox puts ChaCha20 before AES-256
    assert [c for c in chrome["ciphers"] if c not in GREASE][:3] == [0x1301, 0x1302, 0x1303]
    assert firefox["ciphers"][:3] == [0x1301, 0x1303, 0x1302]
    assert chrome["alpn"] == firefox["alpn"] == safari["alpn"] == ["h2", "http/1.1"]
    assert scrapy_["alpn"] != chrome["alpn"]
    assert len({tuple(h["ciphers"]) for h in hellos.values()}) == 4  # four different handshakes


# -- failures are Scrapy's, and bounded ----------------------------------------------------------
@pytest.mark.integration
def test_a_stalled_server_times_out_at_download_timeout_not_curls_30_seconds(proxy, identities):
    server = Recorder(http_request_complete, lambda _: None)
    request = proxied(f"http://127.0.0.1:{server.port}/api-3/graphql", proxy, identities["chrome"], download_timeout=1)
    # Scrapy's own timeout error, naming DOWNLOAD_TIMEOUT: curl's 30 s timeout would raise curl's
    try:
        with pytest.raises(DownloadTimeoutError, match="took longer than 1.0 seconds"):
            download(request)
    finally:
        server.close()


@pytest.mark.integration
def test_a_body_past_the_requests_download_maxsize_is_cancelled_at_once(proxy, identities):
    """An image's own cap (meta download_maxsize, pipelines/image_fetch.py), as Scrapy's handlers read
    it: a 200 MB image that trickles in is cancelled from its Content-Length, not waited for."""
    huge = b"HTTP/1.1 200 OK\r\nContent-Type: image/png\r\nContent-Length: 209715200\r\n\r\n" + b"\0" * 1024
    server = Recorder(http_request_complete, lambda _: huge)  # then stalls, the rest never sent
    request = proxied(
        f"http://127.0.0.1:{server.port}/x.png", proxy, identities["chrome"], download_timeout=30, download_maxsize=4096
    )
    # cancelled, not timed out: the trickle is refused from its Content-Length
    try:
        with pytest.raises(DownloadCancelledError):
            download(request)
    finally:
        server.close()


@pytest.mark.integration
def test_a_wrong_proxy_password_on_connect_is_a_tunnel_error_without_the_password(proxy, identities):
    server = Recorder(tls_record_complete, lambda _: b"")
    wrong = (SANDBOX_PROXY_AUTH[0], "wr0ng@pw")
    request = proxied(f"https://127.0.0.1:{server.port}/api-3/graphql", proxy, identities["chrome"], auth=wrong)
    try:
        with pytest.raises(TunnelError) as raised:
            download(request)
    finally:
        server.close()
    assert "407" in str(raised.value)
    assert "wr0ng" not in str(raised.value) and server.received == []  # never reached the target


def test_credentials_in_curl_messages_are_masked():
    assert mask("Failed to connect to http://scout:pa55%40w0rd@127.0.0.1:3128") == (
        "Failed to connect to http://scout:***@127.0.0.1:3128"
    )


# -- whole crawls (scrapy crawl, the sandbox's Dutchie behind its authenticated proxy) ----------
def stat(stderr: str, name: str) -> int:
    marker = f"'{name}': "
    return int(stderr.split(marker, 1)[1].split(",", 1)[0].split("}", 1)[0]) if marker in stderr else 0


@pytest.mark.integration
def test_a_product_crawl_goes_through_the_authenticated_proxy_impersonated(crawl, db, sandbox):
    store = sandbox.stores("AZ")[0]
    d = add_store(db, store)
    result = crawl("product_resync", dispensary_id=d)
    assert result.returncode == 0
    pages = runs_of(db, d)[-1][6]
    assert runs_of(db, d)[-1][0] == "complete" and pages >= 1
    assert set(products_of(db, d)) == set(sandbox.menu(store["id"], 0))
    seen = sandbox.requests()
    # every GraphQL page and every image (in the store's session) impersonated
    assert stat(result.stderr, "cannaspider/tls_impersonated") == pages + seen.get("image via:sandbox", 0)
    assert seen["via:sandbox"] == pages and "incoherent_identity" not in seen
    assert SANDBOX_PROXY_AUTH[1] not in result.stderr and "pa55%40w0rd" not in result.stderr


@pytest.mark.integration
def test_a_stalled_page_hits_download_timeout_and_is_retried(crawl, db, sandbox):
    store = sandbox.stores("AZ")[0]
    d = add_store(db, store)
    sandbox.faults({"kind": "slow", "store": store["id"], "pages": [0], "delay": 4, "times": 1})
    result = crawl("product_resync", "-s", "DOWNLOAD_TIMEOUT=1", "-s", "STEALTH_PROXY_BACKOFF_S=0", dispensary_id=d)
    assert result.returncode == 0
    assert stat(result.stderr, "downloader/exception_type_count/scrapy.exceptions.DownloadTimeoutError") == 1
    assert "took longer than 1.0 seconds" in result.stderr
    assert runs_of(db, d)[-1][0] == "complete"
    assert set(products_of(db, d)) == set(sandbox.menu(store["id"], 0))


@pytest.mark.integration
def test_a_wrong_proxy_password_is_a_recorded_proxy_failure_not_a_hang(crawl, db, sandbox, sql):
    store = sandbox.stores("AZ")[0]
    d = add_store(db, store)
    sql("DELETE FROM proxies")
    wrong = register_proxy(db, sandbox.urls.proxy, (SANDBOX_PROXY_AUTH[0], "wr0ng@pw"))
    result = crawl("product_resync", "-s", "STEALTH_PROXY_BACKOFF_S=0", dispensary_id=d)
    ((failures, error),) = sql("SELECT failure_count, last_error FROM proxies WHERE id = %s", (wrong,))
    assert failures >= 1 and "407" in error
    assert runs_of(db, d)[-1][0] == "incomplete"  # nothing marked missing
    assert "wr0ng" not in result.stderr and "wr0ng%40pw" not in result.stderr


# -- compressed answers (the sandbox's edge compression, issue 31) ------------------------------
SKIP_COLUMNS = {"id", "first_seen_at", "last_seen_at", "updated_at", "last_crawl_run_id"}


def stored_rows(sql, dispensary_id: int) -> dict[str, dict]:
    rows = sql(
        "SELECT provider_product_id, to_jsonb(sp) FROM store_products sp WHERE dispensary_id = %s", (dispensary_id,)
    )
    return {pid: {k: v for k, v in row.items() if k not in SKIP_COLUMNS} for pid, row in rows}


@pytest.mark.integration
@pytest.mark.parametrize("encoding", ["br", "gzip"])
def test_a_compressed_chunked_answer_is_stored_as_the_uncompressed_one_and_counted_as_it_came(
    crawl, db, sandbox, sql, sandbox_proxy, encoding
):
    store = sandbox.stores("AZ")[0]
    d = add_store(db, store)
    sandbox.call("POST", "/_sandbox/compression", {"on": False})
    plain = crawl("product_resync", *NO_IMAGES, dispensary_id=d)  # (the pages are the point: no images)
    assert plain.returncode == 0 and sandbox.call("GET", "/_sandbox/state")["compressed"] == {}
    expected = stored_rows(sql, d)
    sql("DELETE FROM store_products WHERE dispensary_id = %s", (d,))
    sandbox.call("POST", "/_sandbox/compression", {"on": True, "encodings": [encoding]})
    packed = crawl("product_resync", *NO_IMAGES, dispensary_id=d)
    assert packed.returncode == 0 and runs_of(db, d)[-1][0] == "complete"
    pages = runs_of(db, d)[-1][6]
    assert sandbox.call("GET", "/_sandbox/state")["compressed"] == {encoding: pages}
    assert stored_rows(sql, d) == expected and len(expected) == len(sandbox.menu(store["id"], 0))
    # the stats count what came through the proxy, compressed: a fraction of the decoded bytes
    received = {
        k: stat(packed.stderr, f"cannaspider/bytes_received/{k}")
        for k in ("proxy/" + str(sandbox_proxy), "platform/dutchie", "kind/graphql")
    }
    assert len(set(received.values())) == 1 and received["kind/graphql"] > 0
    assert received["kind/graphql"] < stat(plain.stderr, "cannaspider/bytes_received/kind/graphql") / 4
    assert "127.0.0.1" not in "".join(k for k in packed.stderr.split("'") if k.startswith("cannaspider/bytes_received"))


@pytest.mark.integration
@pytest.mark.parametrize("encoding", ["br", "gzip"])
@pytest.mark.parametrize("kind", ["truncated_compressed", "corrupt_compressed"])
def test_a_truncated_or_corrupt_compressed_page_leaves_the_crawl_incomplete_and_marks_nothing_missing(
    crawl, db, sandbox, kind, encoding
):
    store = sandbox.stores("AZ")[0]
    d = add_store(db, store)
    sandbox.call("POST", "/_sandbox/compression", {"encodings": [encoding]})
    assert crawl("product_resync", *NO_IMAGES, dispensary_id=d).returncode == 0  # (the pages are the point)
    before = products_of(db, d)
    sandbox.epoch(3)  # products vanish: only a complete crawl may count them missing
    sandbox.faults({"kind": kind, "store": store["id"], "pages": [0]})
    result = crawl("product_resync", "-s", "STEALTH_PROXY_BACKOFF_S=0", *NO_IMAGES, dispensary_id=d)
    assert result.returncode == EXIT_INCOMPLETE
    after = products_of(db, d)
    assert all(after[p][0] == 0 and after[p][1] == "in_stock" for p in before)  # nothing marked missing
    status, error, *_ = runs_of(db, d)[-1]
    # judged as a failed download (curl: bad content encoding) or an answer that is no API answer
    # (the JSON a truncated stream decodes to): retried through the proxy, then given up
    assert status == "incomplete" and error.startswith("page 0: request failed"), error


# Bytes received, as the crawl's stats count them (cannaspider/stealth/tls.py and the curl
# download in stealth/tls.py): per platform, proxy id and kind, and equal to what a counting proxy
# relayed, headers and compressed body, less the chunked framing curl does not count.


def test_the_stats_name_the_platform_the_proxy_id_and_the_kind_never_the_url():
    page = Request("http://user:secret@proxy.example/graphql", meta={"graphql_operation": "F", PROXY_META: 7})
    assert stat_names(page) == (
        PREFIX,
        f"{PREFIX}/platform/dutchie",
        f"{PREFIX}/proxy/7",
        f"{PREFIX}/kind/graphql",
    )
    image = Request("http://cdn.example/a.png", meta={"stealth": True, "stealth_slot": "images", PROXY_META: 3})
    assert stat_names(image)[2:] == (f"{PREFIX}/proxy/3", f"{PREFIX}/kind/images")
    direct = Request("http://example.com/", meta={"platform": "other"})
    assert stat_names(direct)[1:] == (f"{PREFIX}/platform/other", f"{PREFIX}/proxy/direct", f"{PREFIX}/kind/other")
    assert not any("secret" in name or "example" in name for name in stat_names(page) + stat_names(image))


def graphql_url(sandbox) -> str:
    store = sandbox.stores("AZ")[0]["id"]
    params = {
        "operationName": "FilteredProducts",
        "variables": json.dumps(products_variables(store, 0, 100)),
        "extensions": json.dumps(
            {"persistedQuery": {"version": 1, "sha256Hash": DEFAULT_PERSISTED_HASHES["FilteredProducts"]}}
        ),
    }
    return f"{sandbox.urls.graphql}?{urlencode(params)}"


@pytest.mark.integration
@pytest.mark.parametrize("compressed", [True, False], ids=["br-chunked", "uncompressed"])
def test_the_bytes_curl_received_are_the_proxys_less_the_chunk_framing(sandbox, compressed):
    sandbox.call("POST", "/_sandbox/compression", {"on": compressed})
    who = IdentityFactory(random.Random(5)).draw()
    curl = CurlImpersonator(Settings({**project_settings(), "DOWNLOAD_TIMEOUT": 60}))
    with CountingProxy() as proxy:
        requests = []
        for url in (graphql_url(sandbox), sandbox.urls.base + "/images/products/abc.png"):
            request = Request(url, meta={"proxy": proxy.url, "impersonate": impersonate_target(who)})
            for name, value in who.apply([("apollo-require-preflight", "true")]):
                request.headers[name] = value
            requests.append(request)

        async def run() -> list:
            try:
                return [await curl.download(r) for r in requests]
            finally:
                await curl.close()

        page, image = asyncio.run(run())
        exchanges = proxy.take()
    assert json.loads(page.body)["data"]["filteredProducts"]["products"]  # decoded by curl
    assert "Content-Encoding" not in page.headers  # so HttpCompressionMiddleware cannot decode it twice
    answer, picture = exchanges
    assert answer.encoding == ("br" if compressed else None)
    assert page.meta[WIRE_BYTES_META] == answer.received - answer.framing
    assert image.meta[WIRE_BYTES_META] == picture.received
    if compressed:
        assert page.meta[WIRE_BYTES_META] < len(page.body) / 4  # counted as it came, not decoded
