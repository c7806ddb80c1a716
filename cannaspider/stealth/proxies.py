"""A proxy as the `proxies` table keeps it: its row as a value, and its health.

Rows as values: parsing what an operator types, the URL Scrapy's
HttpProxyMiddleware is given (credentials percent-encoded inside it) and the masked form that is
the only one ever printed or logged.

A proxy is known by its row id, never by its URL string: two rows may share host:port with
different credentials (one gateway, several sessions), and each keeps its own health.

Health (HealthBatch, FLUSH_HEALTH): what happened to one proxy since the last write, added to its
row by one UPDATE, so that health costs one statement per proxy per batch, never one per request.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from scrapy.settings import BaseSettings

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
    recent_attempts: str = ""  # its last attempts when loaded, S or F (stealth/proxies.py)

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


# Proxy health as the `proxies` table keeps it: what happened to one proxy since the last write
# (HealthBatch) and the one UPDATE that adds it to its row (FLUSH_HEALTH), so that health costs one
# statement per proxy per batch, never one per request. The crawl's pool (stealth/pool.py) writes
# its batches every STEALTH_HEALTH_FLUSH_S and at close; `scrapy proxies check`
# (cannaspider/commands/proxies.py) writes an inactive proxy's check with the same statement, so a
# check and a crawl rate a proxy alike.
#
# `success_count` and `failure_count` (failure *events*) are lifetime counters. The deactivation
# reads `recent_attempts` (migration 027): the proxy's last STEALTH_PROXY_ATTEMPT_WINDOW attempts,
# oldest first, `S` a success and `F` a failure event. The batch's attempts are appended in order
# (so the crawls sharing a proxy add theirs to one window), and the update that leaves
# STEALTH_PROXY_MAX_FAILURES `F` in the window deactivates the proxy (`is_active = false`,
# `deactivated_at` set, `next_probe_at` PROXY_REPROBE_AFTER_S later: `scrapy schedule` re-probes it,
# stealth/probe.py). A row already inactive stays so: enabling is an operator's (docs/stealth.md,
# "Failures").

SUCCESS, FAILURE = "S", "F"

FLUSH_HEALTH = """
UPDATE proxies SET
    success_count = COALESCE(success_count, 0) + %(successes)s,
    avg_response_time_ms = CASE WHEN %(successes)s > 0
        THEN round((COALESCE(avg_response_time_ms, 0)::numeric * COALESCE(success_count, 0) + %(total_ms)s)
                   / (COALESCE(success_count, 0) + %(successes)s))::integer
        ELSE avg_response_time_ms END,
    last_used_at = GREATEST(last_used_at, %(last_used_at)s),
    failure_count = COALESCE(failure_count, 0) + %(failures)s,
    recent_attempts = {window},
    last_failure_at = COALESCE(%(last_failure_at)s, last_failure_at),
    last_error = COALESCE(%(last_error)s, last_error),
    is_active = is_active AND NOT {deactivates},
    -- deactivated by its failures (not by an operator): re-probed from then on (stealth/probe.py)
    deactivated_at = CASE WHEN is_active AND {deactivates} THEN now() ELSE deactivated_at END,
    next_probe_at = CASE WHEN is_active AND {deactivates}
                         THEN now() + %(reprobe_after_s)s * interval '1 second' ELSE next_probe_at END,
    probe_failures = CASE WHEN is_active AND {deactivates} THEN 0 ELSE probe_failures END
WHERE id = %(id)s
"""
_WINDOW = "right(recent_attempts || %(attempts)s, %(window)s)"
FLUSH_HEALTH = FLUSH_HEALTH.format(
    window=_WINDOW,
    # a failure in this batch is needed: a batch of successes never deactivates (a row that the
    # rule was changed under, a smaller window, waits for its next failure)
    deactivates=f"(%(failures)s > 0 AND length(replace({_WINDOW}, 'S', '')) >= %(max_failures)s)",
)


@dataclass
class HealthBatch:
    """What happened to one proxy since the last flush."""

    successes: int = 0
    total_ms: float = 0.0
    failures: int = 0  # failure events
    attempts: str = ""  # its attempts in order, S or F (at most the window's last ones)
    last_used_at: datetime | None = None
    last_failure_at: datetime | None = None
    last_error: str | None = None


@dataclass(frozen=True)
class FailureRule:
    """When a proxy is deactivated: `max_failures` failure events among its last `window` attempts."""

    max_failures: int
    window: int

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> FailureRule:
        return cls(settings.getint("STEALTH_PROXY_MAX_FAILURES"), settings.getint("STEALTH_PROXY_ATTEMPT_WINDOW"))

    def deactivates(self, attempts: str) -> bool:
        return attempts[-self.window :].count(FAILURE) >= self.max_failures


def health_params(proxy_id: int, h: HealthBatch, rule: FailureRule, reprobe_after_s: float) -> dict[str, object]:
    """FLUSH_HEALTH's parameters for one proxy's batch."""
    return {
        "id": proxy_id,
        "successes": h.successes,
        "total_ms": h.total_ms,
        "last_used_at": h.last_used_at,
        "failures": h.failures,
        "attempts": h.attempts[-rule.window :],
        "window": rule.window,
        "last_failure_at": h.last_failure_at,
        "last_error": h.last_error,
        "max_failures": rule.max_failures,
        "reprobe_after_s": reprobe_after_s,
    }


def merge_unwritten(pending: dict[int, HealthBatch], unwritten: dict[int, HealthBatch]) -> None:
    """Put back a batch whose write was rolled back into `pending`, which holds what came since:
    counts add up, the older batch's attempts come first, the newer batch's times and error win."""
    for pid, old in unwritten.items():
        new = pending.get(pid)
        if new is None:
            pending[pid] = old
            continue
        new.successes += old.successes
        new.total_ms += old.total_ms
        new.failures += old.failures
        new.attempts = old.attempts + new.attempts
        new.last_used_at = new.last_used_at or old.last_used_at
        new.last_failure_at = new.last_failure_at or old.last_failure_at
        new.last_error = new.last_error or old.last_error
