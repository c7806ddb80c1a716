"""The claimed browser's TLS and HTTP/2 handshake on Dutchie requests: curl_cffi (curl-impersonate)
through scrapy-impersonate's download handler, with its defects fixed (docs/stealth.md, "TLS").

A request is impersonated when its meta has `impersonate` (a curl_cffi target); the stealth
middleware sets it from the store session's identity (`impersonate_target`), so the TLS
ClientHello, the ALPN list and the HTTP/2 settings match the User-Agent. Every other request goes
through Scrapy's own HTTP/1.1 handler, unchanged.

What scrapy-impersonate 1.10.1 gets wrong, and what is done here instead:
- DOWNLOAD_TIMEOUT (meta `download_timeout`) is ignored: curl_cffi's own 30 s applies
  (jxlil/scrapy-impersonate#1). Here the request's download_timeout is curl's total timeout;
- curl errors reach Scrapy as curl_cffi exceptions; they are retried only because they happen
  to subclass OSError. Here they become the exceptions Scrapy's own handlers raise
  (DownloadTimeoutError, TunnelError, DownloadConnectionRefusedError, …), which RetryMiddleware
  and the stealth middleware know, with any proxy credentials masked in the message;
- one curl session per request: a new connection (and TLS handshake) for every page, which no
  browser does, at half the throughput through a proxy. Here a session is kept per proxy,
  credentials, target and User-Agent (an identity never shares a connection with another), at
  most TLS_IMPERSONATE_MAX_SESSIONS, the least recently used closed once idle;
- curl-impersonate adds the target's default navigation headers (Upgrade-Insecure-Requests,
  Sec-Fetch-User…) to our fetch() headers and reorders ours into its own order; here its default
  headers are off and the request's own header order (the identity's) goes on the wire;
- the advertised Accept-Encoding is the identity's, and curl decodes exactly what it advertised
  (zstd included), so the Content-Encoding the handler drops was really undone;
- curl_cffi's cookie jar would keep cookies per session beside Scrapy's CookiesMiddleware: it is
  off (Scrapy's Cookie header is sent as is); curl's h2c Upgrade on plain http (no browser sends
  it) is off: plain http (the sandbox) is HTTP/1.1;
- DOWNLOAD_MAXSIZE and DOWNLOAD_VERIFY_CERTIFICATES are honoured;
- the bytes received (headers and the body as it came, compressed) are in meta
  `download_wire_bytes` and in the crawl's stats per platform, proxy and kind
  (stealth/tls.py): Scrapy's `downloader/response_bytes` counts the decoded body.
Proxy-Authorization goes to the proxy only (PROXYHEADER, also on CONNECT), never to the target
(fixed upstream in 1.10.1, jxlil/scrapy-impersonate#52), and stays on retries (#26). A SOCKS5
proxy's credentials go to curl as its user and password (RFC 1929), a `:` in the password included.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import re
import time
from collections import OrderedDict
from dataclasses import dataclass
from functools import lru_cache
from typing import Any
from urllib.parse import urlsplit

from curl_cffi import BrowserType, CurlError, CurlOpt
from curl_cffi.requests import AsyncSession
from curl_cffi.requests import exceptions as curl_exc
from scrapy import Request
from scrapy.core.downloader.handlers.http11 import TunnelError
from scrapy.crawler import Crawler
from scrapy.exceptions import (
    CannotResolveHostError,
    DownloadCancelledError,
    DownloadConnectionRefusedError,
    DownloadFailedError,
    DownloadTimeoutError,
    ResponseDataLossError,
)
from scrapy.http import Headers, Response
from scrapy.responsetypes import responsetypes
from scrapy.settings import BaseSettings
from scrapy.statscollectors import StatsCollector
from scrapy_impersonate.handler import ImpersonateDownloadHandler
from scrapy_impersonate.parser import CurlOptionsParser, RequestParser

from cannaspider.stealth.identity import Identity
from cannaspider.stealth.routing import PROXY_META

# curl error codes (https://curl.se/libcurl/c/libcurl-errors.html)
CURLE_COULDNT_CONNECT = 7
CURLE_PARTIAL_FILE = 18
CURLE_FILESIZE_EXCEEDED = 63
WIRE_BYTES_META = "download_wire_bytes"  # what curl received for the answer (headers + body as sent)
_CREDENTIALS = re.compile(r"(?<=://)([^:@/\s]+):[^@/\s]+@")


# -- the target for an identity --------------------------------------------------------------
_TARGET = re.compile(r"^(chrome|safari|firefox|edge)(\d+)[a-z]?(?:_(android|ios|macos))?$")
_UA_VERSION = {
    "chrome": re.compile(r"(?:Chrome|CriOS)/(\d+)"),
    "firefox": re.compile(r"Firefox/(\d+)"),
    "safari": re.compile(r"Version/(\d+)\.(\d+)(?:\.(\d+))?"),
}


def _target_version(family: str, digits: str) -> tuple[int, ...]:
    if family == "safari":  # safari184 = 18.4, safari2601 = 26.0.1
        return (int(digits[:2]), int(digits[2:3] or 0), int(digits[3:] or 0))
    return (int(digits),)


def _available() -> list[tuple[str, str, tuple[int, ...], str]]:
    """(family, platform, version, name) of every target this curl_cffi knows."""
    out = []
    for target in BrowserType:
        m = _TARGET.match(target.value)
        if m:
            out.append((m.group(1), m.group(3) or "", _target_version(m.group(1), m.group(2)), target.value))
    return out


@lru_cache(maxsize=4096)
def impersonate_target(identity: Identity) -> str:
    """The curl_cffi target whose handshake the identity's browser sends: the same family (Edge is
    Chromium: Chrome's handshake of its version; curl_cffi's own Edge targets are years old) on
    its platform (Android, iOS; macOS when there is one), the newest not newer than the
    User-Agent's version (the oldest when the User-Agent is older than every target)."""
    family = "chrome" if identity.browser in ("chrome", "edge") else identity.browser
    match = _UA_VERSION[family].search(identity.user_agent)
    wanted = tuple(int(g or 0) for g in match.groups()) if match else (10_000,)
    platforms = {"android": ("android",), "ios": ("ios",), "macos": ("macos", "")}.get(identity.os, ("",))
    candidates = [t for t in _available() if t[0] == family and t[1] in platforms]
    if not candidates and family != "chrome":  # e.g. no iOS target: the desktop one of the family
        candidates = [t for t in _available() if t[0] == family and t[1] == ""]
    if not candidates:
        raise ValueError(f"curl_cffi has no {family} target")
    older = [t for t in candidates if t[2] <= wanted]
    rank = {p: -i for i, p in enumerate(platforms)}
    if older:
        return max(older, key=lambda t: (t[2], rank.get(t[1], -99)))[3]
    return min(candidates, key=lambda t: (t[2], -rank.get(t[1], -99)))[3]


