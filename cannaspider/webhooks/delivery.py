"""Delivering event webhooks: one pass matches what happened (cannaspider/webhooks/match.py), then
posts due deliveries (alert_deliveries) to their webhooks, signed, at least once; `follow` repeats
the pass every ALERTS_TICK_S (`scrapy schedule`, as a task of its own beside the ticks, and
`scrapy webhooks send --follow`). Crawls only write the events it reads: nothing here makes a crawl
wait.

A pass claims up to ALERTS_BATCH due deliveries (FOR UPDATE SKIP LOCKED: two senders never post
the same one at once; a claim pushes next_attempt_at past the request's timeout, so a sender that
dies mid-post leaves the delivery due again, not lost), posts them concurrently, and records each
outcome: a 2xx answer marks it delivered; anything else (a refused connection, a timeout, a 500,
a redirect, which is never followed, a host whose address is not public: cannaspider/webhooks/posting.py)
keeps it, with the status and a reason free of URL and secret, and makes it due again after
ALERTS_BACKOFF_S · 2^(attempts-1), capped at ALERTS_BACKOFF_MAX_S, jittered up to +20 %
(cannaspider/backoff.py), up to ALERTS_MAX_ATTEMPTS
attempts (then it stays in the table, undelivered, for an operator: `scrapy webhooks list`).

Without ALERTS_WEBHOOK_SECRET nothing is sent (an unsigned alert could not be trusted): the
deliveries wait, and the pass says so once. The secret and the webhook URLs never reach a log
line, a stored error or an exception message.

The signature, twice: Standard Webhooks' headers (`webhook-id`, `webhook-timestamp`,
`webhook-signature: v1,<base64>`, standard.py), which a stock verifier checks, and our earlier
HMAC-SHA256 over "<timestamp>.<body>" with the shared secret (ALERTS_WEBHOOK_SECRET), sent as
`X-Cannaspider-Signature: sha256=<hex>` beside `X-Cannaspider-Timestamp` (Unix seconds), for the
receivers written against it. A receiver recomputes either over the raw body, compares in constant
time and refuses an old timestamp (a replay): the timestamp is signed with the body.

At most ALERTS_PER_HOST_CONCURRENCY posts of a pass are in flight to one host at a time (a batch of
100 to one receiver had 47 time out): the others wait their turn, and the claim (pass_bound_s)
covers the turns.

A pass is bounded (WebhookSender.pass_bound_s, past its posts' timeout): a webhook that hangs or a
database that stalls cuts the pass short; the deliveries it had claimed become due again when their
claim runs out, so the cut loses nothing. A pass that fails (the database restarts) is one line,
and the loop tries again a tick later on a new connection.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import psycopg
from scrapy.exceptions import UsageError
from scrapy.settings import BaseSettings

from cannaspider import env
from cannaspider.backoff import Backoff
from cannaspider.db.errors import first_line
from cannaspider.webhooks import formats, posting, standard
from cannaspider.webhooks.match import match

logger = logging.getLogger(__name__)

# a retry comes back after its doubled wait and up to a fifth more: deliveries that failed together
# (a receiver down) spread out
DELIVERY_JITTER = (1.0, 1.2)

CLAIM = """
UPDATE alert_deliveries d SET attempts = d.attempts + 1, next_attempt_at = now() + make_interval(secs => %(lease)s)
  FROM alert_subscriptions s
 WHERE s.id = d.subscription_id AND d.id IN (
       SELECT id FROM alert_deliveries
        WHERE delivered_at IS NULL AND next_attempt_at <= now() AND attempts < %(max_attempts)s
        ORDER BY next_attempt_at, id LIMIT %(batch)s FOR UPDATE SKIP LOCKED)
RETURNING d.id, d.subscription_id, d.key, d.payload, d.attempts, s.webhook_url
"""
DELIVERED = "UPDATE alert_deliveries SET delivered_at = now(), last_status = %s, last_error = NULL WHERE id = %s"
FAILED = """
UPDATE alert_deliveries SET last_status = %s, last_error = %s, next_attempt_at = now() + make_interval(secs => %s)
 WHERE id = %s
