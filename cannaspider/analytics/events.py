"""Reading product_events (docs/analytics.md, "Events"): one query and one set of filters for
`GET /api/events` and `scrapy export events`, pages keyed on the event id, and the cursor that
carries a page's position.

A cursor is the last id of a page bound to the filters it was made for: base64url of
`<id>.<digest>`, the digest a SHA-256 of the id and the filters. A cursor that does not decode,
was edited, or is replayed with other filters is refused (CursorError, a 404 for the API), never
read as some other position."""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from dataclasses import asdict, dataclass
from datetime import UTC, date, datetime, time
from typing import Any

EVENT_TYPES = ("listed", "price_changed", "special_started", "special_ended", "out_of_stock", "back_in_stock")
MAX_ID = 2**63 - 1
STATE = re.compile(r"[A-Za-z]{2}")


class EventQueryError(ValueError):
    """A filter, date or cursor that cannot be used; `field` names it."""

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field


class CursorError(EventQueryError):
    def __init__(self, message: str):
        super().__init__("cursor", message)


def parse_since(text: str) -> datetime:
    """A date (`2026-11-30`: midnight UTC) or an ISO 8601 time (without an offset: UTC)."""
    value = text.strip().upper()  # RFC 3339 also writes the T and the Z in lower case
    try:
        if len(value) == 10:
            return datetime.combine(date.fromisoformat(value), time(), UTC)
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise EventQueryError("since", f"not a date or an ISO 8601 time: {text[:40]!r}") from None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


@dataclass(frozen=True)
class EventFilter:
    state: str | None = None
    dispensary_id: int | None = None
    brand: str | None = None
    types: tuple[str, ...] = ()
    since: datetime | None = None

    def __post_init__(self) -> None:
        if self.state is not None and not STATE.fullmatch(self.state):
            raise EventQueryError("state", f"not a two-letter state code: {self.state[:20]!r}")
        if self.dispensary_id is not None and not 1 <= self.dispensary_id <= MAX_ID:
            raise EventQueryError("dispensary_id", "a store id is a positive 64-bit integer")
        if self.brand is not None and ("\x00" in self.brand or not self.brand.strip()):
            raise EventQueryError("brand", "a brand is a non-empty text without NUL characters")
        unknown = [t for t in self.types if t not in EVENT_TYPES]
        if unknown:
            raise EventQueryError("type", f"unknown event type {unknown[0][:40]!r}: one of {', '.join(EVENT_TYPES)}")

    def params(self) -> dict[str, Any]:
        return {
            "state": self.state.upper() if self.state else None,
            "dispensary_id": self.dispensary_id,
            "brand": self.brand,
            "types": list(self.types) or None,
            "since": self.since,
        }

    def _digest(self, after_id: int) -> str:
        fields = asdict(self)
        fields["since"] = self.since.isoformat() if self.since else None
        fields["state"] = self.state.upper() if self.state else None
        return hashlib.sha256(f"events/1 {after_id} {sorted(fields.items())!r}".encode()).hexdigest()[:24]

    def cursor(self, after_id: int) -> str:
        return base64.urlsafe_b64encode(f"{after_id}.{self._digest(after_id)}".encode()).decode().rstrip("=")

    def position(self, cursor: str | None) -> int:
        """The id a cursor made by cursor() stands for (0: the first page)."""
        if cursor is None:
            return 0
        try:
            text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode("ascii")
        except (binascii.Error, ValueError):
            raise CursorError("not a cursor of this API (it does not decode)") from None
        after, _, digest = text.partition(".")
        if not after.isascii() or not after.isdigit() or not 0 < int(after) <= MAX_ID:
            raise CursorError("not a cursor of this API")
        if digest != self._digest(int(after)):
            raise CursorError("this cursor was altered, or made for other filters: start again without it")
        return int(after)


# (name, SQL expression) of an event as the API and the exports give it
COLUMNS = (
    ("id", "e.id"),
    ("occurred_at", "e.occurred_at"),
    ("type", "e.type"),
    ("crawl_run_id", "e.crawl_run_id"),
    ("dispensary_id", "e.dispensary_id"),
    ("store", "d.name"),
    ("state", "d.state"),
    ("city", "d.city"),
    ("platform", "d.platform"),  # the store's menu platform: a market's events are of every platform
    ("provider_product_id", "sp.provider_product_id"),
    ("product", "coalesce(sp.name, sp.name_raw)"),
    ("brand", "sp.brand_name_raw"),
    ("category", "sp.category"),
    ("canonical_product_id", "sp.canonical_product_id"),  # the product across stores and platforms
    ("canonical_brand_id", "sp.canonical_brand_id"),
    ("price_rec_old", "e.price_rec_old::float8"),
    ("price_rec", "e.price_rec::float8"),
    ("price_med_old", "e.price_med_old::float8"),
    ("price_med", "e.price_med::float8"),
    ("price_rec_special", "e.price_rec_special::float8"),
    ("price_med_special", "e.price_med_special::float8"),
)


