"""A Dutchie-like GraphQL endpoint (aiohttp): persisted queries, Apollo's CSRF rule, three
operations over the deterministic catalog, and the faults the real service shows.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import re
from collections import Counter
from importlib import resources

from aiohttp import web

from cannaspider.platforms.dutchie.operations import (
    CONSUMER_DISPENSARIES,
    DEFAULT_PERSISTED_HASHES,
    DISPENSARY_SEARCH,
    FILTERED_PRODUCTS,
)
from sandbox import edge_compression
from sandbox.catalog import Catalog
from sandbox.faults import PAYLOAD_KINDS, TRANSPORT_KINDS, FaultSwitchboard, deeply_nested_json

# read through importlib.resources: it also works from a zipped egg (Scrapyd)
BLOCK_PAGE = resources.files("sandbox").joinpath("cloudflare_403.html").read_text()
CHALLENGE_PAGE = (
    '<!DOCTYPE html><html lang="en-US"><head><title>Just a moment...</title></head><body>'
    '<div id="challenge-running">Checking if the site connection is secure</div>'
    "<div>cf-browser-verification</div><div>Ray ID: 8e2f0c0d0a0b0c0d</div></body></html>"
)
CSRF_MESSAGE = (
    "This operation has been blocked as a potential Cross-Site Request Forgery (CSRF). Please either "
    "specify a 'content-type' header (with a type that is not one of application/x-www-form-urlencoded, "
    "multipart/form-data, text/plain) or provide a non-empty value for one of the following headers: "
    "x-apollo-operation-name, apollo-require-preflight"
)
SIMPLE_CONTENT_TYPES = ("", "application/x-www-form-urlencoded", "multipart/form-data", "text/plain")
PER_PAGE_CAP = 100  # as real Dutchie, perPage above the cap gets a page of the cap (spiders adapt to it)
OPERATION_IN_QUERY = re.compile(r"^\s*query\s+(\w+)")


class DutchieState:
    """Mutable sandbox state shared by the handlers and the control API."""

    def __init__(self, catalog: Catalog, seed: int = 0):
        self.catalog = catalog
        self.epoch = 0
        # the hashes the sandbox's Dutchie knows: our defaults (real, published ones: docs/dutchie.md)
        # until a test rotates one through /_sandbox/hashes to make it stale
        self.current_hashes = dict(DEFAULT_PERSISTED_HASHES)
        self.faults = FaultSwitchboard(seed)
        self.requests: Counter[str] = Counter()
        # FilteredProducts requests by page number: a test waits for "page n was asked for" (the
        # pages are fetched in order, so page n+1 asked for means page n arrived)
        self.pages: Counter[int] = Counter()
        self.competitor_slow_seconds = 5.0
        self.page_cache: dict[tuple, bytes] = {}


DUTCHIE = web.AppKey("dutchie", DutchieState)
COMPRESSION_FAULTS = ("truncated_compressed", "corrupt_compressed")


def _json(data: object, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    body = json.dumps(data, separators=(",", ":")).encode()  # bytes: the edge compresses them (edge_compression.py)
    return web.Response(body=body, status=status, content_type="application/json", headers=headers)


def _graphql_error(message: str, code: str) -> web.Response:
    return _json({"errors": [{"message": message, "extensions": {"code": code}}], "data": None})


async def _read_operation(request: web.Request) -> dict:
    if request.method == "GET":
        q = request.query
        return {
            "operationName": q.get("operationName"),
            "variables": json.loads(q.get("variables") or "{}"),
            "extensions": json.loads(q.get("extensions") or "{}"),
            "query": q.get("query"),
        }
    body = await request.read()
    return json.loads(body or b"{}")


def _csrf_blocked(request: web.Request) -> bool:
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    preflighted = request.headers.get("x-apollo-operation-name") or request.headers.get("apollo-require-preflight")
    return ctype in SIMPLE_CONTENT_TYPES and not preflighted


def _incoherent_identity(request: web.Request) -> bool:
    """Cloudflare's bot check, reduced to what the sandbox can see: a Chromium User-Agent (Chrome,
    Edge) must come with its client hints and a Firefox or Safari one without them."""
    ua = request.headers.get("user-agent", "")
    hints = "sec-ch-ua" in request.headers
    if "Firefox/" in ua or ("Safari/" in ua and "Version/" in ua and "Chrome/" not in ua):
        return hints
    if "Chrome/" in ua:
        return not hints or ("Mobile" in ua) != (request.headers.get("sec-ch-ua-mobile") == "?1")
    return False


def _store_key(op: str, variables: dict) -> str | None:
    if op == FILTERED_PRODUCTS:
        return (variables.get("productsFilter") or {}).get("dispensaryId")
    if op == CONSUMER_DISPENSARIES:
        return (variables.get("dispensaryFilter") or {}).get("cNameOrID")
    return None


async def graphql(request: web.Request) -> web.StreamResponse:
    state: DutchieState = request.app[DUTCHIE]
    base = f"{request.scheme}://{request.host}"
    try:
        operation = await _read_operation(request)
        if not isinstance(operation, dict):
            raise ValueError("body is not an object")
    except (ValueError, json.JSONDecodeError):
        return _json({"errors": [{"message": "POST body sent invalid JSON."}]}, status=400)
    if _csrf_blocked(request):
        return web.Response(text=CSRF_MESSAGE, status=400)

    op = operation.get("operationName") or ""
    query = operation.get("query")
    if query and not op:
        match = OPERATION_IN_QUERY.match(query)
        op = match.group(1) if match else ""
    variables = operation.get("variables") or {}
    state.requests[op or "?"] += 1
    key = _store_key(op, variables)
    store = state.catalog.find(key) if key else None
    store_keys = tuple(k for k in (key, store and store.id, store and store.cname) if k)
    page = variables.get("page") if op == FILTERED_PRODUCTS else None
    if isinstance(page, int):
        state.pages[page] += 1

    if _incoherent_identity(request):
        state.requests["incoherent_identity"] += 1
        return web.Response(text=BLOCK_PAGE, status=403, content_type="text/html")
    via = request.headers.get("x-sandbox-proxy", "")
    if via:
        state.requests[f"via:{via}"] += 1
    compression_fault = None
    for rule in state.faults.fire(TRANSPORT_KINDS, op, store_keys, page, via):
        if rule.kind in COMPRESSION_FAULTS:
            compression_fault = rule.kind  # the answer below, broken by the edge's compression
        elif rule.kind == "slow":
            await asyncio.sleep(rule.delay)
        elif rule.kind == "block403":
            return web.Response(text=BLOCK_PAGE, status=403, content_type="text/html")
        elif rule.kind == "challenge503":
            return web.Response(
                text=CHALLENGE_PAGE, status=503, content_type="text/html", headers={"cf-mitigated": "challenge"}
            )
        elif rule.kind == "error500":
            return web.Response(
                text="<html><body><h1>500 Internal Server Error</h1></body></html>",
                status=500,
                content_type="text/html",
                # the origin's error, passed on by Dutchie's edge (a proxy's own 500 has no such mark)
                headers={"Server": "cloudflare", "cf-ray": "8f0c0ffee0000000-PHX"},
            )
        elif rule.kind == "rate_limited":
            headers = {"Retry-After": rule.retry_after} if rule.retry_after is not None else {}
            return _json({"errors": [{"message": "Too Many Requests"}]}, status=429, headers=headers)
        elif rule.kind == "graphql_errors":
            return _graphql_error("Internal server error", "INTERNAL_SERVER_ERROR")
        elif rule.kind in ("malformed", "truncated"):
            good = (await _execute_bytes(state, op, variables, base, store_keys)).decode()
            text = good[: len(good) // 2] if rule.kind == "truncated" else "{'data': " + good[9:]
            return web.Response(text=text, content_type="application/json")
        elif rule.kind == "deep_nesting":
            return web.Response(text=deeply_nested_json(), content_type="application/json")

    persisted = (operation.get("extensions") or {}).get("persistedQuery") or {}
    sha = persisted.get("sha256Hash")
    if sha and not query:
        if sha != state.current_hashes.get(op):
            return _graphql_error("PersistedQueryNotFound", "PERSISTED_QUERY_NOT_FOUND")
    elif sha and query and hashlib.sha256(query.encode()).hexdigest() != sha and sha != state.current_hashes.get(op):
        return _json(
            {
                "errors": [
                    {"message": "provided sha does not match query", "extensions": {"code": "INTERNAL_SERVER_ERROR"}}
                ]
            },
            status=400,
        )
    elif not sha and not query:
        return _json(
            {
                "errors": [
                    {"message": "GraphQL operations must contain a non-empty `query` or a `persistedQuery` extension."}
                ]
            },
            status=400,
        )
    if op not in (FILTERED_PRODUCTS, CONSUMER_DISPENSARIES, DISPENSARY_SEARCH):
        return _json(
            {"errors": [{"message": f"Unknown operation {op!r}", "extensions": {"code": "GRAPHQL_VALIDATION_FAILED"}}]},
            status=400,
        )
    response = web.Response(
        body=await _execute_bytes(state, op, variables, base, store_keys), content_type="application/json"
    )
    if compression_fault:
        response[edge_compression.FAULT] = compression_fault
    return response


async def _execute_bytes(state: DutchieState, op: str, variables: dict, base: str, store_keys: tuple) -> bytes:
    """The encoded response. Product pages without payload faults are cached: the benchmarks
    measure our crawler, not the sandbox's JSON encoder."""
    if op == FILTERED_PRODUCTS and not state.faults.could_fire(PAYLOAD_KINDS):
        pf = variables.get("productsFilter") or {}
        key = (
            state.epoch,
            pf.get("dispensaryId"),
            pf.get("Status"),
            variables.get("page"),
            variables.get("perPage"),
            base,
        )
        cached = state.page_cache.get(key)
        if cached is None:
            cached = json.dumps(await _execute(state, op, variables, base, store_keys), separators=(",", ":")).encode()
            if len(state.page_cache) > 2048:
                state.page_cache.clear()
            state.page_cache[key] = cached
        return cached
    return json.dumps(await _execute(state, op, variables, base, store_keys), separators=(",", ":")).encode()