"""


@dataclass(frozen=True)
class Claimed:
    id: int
    subscription_id: int
    key: str
    payload: dict[str, Any]
    attempts: int
    url: str


@dataclass(frozen=True)
class Outcome:
    delivery_id: int
    status: int | None  # the receiver's HTTP status; None when it never answered
    error: str | None  # None: delivered


@dataclass(frozen=True)
class PassResult:
    delivered: int
    failed: int


class WebhookSender:
    def __init__(
        self,
        secret: str | None,
        *,
        timeout_s: float,
        batch: int,
        max_attempts: int,
        backoff: Backoff,
        allow_private: bool,
        per_host: int = 4,
        fmt: str = "json",
        digest: bool = False,
    ) -> None:
        if fmt not in formats.FORMATS:
            raise UsageError(f"ALERTS_FORMAT must be one of {', '.join(formats.FORMATS)}, got {fmt!r}")
        self._secret = secret
        self.per_host = max(per_host, 1)
        self.fmt = fmt
        self.digest = digest
        self.timeout_s = timeout_s
        self.batch = batch
        self.max_attempts = max_attempts
        self.backoff = backoff
        self.allow_private = allow_private
        self._warned = False

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> WebhookSender:
        return cls(
            env.configured(settings, "ALERTS_WEBHOOK_SECRET"),
            timeout_s=settings.getfloat("ALERTS_TIMEOUT_S"),
            batch=settings.getint("ALERTS_BATCH"),
            max_attempts=settings.getint("ALERTS_MAX_ATTEMPTS"),
            backoff=Backoff.from_settings(settings, "ALERTS_BACKOFF_S", "ALERTS_BACKOFF_MAX_S", DELIVERY_JITTER),
            allow_private=settings.getbool("WEBHOOK_ALLOW_PRIVATE"),
            per_host=settings.getint("ALERTS_PER_HOST_CONCURRENCY"),
            fmt=str(settings.get("ALERTS_FORMAT")),
            digest=settings.getbool("ALERTS_DIGEST"),
        )

    @property
    def pass_bound_s(self) -> float:
        """How long a claim holds, and so the longest a pass may take (run.follow cuts it there):
        past the posts' own timeout, one after another in turns of `per_host` when a whole batch goes to
        one host, so a sender that died or was cut leaves its claims due again."""
        return self.timeout_s * (math.ceil(self.batch / self.per_host) + 1) + 30

    def __repr__(self) -> str:  # never the secret
        return f"WebhookSender(secret={'set' if self._secret else 'unset'}, batch={self.batch})"

    @staticmethod
    def document(claimed: Claimed) -> dict[str, Any]:
        return {
            "delivery_id": claimed.id,
            "subscription_id": claimed.subscription_id,
            "key": claimed.key,
            **claimed.payload,
        }

    def body(self, group: list[Claimed]) -> bytes:
        docs = [self.document(c) for c in group]
        return formats.body(docs, self.fmt, digest=self.digest, subscription_id=group[0].subscription_id)

    def headers(self, group: list[Claimed], body: bytes, now: int) -> dict[str, str]:
        assert self._secret is not None  # send() checks it first
        ids = [str(c.id) for c in group]
        # the message's id is the same on every retry of the same deliveries
        msg_id = (
            f"msg_{ids[0]}" if len(ids) == 1 else "digest_" + hashlib.sha256(",".join(ids).encode()).hexdigest()[:32]
        )
        return {
            "Content-Type": "application/json",
            "User-Agent": "cannaspider-alerts/1",
            DELIVERY: ",".join(ids),
            TIMESTAMP: str(now),
            SIGNATURE: sign(self._secret, now, body),
            **standard.headers(self._secret, msg_id, now, body),
        }

    async def _post(
        self, client: aiohttp.ClientSession, group: list[Claimed], turn: asyncio.Semaphore
    ) -> list[Outcome]:
        async with turn:  # signed when its turn comes: the timestamp is the attempt's
            body = self.body(group)
            headers = self.headers(group, body, int(time.time()))
            answer = await posting.post(client, group[0].url, body, headers, allow_private=self.allow_private)
        return [Outcome(c.id, answer.status, answer.error) for c in group]

    def groups(self, claimed: list[Claimed]) -> list[list[Claimed]]:
        """One POST each: a delivery alone, or with the digest a subscription's deliveries together."""
        if not self.digest:
            return [[c] for c in claimed]
        by_subscription: dict[int, list[Claimed]] = {}
        for c in claimed:
            by_subscription.setdefault(c.subscription_id, []).append(c)
        return list(by_subscription.values())

    async def send(self, conn: psycopg.AsyncConnection[Any]) -> PassResult:
        """One pass over the due deliveries; `conn` in autocommit."""
        if not self._secret:
            if not self._warned:
                logger.warning("alerts: ALERTS_WEBHOOK_SECRET is not set: deliveries wait, nothing is sent unsigned")
                self._warned = True
            return PassResult(0, 0)
        cur = await conn.execute(
            CLAIM, {"lease": self.pass_bound_s, "max_attempts": self.max_attempts, "batch": self.batch}
        )
        claimed = [Claimed(*row) for row in await cur.fetchall()]
        if not claimed:
            return PassResult(0, 0)
        turns: dict[str, asyncio.Semaphore] = {}
        for c in claimed:
            turns.setdefault(host_of(c.url), asyncio.Semaphore(self.per_host))
        async with posting.session(self.timeout_s, allow_private=self.allow_private) as client:
            posted = await asyncio.gather(
                *(self._post(client, g, turns[host_of(g[0].url)]) for g in self.groups(claimed))
            )
        outcomes = [o for group in posted for o in group]
        attempts = {c.id: c.attempts for c in claimed}
        failed = 0
        async with conn.transaction():
            for o in outcomes:
                if o.error is None:
                    await conn.execute(DELIVERED, (o.status, o.delivery_id))
                else:
                    failed += 1
                    await conn.execute(
                        FAILED, (o.status, o.error, self.backoff.delay(attempts[o.delivery_id]), o.delivery_id)
                    )
        if failed:
            logger.warning("alerts: %d of %d deliveries failed; they are retried with backoff", failed, len(claimed))
        return PassResult(len(claimed) - failed, failed)


