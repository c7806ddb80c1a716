"""Re-probing the proxies that their own failures deactivated, from `scrapy schedule`'s loop
(commands/schedule.py, after each tick: `Prober.reprobe_due`), so that a pool heals by itself
(docs/stealth.md, "Re-probing").

A proxy deactivated by STEALTH_PROXY_MAX_FAILURES failure events has `deactivated_at` and a
`next_probe_at` PROXY_REPROBE_AFTER_S later (stealth/proxies.py); one an operator disabled has
neither and is never probed. When a probe is due, the scheduler takes the proxy (pushing its
`next_probe_at` past the probe's timeout, so schedulers on several machines do not probe it
twice), sends one request through it, and:
- passed: the proxy is active again with an empty window of recent attempts (its lifetime counts
  stay; the crawls' pools read it within
  STEALTH_PROXY_REFRESH_S; a queue waiting for a proxy goes on);
- failed: `probe_failures` + 1, the next probe PROXY_REPROBE_AFTER_S · 2^probe_failures later
  (at most PROXY_REPROBE_BACKOFF_CAP_S), the reason in `last_error`.

The probe is the crawl's own harmless request: a ConsumerDispensaries lookup of a store that does
not exist (as `scrapy proxies check`), to PROXY_PROBE_URL (empty: DUTCHIE_GRAPHQL_URL), in a
browser identity with its TLS handshake (curl_cffi, stealth/tls.py), the credentials in
Proxy-Authorization to the proxy only (Scrapy's HttpProxyMiddleware). It passes when the policy
sees the API's answer (stealth/policy.py) and the answer has GraphQL data. Reasons are masked
(`user:***`): no credential reaches the output or the table.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

import psycopg
from scrapy.downloadermiddlewares.httpproxy import HttpProxyMiddleware
from scrapy.settings import BaseSettings

from cannaspider import platforms
from cannaspider.platforms.interface import PlatformFailure
from cannaspider.stealth.identity import IdentityFactory
from cannaspider.stealth.policy import BlockPolicy
from cannaspider.stealth.proxies import ProxyRecord, record_of
from cannaspider.stealth.routing import wear
from cannaspider.stealth.tls import CurlImpersonator, impersonate_target, mask

TAKE_DUE = """
UPDATE proxies SET next_probe_at = now() + %(hold_s)s * interval '1 second'
 WHERE id IN (SELECT id FROM proxies
               WHERE NOT is_active AND deactivated_at IS NOT NULL AND next_probe_at <= now()
               ORDER BY next_probe_at, id
               LIMIT %(batch)s
               FOR UPDATE SKIP LOCKED)
RETURNING id, protocol, host, port, username, password, failure_count, recent_attempts
"""
# both only while the proxy is still one deactivated by its failures: an operator's add, enable
# or disable during the probe wins
PASSED = """
UPDATE proxies SET is_active = true, recent_attempts = '', deactivated_at = NULL, next_probe_at = NULL,
       probe_failures = 0, success_count = COALESCE(success_count, 0) + 1, last_used_at = now()
 WHERE id = %(id)s AND NOT is_active AND deactivated_at IS NOT NULL
"""
FAILED = """
UPDATE proxies SET probe_failures = probe_failures + 1, last_failure_at = now(), last_used_at = now(),
       last_error = %(error)s,
       next_probe_at = now() + least(%(cap_s)s, %(after_s)s * power(2, probe_failures + 1)) * interval '1 second'
 WHERE id = %(id)s AND NOT is_active AND deactivated_at IS NOT NULL
