"""Building Dutchie GraphQL requests and reading their responses.

Requests are GET with operationName/variables/extensions (persisted query) and the headers
Apollo's CSRF guard and Dutchie's edge expect. Responses are classified before anyone parses
them: a Cloudflare 403 HTML page or a 503 challenge is a block, a 403 with a JSON body is an API
error, a GraphQL error arrives as HTTP 200 with errors[], PersistedQueryNotFound means our hash
is stale (the fallback to the full query text lives in
cannaspider/platforms/dutchie/persisted_queries.py).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qsl, urlencode

import scrapy
from scrapy.http import Response
from twisted.python.failure import Failure

from cannaspider.platforms.dutchie.operations import QUERIES
from cannaspider.platforms.interface import PlatformFailure

# why an answer holds no data: blocked | challenge | http_error | malformed | graphql_errors | stale_hash
GraphQLFailure = PlatformFailure


def build_request(
    url: str,
    operation: str,
    variables: dict[str, Any],
    *,
    persisted_hash: str | None,
    client_name: str,
    callback: Callable[..., Any] | None,
    errback: Callable[[Failure], Any] | None = None,
    meta: dict[str, Any] | None = None,
    priority: int = 0,
) -> scrapy.Request:
    """GET with a persisted-query hash, or with the full query text when `persisted_hash` is None."""
    params = {"operationName": operation, "variables": json.dumps(variables, separators=(",", ":"))}
    if persisted_hash:
        params["extensions"] = json.dumps(
            {"persistedQuery": {"version": 1, "sha256Hash": persisted_hash}}, separators=(",", ":")
        )
    else:
        params["query"] = QUERIES[operation]
    meta = dict(meta or {})
    meta.update(
        {
            "graphql_operation": operation,
            "graphql_variables": variables,
            "graphql_full_query": persisted_hash is None,
            # page n+1's Referer would otherwise be page n's whole GraphQL URL (~730 bytes through
            # a proxy billed by the byte on every page, and no browser's: the menu's fetch sends the
            # page it runs on); the origin alone is what a browser sends under a strict policy
            "referrer_policy": "origin",
        }
    )
    return scrapy.Request(
        f"{url}?{urlencode(params)}",
        headers={
            "apollographql-client-name": client_name,
            "apollo-require-preflight": "true",
            "x-apollo-operation-name": operation,
            "content-type": "application/json",
            "accept": "application/json",
        },
        callback=callback,
        errback=errback,
        meta=meta,
        priority=priority,
        dont_filter=True,
    )


def with_full_query(request: scrapy.Request) -> scrapy.Request:
    """The same GraphQL request (callback, errback, meta, headers) with the full query text in
    place of the persisted-query hash."""
    base, _, query = request.url.partition("?")
    params = {k: v for k, v in parse_qsl(query, keep_blank_values=True) if k not in ("extensions", "query")}
    params["query"] = QUERIES[request.meta["graphql_operation"]]
    meta = {**request.meta, "graphql_full_query": True}
    return request.replace(url=f"{base}?{urlencode(params)}", meta=meta, dont_filter=True)


def _looks_like_html(body: bytes) -> bool:
    head = body[:512].lstrip().lower()
    return head.startswith(b"<!doctype html") or head.startswith(b"<html") or b"<head" in head


def read(response: Response) -> dict[str, Any] | GraphQLFailure:
    """The `data` object of a GraphQL response, or why there is none."""
    body = response.body
    if response.status in (403, 503) and (_looks_like_html(body) or b"Just a moment" in body):
        if response.status == 503 or b"Just a moment" in body or b"challenge" in body.lower():
            return GraphQLFailure("challenge", f"HTTP {response.status} Cloudflare challenge page")
        return GraphQLFailure(
            "blocked", f'HTTP {response.status} Cloudflare block page ("Sorry, you have been blocked")'
        )
    try:
        payload = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        if response.status != 200:
            return GraphQLFailure("http_error", f"HTTP {response.status} with a non-JSON body")
        return GraphQLFailure(
            "malformed", f"body is not valid JSON ({exc.__class__.__name__}: {exc}; {len(body)} bytes)"
        )
    if not isinstance(payload, dict):
        return GraphQLFailure("malformed", f"top-level JSON is a {type(payload).__name__}")
    errors = payload.get("errors")
    if errors:
        messages = [str(e.get("message") if isinstance(e, dict) else e) for e in _as_list(errors)]
        if any("PersistedQueryNotFound" in m for m in messages):
            return GraphQLFailure("stale_hash", "PersistedQueryNotFound")
        return GraphQLFailure("graphql_errors", "; ".join(messages)[:300])
    if response.status != 200:
        return GraphQLFailure("http_error", f"HTTP {response.status} (JSON API error)")
    data = payload.get("data")
    if not isinstance(data, dict):
        return GraphQLFailure("malformed", "no data object in the response")
    return data


def _as_list(value: object) -> list[Any]:
    return value if isinstance(value, list) else [value]
