"""The sandbox's control API (under /_sandbox/): epoch, the demo month's day, faults, persisted
hashes, compression, catalog views.

Tests, the demo and benchmarks drive the sandbox through it over HTTP, so it works the same
whether the sandbox runs in-process, in another process or on another terminal.
"""

from __future__ import annotations

from aiohttp import web

from cannaspider.platforms.dutchie.operations import DEFAULT_PERSISTED_HASHES
from sandbox import jane_api, month
from sandbox.dutchie_api import DUTCHIE, DutchieState
from sandbox.edge_compression import EDGE, ENCODINGS


def _state(request: web.Request) -> DutchieState:
    return request.app[DUTCHIE]


async def get_state(request: web.Request) -> web.Response:
    s = _state(request)
    return web.json_response(
        {
            "epoch": s.epoch,
            "day": month.day_of(s.epoch),
            "current_hashes": s.current_hashes,
            "faults": s.faults.as_dicts(),
            "requests": dict(s.requests),
            "pages": {str(n): count for n, count in sorted(s.pages.items())},
            "compressed": dict(request.app[EDGE].answered),
        }
    )


async def set_epoch(request: web.Request) -> web.Response:
    s = _state(request)
    body = await request.json()
    s.epoch = int(body["epoch"]) if "epoch" in body else s.epoch + int(body.get("advance", 1))
    return web.json_response({"epoch": s.epoch})


async def set_day(request: web.Request) -> web.Response:
    """`{"day": d}`: both platforms' menus on day d of the demo's month (sandbox/month.py)."""
    body = await request.json()
    day = int(body.get("day", 0))
    if not 1 <= day <= month.DAYS:
        return web.json_response({"error": f"day must be 1 to {month.DAYS}"}, status=400)
    _state(request).epoch = month.epoch_of(day)
    if jane_api.JANE in request.app:
        request.app[jane_api.JANE].epoch = month.epoch_of(day)
    return web.json_response({"day": day, "epoch": month.epoch_of(day)})


async def set_faults(request: web.Request) -> web.Response:
    s = _state(request)
    body = await request.json()
    try:
        s.faults.set_rules(body.get("rules", []))
    except (TypeError, ValueError) as exc:
        return web.json_response({"error": str(exc)}, status=400)
    return web.json_response({"faults": s.faults.as_dicts()})


async def set_hashes(request: web.Request) -> web.Response:
    s = _state(request)
    s.current_hashes.update(await request.json())
    return web.json_response({"current_hashes": s.current_hashes})


async def reset(request: web.Request) -> web.Response:
    s = _state(request)
    s.epoch = 0
    s.faults.clear()
    s.current_hashes = dict(DEFAULT_PERSISTED_HASHES)
    s.requests.clear()
    s.pages.clear()
    s.competitor_slow_seconds = 5.0
    request.app[EDGE].reset()
    if jane_api.JANE in request.app:
        request.app[jane_api.JANE].reset()
    return web.json_response({"ok": True})


async def list_stores(request: web.Request) -> web.Response:
    s = _state(request)
    base = f"{request.scheme}://{request.host}"
    state_filter = request.query.get("state")
    return web.json_response(
        [
            {
                "id": st.id,
                "cName": st.cname,
                "name": st.name,
                "state": st.state,
                "city": st.city,
                "lat": st.lat,
                "lng": st.lng,
                "menu_url": s.catalog.menu_url(st, base),
                "menu_style": st.menu_style,
                "product_count": st.product_count,
            }
            for st in s.catalog.stores
            if not state_filter or st.state == state_filter
        ]
    )


async def menu(request: web.Request) -> web.Response:
    s = _state(request)
    store = s.catalog.find(request.match_info["store"])
    if store is None:
        return web.json_response({"error": "no such store"}, status=404)
    epoch = int(request.query.get("epoch", s.epoch))
    return web.json_response(
        {
            "epoch": epoch,
            "product_ids": [s.catalog.product_id(store, i) for i in s.catalog.product_indices(store, epoch)],
        }
    )


async def set_slow(request: web.Request) -> web.Response:
    body = await request.json()
    _state(request).competitor_slow_seconds = float(body["seconds"])
    return web.json_response({"seconds": _state(request).competitor_slow_seconds})


async def set_compression(request: web.Request) -> web.Response:
    """`{"on": false}`: GraphQL answers uncompressed, as the sandbox sent them before issue 31;
    `{"encodings": ["gzip"]}`: the edge offers only these (an edge without brotli)."""
    body = await request.json()
    edge = request.app[EDGE]
    edge.on = bool(body.get("on", edge.on))
    if "encodings" in body:
        unknown = set(body["encodings"]) - set(ENCODINGS)
        if unknown:
            return web.json_response({"error": f"unknown encodings {sorted(unknown)}"}, status=400)
        edge.encodings = tuple(e for e in ENCODINGS if e in body["encodings"])
    return web.json_response({"on": edge.on, "encodings": list(edge.encodings)})


def add_routes(app: web.Application) -> None:
    app.router.add_get("/_sandbox/state", get_state)
    app.router.add_post("/_sandbox/epoch", set_epoch)
    app.router.add_post("/_sandbox/day", set_day)
    app.router.add_post("/_sandbox/faults", set_faults)
    app.router.add_post("/_sandbox/hashes", set_hashes)
    app.router.add_post("/_sandbox/reset", reset)
    app.router.add_post("/_sandbox/slow", set_slow)
    app.router.add_post("/_sandbox/compression", set_compression)
    app.router.add_get("/_sandbox/stores", list_stores)
    app.router.add_get("/_sandbox/menu/{store}", menu)