# -- the download ----------------------------------------------------------------------------
def mask(text: str) -> str:
    """`scheme://user:password@` → `scheme://user:***@`: curl's messages name the proxy URL."""
    return _CREDENTIALS.sub(r"\1:***@", text)


def scrapy_error(exc: CurlError, request: Request, timeout: float) -> Exception:
    """The exception Scrapy's own HTTP handler raises for the same failure."""
    message = f"{exc.__class__.__name__}: {mask(str(exc))}"
    code = getattr(exc, "code", None)
    if isinstance(exc, curl_exc.Timeout):
        return DownloadTimeoutError(f"Getting {request.url} took longer than {timeout} seconds.")
    # the proxy refused the CONNECT (407, 5xx): curl says so with code 7, 56 or 97 (CURLE_PROXY)
    if isinstance(exc, curl_exc.ProxyError) or "CONNECT tunnel failed" in str(exc):
        return TunnelError(message)
    if isinstance(exc, curl_exc.DNSError):
        return CannotResolveHostError(message)
    if code == CURLE_COULDNT_CONNECT:
        return DownloadConnectionRefusedError(message)
    if code == CURLE_PARTIAL_FILE:
        return ResponseDataLossError(message)
    if code == CURLE_FILESIZE_EXCEEDED:
        return DownloadCancelledError(message)
    return DownloadFailedError(message)


