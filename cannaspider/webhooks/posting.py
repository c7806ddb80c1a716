"""Posting to an operator's webhook: the event alerts (cannaspider/webhooks/delivery.py) and the
crawl-health alert (cannaspider/monitors/health_notify.py) both post through here (docs/analytics.md,
"Alerts", "What a webhook may be").

- A redirect is never followed: a 3xx answer is a failed post with its reason. Following one
  turned an alert into a body-less GET on another host, sent the signed POST to another host, or
  into our own API on loopback.
- At most ANSWER_BYTES of an answer are read: the status is all a post needs, and a receiver that
  streams gigabytes must not cost us memory.
- A host that is, or resolves to, an address outside the public internet (loopback, private,
  link-local, shared, reserved: any address ipaddress does not call global) is refused unless
  WEBHOOK_ALLOW_PRIVATE. The check is made on the addresses the connection is made to: the
  connector resolves through CheckedResolver, which refuses a name when any of its addresses is
  not public, so a name that moved to a private address after it was subscribed is refused too.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from urllib.parse import urlsplit

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult

ANSWER_BYTES = 4096


class WebhookRefused(OSError):
    """A webhook host whose address is not public: the message says which address."""


def refusal(address: str) -> str | None:
    """Why this IP address may not be posted to (None: it may)."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return f"{address!r} is not an IP address"
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if ip.is_global:
        return None
    return f"refused: the webhook's address {ip} is not public (set WEBHOOK_ALLOW_PRIVATE to allow it)"


def literal_refusal(url: str) -> str | None:
    """The check of a URL whose host is an IP address (the connector never resolves one)."""
    host = urlsplit(url).hostname or ""
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return None
    return refusal(host)


class CheckedResolver(AbstractResolver):
    """The system's resolver, refusing a name when any of its addresses is not public."""

    def __init__(self) -> None:
        self._inner = aiohttp.ThreadedResolver()

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        results = await self._inner.resolve(host, port, family)
        for result in results:
            if (why := refusal(result["host"])) is not None:
                raise WebhookRefused(why)
        return results

    async def close(self) -> None:
        await self._inner.close()


def session(timeout_s: float, *, allow_private: bool) -> aiohttp.ClientSession:
    """A session whose connections reach public addresses only (unless `allow_private`)."""
    connector = aiohttp.TCPConnector(resolver=None if allow_private else CheckedResolver())
    return aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout_s), connector=connector)


@dataclass(frozen=True)
class Answer:
    status: int | None  # the receiver's HTTP status; None when it never answered
    error: str | None  # None: delivered; else why not, free of the URL (it may carry a token)


async def post(
    client: aiohttp.ClientSession, url: str, body: bytes, headers: dict[str, str], *, allow_private: bool
) -> Answer:
    """One POST through a session of session(): its answer's status, or why there is none."""
    if not allow_private and (why := literal_refusal(url)) is not None:
        return Answer(None, why)
    try:
        async with client.post(url, data=body, headers=headers, allow_redirects=False) as answer:
            # the rest of the answer is never read: the connection is closed with it unread
            await answer.content.read(ANSWER_BYTES)
            status = answer.status
    except TimeoutError:
        timeout = client.timeout.total
        return Answer(None, f"no answer within {timeout:g} s" if timeout else "no answer")
    except aiohttp.ClientConnectorError as exc:
        if isinstance(exc.os_error, WebhookRefused):
            return Answer(None, str(exc.os_error))
        return Answer(None, f"connection failed ({type(exc).__name__})")
    except aiohttp.ClientError as exc:
        # the exception's text names the URL (which may carry a token): its class only
        return Answer(None, f"connection failed ({type(exc).__name__})")
    if 200 <= status < 300:
        return Answer(status, None)
    if 300 <= status < 400:
        return Answer(status, f"answered HTTP {status}, a redirect (never followed)")
    return Answer(status, f"answered HTTP {status}")


def post_once(url: str, body: bytes, headers: dict[str, str], *, timeout_s: float, allow_private: bool) -> Answer:
    """post() from synchronous code, on a loop of its own in a thread: the crawl-health action runs
    inside the reactor's running loop, which cannot be lent to a blocking call."""

    async def once() -> Answer:
        async with session(timeout_s, allow_private=allow_private) as client:
            return await post(client, url, body, headers, allow_private=allow_private)

    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, once()).result()