async def _execute(state: DutchieState, op: str, variables: dict, base: str, store_keys: tuple) -> dict:
    catalog = state.catalog
    if op == CONSUMER_DISPENSARIES:
        key = (variables.get("dispensaryFilter") or {}).get("cNameOrID")
        store = catalog.find(key) if key else None
        return {"data": {"filteredDispensaries": [catalog.dispensary_object(store, base)] if store else []}}
    if op == DISPENSARY_SEARCH:
        f = variables.get("dispensaryFilter") or {}
        try:
            lat, lng = float(f["nearLat"]), float(f["nearLng"])
            distance = float(f.get("distance") or 25)
        except (KeyError, TypeError, ValueError):
            return {
                "errors": [{"message": "nearLat and nearLng are required", "extensions": {"code": "BAD_USER_INPUT"}}],
                "data": None,
            }
        hits = catalog.search(lat, lng, distance, f.get("destinationTaxState"))
        return {"data": {"filteredDispensaries": [catalog.dispensary_object(s, base, d) for s, d in hits]}}
    return _filtered_products(state, variables, base, store_keys)


def _filtered_products(state: DutchieState, variables: dict, base: str, store_keys: tuple) -> dict:
    catalog = state.catalog
    pf = variables.get("productsFilter") or {}
    store = catalog.find(pf.get("dispensaryId") or "")
    if pf.get("Status") is None:
        # the real API returns nothing for Status: null (docs/dutchie.md, "Products")
        return {"data": {"filteredProducts": {"products": [], "queryInfo": {"totalCount": 0, "totalPages": 0}}}}
    if store is None:
        return {"data": {"filteredProducts": {"products": [], "queryInfo": {"totalCount": 0, "totalPages": 0}}}}
    page = max(int(variables.get("page") or 0), 0)
    per_page = min(max(int(variables.get("perPage") or 50), 1), PER_PAGE_CAP)
    indices = catalog.product_indices(store, state.epoch)
    total = len(indices)
    payload_faults = {r.kind: r for r in state.faults.fire(PAYLOAD_KINDS, FILTERED_PRODUCTS, store_keys, page)}
    if "empty_menu" in payload_faults:
        return {"data": {"filteredProducts": {"products": [], "queryInfo": {"totalCount": 0, "totalPages": 0}}}}
    if "endless" in payload_faults:
        chosen = [indices[(page * per_page + j) % total] for j in range(per_page)] if total else []
        reported_total, total_pages = 10**7, 10**7 // per_page
    else:
        start = page * per_page
        chosen = indices[start : start + per_page]
        if "duplicates" in payload_faults and page > 0 and chosen:
            # unstable sort order: the first items of this page repeat the end of the previous one
            chosen = indices[start - 3 : start] + chosen[3:]
        reported_total = total
        if "lying_total" in payload_faults:
            reported_total = int(total * payload_faults["lying_total"].factor)
        total_pages = math.ceil(reported_total / per_page) if reported_total else 0
    products = [catalog.product(store, i, state.epoch, base) for i in chosen]
    return {
        "data": {
            "filteredProducts": {
                "products": products,
                "queryInfo": {"totalCount": reported_total, "totalPages": total_pages, "__typename": "QueryInfo"},
                "__typename": "FilteredProducts",
            }
        }
    }


def add_routes(app: web.Application) -> None:
    for path in ("/graphql", "/api-0/graphql", "/api-2/graphql", "/api-3/graphql", "/api-4/graphql"):
        app.router.add_route("GET", path, graphql)
        app.router.add_route("POST", path, graphql)