def _socks_credentials(request: Request) -> dict[Any, Any]:
    """A SOCKS5 proxy's user and password (RFC 1929) from the Proxy-Authorization header that
    HttpProxyMiddleware wrote, which is taken off the request (a SOCKS proxy never sees headers).
    scrapy-impersonate 1.10.1 does this too but splits at every `:`, so a password holding one
    fails the request with a ValueError: here only the first `:` separates them."""
    proxy = request.meta.get("proxy") or ""
    if not proxy.startswith(("socks5://", "socks5h://")):
        return {}
    header = request.headers.pop(b"Proxy-Authorization", None)
    if not header:
        return {}
    user, _, password = base64.b64decode(header[0].split(b" ", 1)[1]).partition(b":")
    return {CurlOpt.PROXYUSERNAME: user, CurlOpt.PROXYPASSWORD: password}


@dataclass
class _Pooled:
    session: AsyncSession[Any]
    active: int = 0
    evicted: bool = False


class CurlImpersonator:
    """Impersonated downloads over kept curl sessions; pure asyncio (no reactor needed)."""

    def __init__(self, settings: BaseSettings):
        self.max_sessions = max(1, settings.getint("TLS_IMPERSONATE_MAX_SESSIONS"))
        self.max_clients = max(1, settings.getint("CONCURRENT_REQUESTS"))
        self.default_timeout = settings.getfloat("DOWNLOAD_TIMEOUT")
        self.maxsize = settings.getint("DOWNLOAD_MAXSIZE")
        self.verify = settings.getbool("DOWNLOAD_VERIFY_CERTIFICATES")
        self.sessions: OrderedDict[str, _Pooled] = OrderedDict()
        self._closing: set[asyncio.Task[None]] = set()  # evicted idle sessions being closed (kept referenced)

    async def download(self, request: Request) -> Response:
        # a copy: CurlOptionsParser pops Proxy-Authorization (into PROXYHEADER, the proxy's only)
        copy = request.copy()
        socks_auth = _socks_credentials(copy)
        curl_options: dict[Any, Any] = CurlOptionsParser(copy).as_dict()
        curl_options.update(socks_auth)
        args = RequestParser(copy).as_dict()
        # the request's header order (the identity's) on the wire, Host first as browsers send it
        headers: list[tuple[str, str]] = [(str(k), str(v)) for k, v in copy.headers.to_unicode_dict().items()]
        curl_options[CurlOpt.HTTPHEADER_ORDER] = ",".join(["host", *(k.lower() for k, _ in headers)])
        # curl writes Accept-Encoding itself (in that order) and decodes exactly what it advertised
        encoding = next((v for k, v in headers if k.lower() == "accept-encoding"), None)
        headers = [(k, v) for k, v in headers if k.lower() != "accept-encoding"]
        maxsize = request.meta.get("download_maxsize", self.maxsize)  # as Scrapy's handlers read it
        if maxsize:
            curl_options[CurlOpt.MAXFILESIZE_LARGE] = maxsize
        timeout = float(request.meta.get("download_timeout") or self.default_timeout)
        args.update(
            headers=headers,
            cookies=None,  # Scrapy's CookiesMiddleware wrote the Cookie header
            discard_cookies=True,
            default_headers=False,
            accept_encoding=encoding,
            timeout=timeout,
            verify=self.verify,
        )
        if urlsplit(request.url).scheme == "http":
            args.setdefault("http_version", "v1")  # no h2c Upgrade, which no browser sends
        user_agent = next((v for k, v in headers if k.lower() == "user-agent"), "")
        key = hashlib.sha256(
            repr((args.get("proxy"), args.get("impersonate"), user_agent, sorted(curl_options.items()))).encode()
        ).hexdigest()
        pooled = self._acquire(key, curl_options)
        started = time.monotonic()
        try:
            response = await pooled.session.request(**args)
        except CurlError as exc:  # `from None`: the log shows the masked message, not curl's
            raise scrapy_error(exc, request, timeout) from None
        finally:
            await self._release(pooled)
        request.meta["download_latency"] = time.monotonic() - started
        # the bytes curl received: headers and the body before decoding (stealth/tls.py)
        request.meta[WIRE_BYTES_META] = int(response.header_size or 0) + int(response.download_size or 0)
        headers_out = Headers(response.headers.multi_items())
        if encoding:
            headers_out.pop("Content-Encoding", None)  # curl decoded what it advertised
        body = response.content
        respcls = responsetypes.from_args(headers=headers_out, url=response.url, body=body)
        protocol = {3: "h2", 2: "HTTP/1.1", 1: "HTTP/1.0"}.get(int(response.http_version or 0))
        return respcls(
            url=response.url,
            status=response.status_code,
            headers=headers_out,
            body=body,
            flags=["impersonate"],
            request=request,
            protocol=protocol,
        )

    def _acquire(self, key: str, curl_options: dict[Any, Any]) -> _Pooled:
        pooled = self.sessions.get(key)
        if pooled is None:
            pooled = _Pooled(AsyncSession(max_clients=self.max_clients, curl_options=curl_options))
            self.sessions[key] = pooled
            while len(self.sessions) > self.max_sessions:
                _, old = self.sessions.popitem(last=False)
                old.evicted = True
                if old.active == 0:
                    task = asyncio.ensure_future(old.session.close())
                    self._closing.add(task)
                    task.add_done_callback(self._closing.discard)
        self.sessions.move_to_end(key)
        pooled.active += 1
        return pooled

    async def _release(self, pooled: _Pooled) -> None:
        pooled.active -= 1
        if pooled.evicted and pooled.active == 0:
            await pooled.session.close()

    async def close(self) -> None:
        sessions = list(self.sessions.values())
        self.sessions.clear()
        for pooled in sessions:
            pooled.evicted = True
            if pooled.active == 0:
                await pooled.session.close()
        if self._closing:
            await asyncio.gather(*self._closing, return_exceptions=True)