SIGNATURE = "X-Cannaspider-Signature"
TIMESTAMP = "X-Cannaspider-Timestamp"
DELIVERY = "X-Cannaspider-Delivery"  # the delivery's id: the same on every retry (at least once: dedupe on it)


def host_of(url: str) -> str:
    """What ALERTS_PER_HOST_CONCURRENCY counts by: the host and port, as the connection goes."""
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:  # no port it could connect to: posting refuses it; it counts alone
        return url
    return f"{(parts.hostname or '').lower()}:{port or ''}"


def sign(secret: str, timestamp: int, body: bytes) -> str:
    digest = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return f"sha256={digest}"


def verify(secret: str, timestamp: int, body: bytes, signature: str) -> bool:
    """What a receiver does (and the tests' receiver): constant-time comparison."""
    return hmac.compare_digest(sign(secret, timestamp, body), signature)


@dataclass(frozen=True)
class WebhookPass:
    matched: int
    delivered: int
    failed: int

    def describe(self) -> str:
        return f"alerts: {self.matched} matched, {self.delivered} delivered, {self.failed} to retry"


async def run_once(
    conn: psycopg.AsyncConnection[Any], settings: BaseSettings, sender: WebhookSender | None = None
) -> WebhookPass:
    """`conn` in autocommit; pass the same sender on every call of a loop (it warns once)."""
    matched = await match(conn, settings.getfloat("ALERTS_MATCH_LOOKBACK_S"))
    sent = await (sender or WebhookSender.from_settings(settings)).send(conn)
    return WebhookPass(matched, sent.delivered, sent.failed)


async def follow(
    url: str, settings: BaseSettings, stop: asyncio.Event, report: Callable[[WebhookPass | str], None]
) -> None:
    """A pass every ALERTS_TICK_S until `stop` is set (the first pass comes even so); `report`
    gets each pass, or a failure's line."""
    sender = WebhookSender.from_settings(settings)
    every = settings.getfloat("ALERTS_TICK_S")
    conn: psycopg.AsyncConnection[Any] | None = None
    try:
        while True:
            try:
                if conn is None:
                    conn = await psycopg.AsyncConnection.connect(url, autocommit=True)
                report(await asyncio.wait_for(run_once(conn, settings, sender), sender.pass_bound_s))
            except (psycopg.Error, OSError, TimeoutError) as exc:
                # a pass cut short leaves its connection mid-statement: the next pass opens another
                why = f"no end within {sender.pass_bound_s:g} s" if isinstance(exc, TimeoutError) else first_line(exc)
                report(f"alerts: pass failed ({why}); again in {every:g} s")
                if conn is not None:
                    await conn.close()
                conn = None
            if stop.is_set():
                return
            try:
                await asyncio.wait_for(stop.wait(), every)
            except TimeoutError:
                pass
    finally:
        if conn is not None:
            await conn.close()
