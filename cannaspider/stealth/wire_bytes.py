"""Bytes received on the wire, per platform, per proxy and per kind of request (issue 31): what a
proxy billed by the gigabyte carries for us, in the crawl's stats.

Names (a later Prometheus exporter maps each path to a label):
- `cannaspider/bytes_received`: every impersonated download;
- `cannaspider/bytes_received/platform/<platform>` (`dutchie`);
- `cannaspider/bytes_received/proxy/<id>`: the proxy's row id, never its URL or credentials;
  a request sent without a proxy counts under `direct`;
- `cannaspider/bytes_received/kind/<graphql|images|other>`.

What is counted is what curl received for the answer: its header bytes (the status line and
headers, a CONNECT's answer from the proxy included) and its body as it came, compressed, before
curl decoded it (CURLINFO_SIZE_DOWNLOAD_T counts the body before content decoding; the chunked
framing is not counted). Scrapy's own `downloader/response_bytes` counts the decoded body, up to
ten times more for a brotli JSON page. Not counted: TLS framing and handshakes (a new tunnel's
handshake is some 5 KB), the request bytes sent, and answers that failed in transfer (a timeout,
a corrupt compressed stream): a proxy bills those too, so the proxy's count is the upper one
(benchmarks/proxy_bytes.py measures both on loopback).
"""

from __future__ import annotations

from scrapy import Request
from scrapy.statscollectors import StatsCollector

from cannaspider.stealth.routing import PROXY_META

PREFIX = "cannaspider/bytes_received"
DEFAULT_PLATFORM = "dutchie"  # the only crawl platform (tasks/roles.py PLATFORMS)


def kind_of(request: Request) -> str:
    if "graphql_operation" in request.meta:
        return "graphql"
    if request.meta.get("stealth_slot") == "images":
        return "images"
    return "other"


def stat_names(request: Request) -> tuple[str, ...]:
    """The stats one answer to this request adds its bytes to."""
    platform = request.meta.get("platform") or DEFAULT_PLATFORM
    proxy = request.meta.get(PROXY_META)
    return (
        PREFIX,
        f"{PREFIX}/platform/{platform}",
        f"{PREFIX}/proxy/{proxy if proxy is not None else 'direct'}",
        f"{PREFIX}/kind/{kind_of(request)}",
    )


def count(stats: StatsCollector, request: Request, received: int) -> None:
    for name in stat_names(request):
        stats.inc_value(name, received)