RETURNING next_probe_at - now()
"""


@dataclass(frozen=True)
class ProbeConfig:
    enabled: bool
    after_s: float
    cap_s: float
    batch: int
    url: str
    timeout_s: float

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> ProbeConfig:
        return cls(
            enabled=settings.getbool("PROXY_REPROBE_ENABLED"),
            after_s=settings.getfloat("PROXY_REPROBE_AFTER_S"),
            cap_s=settings.getfloat("PROXY_REPROBE_BACKOFF_CAP_S"),
            batch=settings.getint("PROXY_REPROBE_BATCH"),
            url=settings.get("PROXY_PROBE_URL") or settings.get("DUTCHIE_GRAPHQL_URL"),
            timeout_s=settings.getfloat("PROXY_PROBE_TIMEOUT_S"),
        )


@dataclass(frozen=True)
class ProbeResult:
    proxy: ProxyRecord
    error: str | None  # None: passed
    ms: float
    next_in_s: float | None = None  # failed: when the next probe is due

    def describe(self) -> str:
        """One line for the scheduler's output (the proxy masked)."""
        head = f"proxy #{self.proxy.id} {self.proxy.masked}: re-probe"
        if self.error is None:
            return f"{head} passed ({self.ms:.0f} ms): active again"
        after = f"; next in {self.next_in_s:.0f} s" if self.next_in_s is not None else ""
        return f"{head} failed: {self.error}{after}"


class Prober:
    def __init__(self, settings: BaseSettings):
        self.settings = settings
        self.config = ProbeConfig.from_settings(settings)
        self.policy = BlockPolicy()
        self._identities: IdentityFactory | None = None  # browserforge loads in a moment: only once a probe is due

    async def reprobe_due(self, conn: psycopg.AsyncConnection) -> list[ProbeResult]:
        """Probe the deactivated proxies that are due, at once; record each outcome (active again, or
        the next probe later). Outside the schedule's tick transaction: a probe takes network time,
        up to PROXY_PROBE_TIMEOUT_S."""
        if not self.config.enabled:
            return []
        due = await self.take_due(conn)
        if not due:
            return []
        downloader = CurlImpersonator(self.settings)
        try:
            results = await asyncio.gather(*(self.probe(record, downloader) for record in due))
        finally:
            await downloader.close()
        return [await self.record(conn, result) for result in results]

    async def take_due(self, conn: psycopg.AsyncConnection) -> list[ProxyRecord]:
        hold_s = self.config.timeout_s * 2 + 60
        rows = await (await conn.execute(TAKE_DUE, {"hold_s": hold_s, "batch": self.config.batch})).fetchall()
        return [record_of(r) for r in rows]

    async def probe(self, record: ProxyRecord, downloader: CurlImpersonator) -> ProbeResult:
        started = time.monotonic()
        try:
            error = await self._send(record, downloader)
        except Exception as exc:  # noqa: BLE001 - any failure of the proxy is the probe's answer
            error = f"{exc.__class__.__name__}: {mask(str(exc))}"
        return ProbeResult(record, error, (time.monotonic() - started) * 1000)

    async def _send(self, record: ProxyRecord, downloader: CurlImpersonator) -> str | None:
        platform = platforms.build(platforms.DEFAULT, self.settings)
        request = platform.probe_request(
            self.config.url, meta={"proxy": record.url, "download_timeout": self.config.timeout_s}
        )
        if self._identities is None:
            self._identities = IdentityFactory()
        identity = self._identities.draw()
        wear(request, identity)
        request.meta["impersonate"] = impersonate_target(identity)
        HttpProxyMiddleware().process_request(request)  # the credentials: Proxy-Authorization, to the proxy only
        response = await downloader.download(request)
        verdict = self.policy.judge(request, response)
        if verdict is not None:
            return verdict.reason
        result = platform.classify(response)
        return result.message if isinstance(result, PlatformFailure) else None

    async def record(self, conn: psycopg.AsyncConnection, result: ProbeResult) -> ProbeResult:
        if result.error is None:
            await conn.execute(PASSED, {"id": result.proxy.id})
            return result
        params = {
            "id": result.proxy.id,
            "error": f"re-probe: {result.error}"[:500],
            "after_s": self.config.after_s,
            "cap_s": self.config.cap_s,
        }
        row = await (await conn.execute(FAILED, params)).fetchone()
        return ProbeResult(result.proxy, result.error, result.ms, row[0].total_seconds() if row else None)
