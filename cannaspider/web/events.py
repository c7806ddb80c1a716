"""GET /api/events: what changed, where (docs/analytics.md, "Events").

Filters `state`, `dispensary_id`, `brand`, `type` (repeatable), `since`; pages of `limit` events in
id order, the next one asked for with the page's `next_cursor`. Anything malformed (a query
parameter it does not know, a bad date, a cursor outside CURSOR_PATTERN, a limit past MAX_LIMIT)
is a 422 whose `detail` is the list FastAPI gives for its own validation errors. A cursor of the
right form that leads to no page of these filters (altered, made for other filters, or never made
by this API) is a 404: no request the schema allows is refused as malformed, and /openapi.json
describes every answer."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal, get_args

import psycopg
from fastapi import APIRouter, HTTPException, Query, Request
from psycopg.rows import dict_row
from pydantic import BaseModel, Field

from cannaspider.analytics import events as ev
from cannaspider.web.models import ErrorOut

router = APIRouter(prefix="/api", tags=["events"])

MAX_LIMIT = 1000
CURSOR_PATTERN = "^[A-Za-z0-9_-]+$"  # base64url without its padding: what cursor() makes
SINCE_PATTERN = "^(?!0000)[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])([Tt ][0-9]{2}:[0-9]{2}|$)"
# what parse_since() takes, as the schema can say it (also GET /api/jobs' since and until)
SINCE_SCHEMA = {
    "type": "string",
    "maxLength": 40,
    "pattern": SINCE_PATTERN,
    "anyOf": [{"type": "string", "format": "date"}, {"type": "string", "format": "date-time"}],
}
PARAMETERS = {"state", "dispensary_id", "brand", "type", "since", "cursor", "limit"}
EventType = Literal["listed", "price_changed", "special_started", "special_ended", "out_of_stock", "back_in_stock"]
assert get_args(EventType) == ev.EVENT_TYPES  # one list of types (the table's CHECK has it too)


class EventOut(BaseModel):
    id: int
    occurred_at: datetime = Field(description="start of the crawl that saw the change")
    type: EventType
    crawl_run_id: int
    dispensary_id: int
    store: str
    state: str | None
    city: str | None
    platform: str = Field(description="the store's menu platform ('dutchie', 'jane')")
    provider_product_id: str
    product: str | None
    brand: str | None
    category: str | None
    canonical_product_id: int | None = Field(description="the product across stores and platforms (GET /api/products)")
    canonical_brand_id: int | None = Field(description="its canonical brand (GET /api/brands)")
    price_rec_old: float | None = Field(description="price_changed: the recreational price before")
    price_rec: float | None = Field(description="the price at the event (for out_of_stock: when last seen)")
    price_med_old: float | None
    price_med: float | None
    price_rec_special: float | None
    price_med_special: float | None


class ProductEventOut(BaseModel):
    id: int
    occurred_at: datetime
    type: EventType
    crawl_run_id: int
    price_rec_old: float | None
    price_rec: float | None
    price_med_old: float | None
    price_med: float | None
    price_rec_special: float | None
    price_med_special: float | None


class OosIntervalOut(BaseModel):
    from_: datetime | None = Field(
        alias="from", description="the crawl that marked it out of stock; null: before events were recorded"
    )
    until: datetime | None = Field(description="the crawl that saw it back; null: still out of stock")


async def product_timeline(
    conn: psycopg.AsyncConnection[Any], dispensary_id: int, provider_product_id: str
) -> dict[str, list[dict[str, Any]]]:
    """A product's events, oldest first, and its out-of-stock intervals (the history API)."""
    params = {"d": dispensary_id, "p": provider_product_id}
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(ev.PRODUCT_EVENTS, params)
        events = await cur.fetchall()
        await cur.execute(ev.PRODUCT_OOS_SINCE, params)
        row = await cur.fetchone()
    return {"events": events, "oos_intervals": ev.oos_intervals(events, row["oos_since"] if row else None)}


async def store_events(conn: psycopg.AsyncConnection[Any], dispensary_id: int) -> list[dict[str, Any]]:
    """A store's latest events (ev.STORE_EVENTS_SHOWN of them), newest first (its dashboard page)."""
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(ev.STORE_EVENTS, {"d": dispensary_id, "limit": ev.STORE_EVENTS_SHOWN})
        return await cur.fetchall()


class EventsPage(BaseModel):
    events: list[EventOut]
    next_cursor: str | None = Field(description="pass as `cursor` for the next page; null: no more events")


def unprocessable(field: str, message: str) -> HTTPException:
    """A 422 shaped like FastAPI's own (HTTPValidationError in /openapi.json)."""
    return HTTPException(422, [{"loc": ["query", field], "msg": message, "type": "value_error"}])


CURSOR_NOT_FOUND = "the cursor leads to no page of these filters (altered, or made for others): start again without it"


@router.get("/events", response_model=EventsPage, responses={404: {"model": ErrorOut, "description": CURSOR_NOT_FOUND}})
async def list_events(
    request: Request,
    # the patterns say in the schema what EventFilter checks (its messages are the 422s)
    state: str | None = Query(
        None, description="two-letter state code of the store", json_schema_extra={"pattern": "^[A-Za-z]{2}$"}
    ),
    dispensary_id: int | None = Query(None, ge=1, le=ev.MAX_ID),
    brand: str | None = Query(
        None,
        max_length=200,
        description="brand name as the menu gives it (any case)",
        json_schema_extra={"pattern": r"^[^\x00]*[^\x00\s][^\x00]*$"},  # not blank, no NUL
    ),
    type: list[EventType] | None = Query(None, description="one or more event types"),  # noqa: A002 - the API's name
    since: str | None = Query(
        None,
        max_length=40,
        description="a date (UTC midnight) or an ISO 8601 time",
        # what parse_since() takes, as the schema can say it: a date or a date-time (RFC 3339),
        # whose year is 1 or later (a format alone validates nothing: the pattern does)
        json_schema_extra=SINCE_SCHEMA,
    ),
    cursor: str | None = Query(
        None, max_length=200, pattern=CURSOR_PATTERN, description="a previous page's next_cursor, as it was given"
    ),
    limit: int = Query(200, ge=1, le=MAX_LIMIT),
) -> dict[str, Any]:
    unknown = sorted(set(request.query_params) - PARAMETERS)
    if unknown:
        raise unprocessable(unknown[0], f"unknown filter {unknown[0][:40]!r}: use {', '.join(sorted(PARAMETERS))}")
    try:
        where = ev.EventFilter(
            state=state,
            dispensary_id=dispensary_id,
            brand=brand,
            types=tuple(type or ()),
            since=ev.parse_since(since) if since is not None else None,
        )
        after = where.position(cursor)
    except ev.CursorError as exc:
        raise HTTPException(404, str(exc)) from None
    except ev.EventQueryError as exc:
        raise unprocessable(exc.field, str(exc)) from None
    async with request.app.state.pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(ev.PAGE, ev.page_params(where, after, limit + 1))
        rows = await cur.fetchall()
    more = len(rows) > limit
    rows = rows[:limit]
    return {"events": rows, "next_cursor": where.cursor(rows[-1]["id"]) if more else None}