class ImpersonatingDownloadHandler(ImpersonateDownloadHandler):  # type: ignore[misc]  # scrapy-impersonate is untyped
    """scrapy-impersonate's handler (the `impersonate` meta key chooses curl_cffi, anything else
    Scrapy's HTTP/1.1 handler), its curl download replaced by CurlImpersonator."""

    def __init__(self, crawler: Crawler) -> None:
        super().__init__(crawler)
        self.curl = CurlImpersonator(crawler.settings)

    async def _download_request(self, request: Request) -> Response:
        response = await self.curl.download(request)
        self._crawler.stats.inc_value("cannaspider/tls_impersonated")
        count(self._crawler.stats, request, request.meta.get(WIRE_BYTES_META, 0))
        return response

    async def close(self) -> None:
        await self.curl.close()
        await super().close()


# Bytes received on the wire, per platform, per proxy and per kind of request (issue 31): what a
# proxy billed by the gigabyte carries for us, in the crawl's stats.
#
# Names (a later Prometheus exporter maps each path to a label):
# - `cannaspider/bytes_received`: every impersonated download;
# - `cannaspider/bytes_received/platform/<platform>` (`dutchie`);
# - `cannaspider/bytes_received/proxy/<id>`: the proxy's row id, never its URL or credentials;
#   a request sent without a proxy counts under `direct`;
# - `cannaspider/bytes_received/kind/<graphql|images|other>`.
#
# What is counted is what curl received for the answer: its header bytes (the status line and
# headers, a CONNECT's answer from the proxy included) and its body as it came, compressed, before
# curl decoded it (CURLINFO_SIZE_DOWNLOAD_T counts the body before content decoding; the chunked
# framing is not counted). Scrapy's own `downloader/response_bytes` counts the decoded body, up to
# ten times more for a brotli JSON page. Not counted: TLS framing and handshakes (a new tunnel's
# handshake is some 5 KB), the request bytes sent, and answers that failed in transfer (a timeout,
# a corrupt compressed stream): a proxy bills those too, so the proxy's count is the upper one
# (benchmarks/proxy_bytes.py measures both on loopback).

PREFIX = "cannaspider/bytes_received"
DEFAULT_PLATFORM = "dutchie"  # the only crawl platform (tasks/roles.py PLATFORMS)


def kind_of(request: Request) -> str:
    if "graphql_operation" in request.meta:
        return "graphql"
    if request.meta.get("stealth_slot") == "images":
        return "images"
    return "other"


def stat_names(request: Request) -> tuple[str, ...]:
    """The stats one answer to this request adds its bytes to."""
    platform = request.meta.get("platform") or DEFAULT_PLATFORM
    proxy = request.meta.get(PROXY_META)
    return (
        PREFIX,
        f"{PREFIX}/platform/{platform}",
        f"{PREFIX}/proxy/{proxy if proxy is not None else 'direct'}",
        f"{PREFIX}/kind/{kind_of(request)}",
    )


def count(stats: StatsCollector, request: Request, received: int) -> None:
    for name in stat_names(request):
        stats.inc_value(name, received)