# Static SQL, every filter optional; the id order walks each month's id index (Merge Append) and
# `since` prunes the months before it (`until`, the exports' end, those after it).
def select(columns: tuple[tuple[str, str], ...] = COLUMNS) -> str:
    """The events query with `columns` (the exports add some to the API's)."""
    return f"""
SELECT {", ".join(f"{expr} AS {name}" for name, expr in columns)}
  FROM product_events e
  JOIN dispensaries d ON d.id = e.dispensary_id
  JOIN store_products sp ON sp.id = e.store_product_id
 WHERE e.id > %(after)s
   AND (%(since)s::timestamptz IS NULL OR e.occurred_at >= %(since)s::timestamptz)
   AND (%(until)s::timestamptz IS NULL OR e.occurred_at < %(until)s::timestamptz)
   AND (%(state)s::text IS NULL OR d.state = %(state)s::text)
   AND (%(dispensary_id)s::bigint IS NULL OR e.dispensary_id = %(dispensary_id)s::bigint)
   AND (%(brand)s::text IS NULL OR lower(sp.brand_name_raw) = lower(%(brand)s::text))
   AND (%(types)s::text[] IS NULL OR e.type = ANY(%(types)s::text[]))
 ORDER BY e.id
"""


SELECT = select()
PAGE = SELECT + " LIMIT %(limit)s"


def page_params(where: EventFilter, after_id: int, limit: int | None, until: datetime | None = None) -> dict[str, Any]:
    return {**where.params(), "after": after_id, "limit": limit, "until": until}


# A product's own events and its out-of-stock intervals (the history API)
PRODUCT_EVENTS = """
SELECT e.id, e.occurred_at, e.type, e.crawl_run_id, e.price_rec_old::float8 AS price_rec_old,
       e.price_rec::float8 AS price_rec, e.price_med_old::float8 AS price_med_old, e.price_med::float8 AS price_med,
       e.price_rec_special::float8 AS price_rec_special, e.price_med_special::float8 AS price_med_special
  FROM product_events e
 WHERE e.store_product_id = (SELECT id FROM store_products
                              WHERE dispensary_id = %(d)s AND provider_product_id = %(p)s
                                AND provider = (SELECT platform FROM dispensaries WHERE id = %(d)s))
 ORDER BY e.id
"""
# A store's latest events, newest first (its dashboard page): the (dispensary_id, id) index, backwards
STORE_EVENTS_SHOWN = 50
STORE_EVENTS = """
SELECT e.id, e.occurred_at, e.type, e.crawl_run_id, sp.provider_product_id, coalesce(sp.name, sp.name_raw) AS product,
       e.price_rec_old::float8 AS price_rec_old, e.price_rec::float8 AS price_rec
  FROM product_events e JOIN store_products sp ON sp.id = e.store_product_id
 WHERE e.dispensary_id = %(d)s
 ORDER BY e.id DESC
 LIMIT %(limit)s
"""
PRODUCT_OOS_SINCE = """
SELECT es.oos_since FROM store_products sp JOIN product_event_state es ON es.store_product_id = sp.id
 WHERE sp.dispensary_id = %(d)s AND sp.provider_product_id = %(p)s
   AND sp.provider = (SELECT platform FROM dispensaries WHERE id = %(d)s)
"""


def oos_intervals(events: list[dict[str, Any]], oos_since: datetime | None) -> list[dict[str, Any]]:
    """[{from, until}] from a product's events, oldest first; `until` None: still out of stock.
    A product out of stock since before events were written has no out_of_stock event: its
    interval starts at product_event_state.oos_since (migrations/014_product_events.sql)."""
    intervals: list[dict[str, Any]] = []
    for event in events:
        if event["type"] == "out_of_stock" and (not intervals or intervals[-1]["until"] is not None):
            intervals.append({"from": event["occurred_at"], "until": None})
        elif event["type"] == "back_in_stock":
            if not intervals or intervals[-1]["until"] is not None:  # opened before events existed
                intervals.append({"from": None, "until": event["occurred_at"]})
            else:
                intervals[-1]["until"] = event["occurred_at"]
    if oos_since is not None and (not intervals or intervals[-1]["until"] is not None):
        intervals.append({"from": oos_since, "until": None})
    return intervals
