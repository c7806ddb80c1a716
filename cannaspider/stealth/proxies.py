"""Rows of the `proxies` table as values: parsing what an operator types, the URL Scrapy's
HttpProxyMiddleware is given (credentials percent-encoded inside it) and the masked form that is
the only one ever printed or logged.

A proxy is known by its row id, never by its URL string: two rows may share host:port with
different credentials (one gateway, several sessions), and each keeps its own health.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote, urlsplit

# Every proxied request is curl_cffi's (stealth/tls.py) or Chromium's (browser pages), and both
# speak these. socks5 lets curl resolve the target's name itself, socks5h leaves it to the proxy
# (Chromium always does: stealth/browser.py). docs/stealth.md, "Managing the pool".
SUPPORTED_PROTOCOLS = ("http", "https", "socks5", "socks5h")
SOCKS_PROTOCOLS = ("socks5", "socks5h")
REFUSED_PROTOCOLS = {
    "socks4": "socks4 proxies are not supported: no password and no remote name resolution (use socks5)",
    "socks4a": "socks4 proxies are not supported: no password and no remote name resolution (use socks5)",
}

# the pool every Dutchie request takes; product images take IMAGES_PROXY_POOL's (migration 030)
CRAWL_POOL = "crawl"

ACTIVE_PROXIES = """
SELECT id, protocol, host, port, username, password, failure_count, recent_attempts
  FROM proxies
 WHERE is_active AND pool = %s
 ORDER BY id
"""


class ProxyInputError(ValueError):
    """A proxy as typed by an operator cannot be used. str() is one line without the password."""


@dataclass(frozen=True)
class ProxyRecord:
    id: int
    protocol: str
    host: str
    port: int
    username: str | None = None
    password: str | None = None
    failure_count: int = 0  # failure events in its lifetime, when loaded
    recent_attempts: str = ""  # its last attempts when loaded, S or F (stealth/proxy_health.py)

    @property
    def url(self) -> str:
        """The URL for `request.meta["proxy"]`, credentials included (HttpProxyMiddleware turns
        them into Proxy-Authorization and strips them from the URL)."""
        if self.username is None:
            return f"{self.protocol}://{self.host}:{self.port}"
        auth = quote(self.username, safe="") + ":" + quote(self.password or "", safe="")
        return f"{self.protocol}://{auth}@{self.host}:{self.port}"

    @property
    def masked(self) -> str:
        """For logs and listings: `http://user:***@host:port`."""
        auth = f"{self.username}:***@" if self.username is not None else ""
        return f"{self.protocol}://{auth}{self.host}:{self.port}"

    @property
    def browser_refusal(self) -> str | None:
        """Why Chromium cannot use this proxy (None: it can): it does no SOCKS5 with a password,
        and Playwright refuses such a context."""
        if self.protocol in SOCKS_PROTOCOLS and self.username is not None:
            return "Chromium does not support socks5 proxies with a password"
        return None

    def __repr__(self) -> str:  # a record in a traceback or a log never shows its password
        return f"<proxy #{self.id} {self.masked}>"

    __str__ = __repr__


@dataclass(frozen=True)
class ProxySpec:
    """A proxy to add: what `parse_proxy_url` read."""

    protocol: str
    host: str
    port: int
    username: str | None
    password: str | None

    @property
    def masked(self) -> str:
        return ProxyRecord(0, self.protocol, self.host, self.port, self.username, self.password).masked


def parse_proxy_url(text: str) -> ProxySpec:
    """`[protocol://][user:password@]host:port` → ProxySpec, or ProxyInputError saying why."""
    raw = text.strip()
    if not raw:
        raise ProxyInputError("empty proxy")
    if "://" not in raw:
        raw = "http://" + raw
    parts = urlsplit(raw)
    protocol = parts.scheme.lower()
    shown = f"{protocol}://{parts.hostname or '?'}"
    if protocol in REFUSED_PROTOCOLS:
        raise ProxyInputError(f"{shown}: {REFUSED_PROTOCOLS[protocol]}")
    if protocol not in SUPPORTED_PROTOCOLS:
        raise ProxyInputError(f"{shown}: unknown proxy protocol {protocol!r} (use http, https, socks5 or socks5h)")
    try:
        port = parts.port
    except ValueError:
        raise ProxyInputError(f"{shown}: the port is not a number within 1-65535") from None
    if not parts.hostname:
        raise ProxyInputError(f"{text.split('@')[-1].strip()!r}: no host")
    if port is None:
        raise ProxyInputError(f"{shown}: no port (write host:port)")
    if parts.path not in ("", "/") or parts.query:
        raise ProxyInputError(f"{shown}:{port}: a proxy is host:port, without a path")
    username = unquote(parts.username) if parts.username is not None else None
    password = unquote(parts.password) if parts.password is not None else None
    if password is not None and username is None:
        raise ProxyInputError(f"{shown}:{port}: a password without a user name")
    if username is not None and len(username) > 100 or password is not None and len(password) > 100:
        raise ProxyInputError(f"{shown}:{port}: user name and password are limited to 100 characters")
    return ProxySpec(protocol, parts.hostname, port, username, password)


def record_of(row: tuple[Any, ...]) -> ProxyRecord:
    """A record from the columns of ACTIVE_PROXIES, in its order."""
    pid, protocol, host, port, username, password, failures, recent = row
    return ProxyRecord(pid, (protocol or "http").lower(), host, port, username, password, failures or 0, recent or "")
