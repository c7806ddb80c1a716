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

# socks5 is refused: Scrapy's HTTP download handlers speak HTTP CONNECT to a proxy, not SOCKS.
SUPPORTED_PROTOCOLS = ("http", "https")
REFUSED_PROTOCOLS = {
    "socks5": "socks5 proxies are not supported: Scrapy's download handlers only speak HTTP(S) to a proxy",
    "socks5h": "socks5 proxies are not supported: Scrapy's download handlers only speak HTTP(S) to a proxy",
    "socks4": "socks4 proxies are not supported: Scrapy's download handlers only speak HTTP(S) to a proxy",
}

ACTIVE_PROXIES = """
SELECT id, protocol, host, port, username, password, failure_count, recent_attempts
  FROM proxies
 WHERE is_active
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
        raise ProxyInputError(f"{shown}: unknown proxy protocol {protocol!r} (use http or https)")
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
