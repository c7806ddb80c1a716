"""Dutchie's GraphQL answers compressed as Cloudflare's edge compresses them (issue 31): brotli
when the request's Accept-Encoding allows it, else gzip, else none; `Content-Encoding` and
`Vary: Accept-Encoding` set; the body sent chunked, without Content-Length, as an edge that
compresses on the fly sends it.

What the edge compresses (developers.cloudflare.com/speed/optimization/content/compression/):
text and JSON content types (never images), successful answers and of the error statuses only
403 and 404. Its levels are not published; brotli 5 and gzip 6 are what its answers measure and
what on-the-fly compressors use. Zstandard is opt-in there (a compression rule), so not here.

Two faults break the compressed stream, for the crawler to prove it neither crashes nor counts a
broken page as read (sandbox/faults.py): `truncated_compressed` sends half the compressed body
and ends the chunked message properly (the HTTP message is whole, the compressed stream is not);
`corrupt_compressed` sends the whole length with bytes in its middle garbled. The graphql handler
marks the response (`response[FAULT]`) and this middleware applies the mark.
"""

from __future__ import annotations

import gzip
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import brotli
from aiohttp import web

BROTLI_QUALITY = 5
GZIP_LEVEL = 6
CHUNK = 8192  # bytes per HTTP chunk
COMPRESSIBLE = ("application/json", "application/graphql-response+json", "text/")
COMPRESSED_ERRORS = (403, 404)
FAULT = web.ResponseKey("sandbox_compression_fault", str)  # "truncated_compressed" or "corrupt_compressed"
ENCODINGS = ("br", "gzip")  # in the edge's order of preference


@dataclass
class EdgeSettings:
    """Switched over the control API (/_sandbox/compression); `answered` counts the answers
    compressed, by encoding (/_sandbox/state)."""

    on: bool = True
    encodings: tuple[str, ...] = ENCODINGS
    answered: Counter[str] = field(default_factory=Counter)

    def reset(self) -> None:
        self.on, self.encodings = True, ENCODINGS
        self.answered.clear()


EDGE = web.AppKey("edge_compression", EdgeSettings)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def negotiate(accept_encoding: str, offered: tuple[str, ...] = ENCODINGS) -> str | None:
    """The encoding the edge answers with: the first it offers (br, then gzip) that the client
    accepts (`q=0` refuses one)."""
    accepted = set()
    for part in accept_encoding.lower().split(","):
        name, _, params = part.strip().partition(";")
        if params.strip().replace(" ", "") in ("q=0", "q=0.0", "q=0.00", "q=0.000"):
            continue
        accepted.add(name.strip())
    for encoding in offered:
        if encoding in accepted or "*" in accepted:
            return encoding
    return None


def compress(body: bytes, encoding: str) -> bytes:
    if encoding == "br":
        return bytes(brotli.compress(body, quality=BROTLI_QUALITY))
    return gzip.compress(body, compresslevel=GZIP_LEVEL, mtime=0)


def damage(compressed: bytes, fault: str) -> bytes:
    if fault == "truncated_compressed":
        return compressed[: len(compressed) // 2]
    middle = len(compressed) // 2
    return compressed[:middle] + bytes(b ^ 0x5A for b in compressed[middle : middle + 64]) + compressed[middle + 64 :]


def compressible(response: web.StreamResponse) -> bool:
    # bytes: a str body would be a payload aiohttp encodes later (the sandbox's answers are bytes)
    if not isinstance(response, web.Response) or not isinstance(response.body, bytes):
        return False
    if "Content-Encoding" in response.headers:
        return False
    if not (200 <= response.status < 300 or response.status in COMPRESSED_ERRORS):
        return False
    return response.content_type.startswith(COMPRESSIBLE)


@web.middleware
async def edge_compression(request: web.Request, handler: Handler) -> web.StreamResponse:
    response = await handler(request)
    edge = request.app.get(EDGE) or EdgeSettings()
    if not request.path.endswith("/graphql") or not edge.on or not compressible(response):
        return response
    encoding = negotiate(request.headers.get("Accept-Encoding", ""), edge.encodings)
    if encoding is None:
        return response
    edge.answered[encoding] += 1
    assert isinstance(response, web.Response) and isinstance(response.body, bytes)
    body = compress(response.body, encoding)
    fault = response.get(FAULT)
    if fault:
        body = damage(body, fault)
    streamed = web.StreamResponse(status=response.status, reason=response.reason)
    for name, value in response.headers.items():
        if name.lower() not in ("content-length", "content-encoding", "transfer-encoding"):
            streamed.headers.add(name, value)
    streamed.headers["Content-Encoding"] = encoding
    streamed.headers["Vary"] = "Accept-Encoding"
    streamed.enable_chunked_encoding()
    await streamed.prepare(request)
    for start in range(0, len(body), CHUNK):
        await streamed.write(body[start : start + CHUNK])
    await streamed.write_eof()
    return streamed
