"""Alert subscriptions (migration 021): what an operator wants to hear about and where.

A subscription names event types (product_events' six, and `availability_changed` from the
market analytics) and narrows them: a state, a store, a brand (any spelling of its canonical
brand: the name is normalized as the canonical brands' are), a minimum price drop in percent, a
minimum availability change. Its webhook URL is a secret (an incoming-webhook URL carries a
token): it is stored, posted to, and shown only as scheme://host (redacted()). A host that is
or resolves to an address outside the public internet is refused unless WEBHOOK_ALLOW_PRIVATE."""

from __future__ import annotations

import socket
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any
from urllib.parse import urlsplit

import psycopg

from cannaspider.identity import brand_key_name

EVENT_TYPES = ("listed", "price_changed", "special_started", "special_ended", "out_of_stock", "back_in_stock")
AVAILABILITY = "availability_changed"
TYPES = (*EVENT_TYPES, AVAILABILITY)


class SubscriptionError(ValueError):
    """A subscription that cannot be stored: the message says why (one `error:` line)."""


@dataclass(frozen=True)
class Subscription:
    id: int
    webhook_url: str
    types: tuple[str, ...]
    state: str | None
    dispensary_id: int | None
    brand: str | None
    min_drop_pct: Decimal | None
    min_change: Decimal | None
    enabled: bool
    created_at: datetime

    def describe(self) -> str:
        """One line for `scrapy webhooks list`, the URL redacted."""
        parts = [f"{self.id:>5}", ",".join(self.types), "→", redacted(self.webhook_url)]
        for label, value in (
            ("state", self.state),
            ("store", self.dispensary_id),
            ("brand", self.brand),
            ("min-drop %", self.min_drop_pct),
            ("min-change", self.min_change),
        ):
            if value is not None:
                parts.append(f"{label}={value}")
        if not self.enabled:
            parts.append("(disabled)")
        return "  ".join(str(p) for p in parts)


def redacted(url: str) -> str:
    """scheme://host[:port]/… : enough to tell webhooks apart, without the path's token."""
    parts = urlsplit(url)
    host = parts.hostname or "?"
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{host}{port}/…"


def validate(
    webhook_url: str,
    types: list[str],
    *,
    state: str | None,
    min_drop_pct: float | None,
    min_change: float | None,
    allow_private: bool,
) -> None:
    parts = urlsplit(webhook_url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise SubscriptionError("the webhook must be an http:// or https:// URL")
    unknown = sorted(set(types) - set(TYPES))
    if not types or unknown:
        raise SubscriptionError(f"unknown type {unknown[0]!r}" if unknown else "give at least one --type")
    if state is not None and not (len(state) == 2 and state.isascii() and state.isalpha()):
        raise SubscriptionError("a state is two letters")
    if min_drop_pct is not None and not 0 < min_drop_pct <= 100:
        raise SubscriptionError("--min-drop is a percent, above 0 and at most 100")
    if min_drop_pct is not None and "price_changed" not in types:
        raise SubscriptionError("--min-drop applies to --type price_changed")
    if min_change is not None and not 0 < min_change <= 1:
        raise SubscriptionError("--min-change is a share of stores, above 0 and at most 1")
    if AVAILABILITY in types and min_change is None:
        raise SubscriptionError("--type availability_changed needs --min-change")
    if not allow_private and (why := address_refusal(parts.hostname)) is not None:
        raise SubscriptionError(why)


def address_refusal(host: str) -> str | None:
    """Why a webhook host may not be subscribed: an address of it is not public. A name that does
    not resolve now is taken; every post checks its addresses again (cannaspider/webhooks/posting.py)."""
    # posting's module is the poster's (aiohttp): `scrapy webhooks` imports this module on every start
    from cannaspider.webhooks import posting  # noqa: PLC0415 - a command's start-up time

    try:
        addresses = {info[4][0] for info in socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)}
    except (OSError, UnicodeError):
        return None
    return next((why for a in sorted(addresses) if (why := posting.refusal(str(a))) is not None), None)


def add(
    conn: psycopg.Connection[Any],
    webhook_url: str,
    types: list[str],
    *,
    state: str | None = None,
    dispensary_id: int | None = None,
    brand: str | None = None,
    min_drop_pct: float | None = None,
    min_change: float | None = None,
    allow_private: bool,
) -> int:
    validate(
        webhook_url,
        types,
        state=state,
        min_drop_pct=min_drop_pct,
        min_change=min_change,
        allow_private=allow_private,
    )
    brand_key = brand_key_name(brand) if brand is not None else None
    if brand is not None and not brand_key:
        raise SubscriptionError("a brand needs letters or digits")
    row = conn.execute(
        "INSERT INTO alert_subscriptions (webhook_url, types, state, dispensary_id, brand, brand_key, min_drop_pct, "
        "min_change) VALUES (%s, %s, %s, %s, %s, %s, %s, %s) RETURNING id",
        (
            webhook_url,
            sorted(set(types), key=TYPES.index),
            state.upper() if state else None,
            dispensary_id,
            brand,
            brand_key,
            min_drop_pct,
            min_change,
        ),
    ).fetchone()
    assert row is not None  # INSERT … RETURNING returns its row
    return int(row[0])


def list_all(conn: psycopg.Connection[Any]) -> list[Subscription]:
    rows = conn.execute(
        "SELECT id, webhook_url, types, state, dispensary_id, brand, min_drop_pct, min_change, enabled, created_at "
        "FROM alert_subscriptions ORDER BY id"
    ).fetchall()
    return [Subscription(r[0], r[1], tuple(r[2]), *r[3:]) for r in rows]


def remove(conn: psycopg.Connection[Any], subscription_id: int) -> bool:
    """Delete it with its deliveries; False when there is none of that id."""
    return conn.execute("DELETE FROM alert_subscriptions WHERE id = %s", (subscription_id,)).rowcount > 0
