"""Jane's Algolia: building the index queries and reading their answers (docs/jane.md).

Jane's web front end queries two Algolia indexes with the application id and search-only key it
ships: the products index (one store's menu by a filter on `store_id`, paged by `page` /
`hitsPerPage`, the answer's `nbHits` / `nbPages`) and the stores index (searched around a point).
A request is a POST of the query parameters as JSON to `/1/indexes/<index>/query`, with Algolia's
own headers and the Origin/Referer of the page that embeds the menu, as the browser sends them.

An answer is classified before anyone reads it: an HTML 403/503 is the edge's block or challenge
(counted against the proxy), Algolia's JSON 403 is an invalid key (not the proxy's fault: an
`http_error`), a 429 that reached us is past the rate-limit middleware's bound, any other non-200
is an `http_error`, and a body that is not a JSON object is `malformed`.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

import scrapy
from scrapy.http import Response

from cannaspider.items import DispensaryRecord
from cannaspider.platforms.interface import Callback, Errback, PlatformFailure

# what Jane's front end sends as Algolia's client (the agent string travels in the query string)
AGENT = "Algolia for JavaScript (4.20.0); Browser"
# the page a browser's request runs on when the menu is iHeartJane's own (a store's own site
# embeds the same menu: its origin would do as well)
EMBED_ORIGIN = "https://www.iheartjane.com"
METERS_PER_MILE = 1609.344


def query_url(base_url: str, index: str) -> str:
    return f"{base_url.rstrip('/')}/1/indexes/{quote(index, safe='')}/query?x-algolia-agent={quote(AGENT)}"


def build_request(
    base_url: str,
    index: str,
    params: dict[str, Any],
    *,
    app_id: str,
    api_key: str,
    callback: Callback | None,
    errback: Errback | None = None,
    meta: dict[str, Any] | None = None,
) -> scrapy.Request:
    """One Algolia query (POST, JSON body), never filtered as a duplicate (pages repeat their URL)."""
    return scrapy.Request(
        query_url(base_url, index),
        method="POST",
        body=json.dumps(params, separators=(",", ":")),
        headers={
            "x-algolia-application-id": app_id,
            "x-algolia-api-key": api_key,
            # Algolia's browser client posts JSON as a "simple" type: no CORS preflight
            "content-type": "application/x-www-form-urlencoded",
            "accept": "application/json",
            "origin": EMBED_ORIGIN,
            "referer": f"{EMBED_ORIGIN}/",
        },
        callback=callback,
        errback=errback,
        meta={**(meta or {}), "algolia_index": index, "algolia_params": params},
        dont_filter=True,
    )


def store_filter(key: str) -> str:
    """The filter of one store's products: numeric for Jane's numeric ids; anything else quoted
    as a facet value (no id can add a clause of its own)."""
    number = store_id(key)
    if number is not None:
        return f"store_id = {number}"
    return 'store_id:"' + key.replace("\\", "\\\\").replace('"', '\\"') + '"'


def products_params(key: str, page: int, per_page: int) -> dict[str, Any]:
    return {"query": "", "filters": store_filter(key), "hitsPerPage": per_page, "page": page}


def stores_params(lat: float, lng: float, radius_mi: float, per_page: int) -> dict[str, Any]:
    return {
        "query": "",
        "aroundLatLng": f"{lat},{lng}",
        "aroundRadius": int(radius_mi * METERS_PER_MILE),
        "hitsPerPage": per_page,
        "page": 0,
    }


def _looks_like_html(body: bytes) -> bool:
    head = body[:512].lstrip().lower()
    return head.startswith(b"<!doctype html") or head.startswith(b"<html") or b"<head" in head


def read(response: Response) -> dict[str, Any] | PlatformFailure:
    """The answer's object (`hits`, `nbHits`, …), or why there is none."""
    status, body = response.status, response.body
    if status in (403, 503) and _looks_like_html(body):
        lowered = body.lower()
        if status == 503 or b"just a moment" in lowered or b"challenge" in lowered:
            return PlatformFailure("challenge", f"HTTP {status} challenge page")
        return PlatformFailure("blocked", f"HTTP {status} block page")
    try:
        payload = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        if status != 200:
            return PlatformFailure("http_error", f"HTTP {status} with a non-JSON body")
        return PlatformFailure("malformed", f"body is not valid JSON ({exc.__class__.__name__}; {len(body)} bytes)")
    message = payload.get("message") if isinstance(payload, dict) else None
    words = f": {str(message)[:200]}" if isinstance(message, str) and message else ""
    if status == 403:
        return PlatformFailure("http_error", f"HTTP 403, Algolia refused the application id or API key{words}")
    if status == 429:
        return PlatformFailure("http_error", f"HTTP 429 rate limited past the retry bound{words}")
    if status != 200:
        return PlatformFailure("http_error", f"HTTP {status} (Algolia error){words}")
    if not isinstance(payload, dict):
        return PlatformFailure("malformed", f"top-level JSON is a {type(payload).__name__}")
    return payload


# -- the stores index ------------------------------------------------------------------------------


def _text(value: object) -> str | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return str(value)
    return value.strip() or None if isinstance(value, str) else None


def _float(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return None
    try:
        number = float(value)
    except (ValueError, OverflowError):
        return None
    return number if number == number and abs(number) != float("inf") else None


def _flag(value: object) -> bool | None:
    return value if isinstance(value, bool) else None


def store_id(value: object) -> str | None:
    """Jane's store id as we store it: a non-negative integer's digits (documents send a number)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value) if value >= 0 else None
    if isinstance(value, str) and value.strip().isdigit() and value.strip().isascii():
        return str(int(value.strip()))
    return None


def menu_url(store: str, slug: str | None) -> str:
    return f"{EMBED_ORIGIN}/stores/{store}/{slug}/menu" if slug else f"{EMBED_ORIGIN}/stores/{store}/menu"


def dispensary_record(obj: object) -> DispensaryRecord | None:
    """A stores-index document as the shared record; None without an id or a name."""
    if not isinstance(obj, dict):
        return None
    pid = store_id(obj.get("id", obj.get("objectID")))
    name = _text(obj.get("name"))
    if pid is None or not name:
        return None
    geo = obj.get("_geoloc")
    geo = geo if isinstance(geo, dict) else {}
    slug = _text(obj.get("url_slug"))
    state = _text(obj.get("state"))
    return DispensaryRecord(
        platform_dispensary_id=pid,
        name=name,
        slug=slug,
        menu_url=_text(obj.get("menu_url")) or menu_url(pid, slug),
        address=_text(obj.get("full_address")) or _text(obj.get("address")),
        city=_text(obj.get("city")),
        state=state.upper() if state and len(state) == 2 else state,
        zip=_text(obj.get("zip")),
        lat=_float(geo.get("lat")),
        lng=_float(geo.get("lng")),
        timezone=_text(obj.get("time_zone_identifier")),
        phone=_text(obj.get("phone")),
        is_recreational=_flag(obj.get("recreational")),
        is_medical=_flag(obj.get("medical")),
        platform="jane",
        raw=obj,
    )
