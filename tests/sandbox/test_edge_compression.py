"""The sandbox's GraphQL answers compressed as Cloudflare's edge does (sandbox/edge_compression.py):
by Accept-Encoding, chunked, decodable into the very answer sent uncompressed; the compression
faults break the stream; images are never compressed. Over real HTTP on loopback, read raw
(urllib does not decode)."""

from __future__ import annotations

import gzip
import json
import zlib

import brotli
import pytest

from cannaspider.platforms.dutchie.operations import products_variables
from sandbox.edge_compression import negotiate
from tests.httpclient import http
from tests.sandbox.test_dutchie_api import HEADERS, get

BROWSER = "gzip, deflate, br, zstd"  # what Chrome and Firefox send


def products(sandbox, encoding: str | None, page: int = 0):
    headers = {**HEADERS, "Accept-Encoding": encoding} if encoding else HEADERS
    store = sandbox.stores("AZ")[0]["id"]
    return get(sandbox, "FilteredProducts", products_variables(store, page, 100), headers=headers)


def decode(body: bytes, encoding: str) -> bytes:
    return bytes(brotli.decompress(body)) if encoding == "br" else gzip.decompress(body)


def test_the_edge_prefers_brotli_then_gzip_and_honours_a_refusal():
    assert negotiate(BROWSER) == "br"
    assert negotiate("gzip, deflate") == "gzip"
    assert negotiate("br;q=0, gzip;q=0.5") == "gzip"
    assert negotiate("identity") is None and negotiate("") is None
    assert negotiate(BROWSER, ("gzip",)) == "gzip"


@pytest.mark.integration
@pytest.mark.parametrize("accept, encoding", [(BROWSER, "br"), ("gzip, deflate", "gzip")])
def test_a_compressed_answer_is_chunked_and_decodes_to_the_uncompressed_one(sandbox, accept, encoding):
    plain = products(sandbox, None)
    assert "Content-Encoding" not in plain.headers and int(plain.headers["Content-Length"]) == len(plain.body)
    packed = products(sandbox, accept)
    assert packed.status == 200
    assert packed.headers["Content-Encoding"] == encoding and packed.headers["Vary"] == "Accept-Encoding"
    assert packed.headers["Transfer-Encoding"] == "chunked" and "Content-Length" not in packed.headers
    assert len(packed.body) < len(plain.body) / 4  # a page of products compresses several times
    assert json.loads(decode(packed.body, encoding)) == plain.json()
    assert sandbox.call("GET", "/_sandbox/state")["compressed"] == {encoding: 1}


@pytest.mark.integration
def test_compression_switched_off_or_limited_to_gzip(sandbox):
    sandbox.call("POST", "/_sandbox/compression", {"on": False})
    assert "Content-Encoding" not in products(sandbox, BROWSER).headers
    sandbox.call("POST", "/_sandbox/compression", {"on": True, "encodings": ["gzip"]})
    assert products(sandbox, BROWSER).headers["Content-Encoding"] == "gzip"
    sandbox.reset()
    assert products(sandbox, BROWSER).headers["Content-Encoding"] == "br"


@pytest.mark.integration
def test_images_and_the_control_api_are_never_compressed(sandbox):
    image = http("GET", sandbox.urls.base + "/images/products/abc.png", headers={"Accept-Encoding": BROWSER})
    assert image.status == 200 and "Content-Encoding" not in image.headers
    state = http("GET", sandbox.urls.base + "/_sandbox/state", headers={"Accept-Encoding": BROWSER})
    assert "Content-Encoding" not in state.headers


@pytest.mark.integration
@pytest.mark.parametrize("encoding", ["br", "gzip"])
@pytest.mark.parametrize("kind", ["truncated_compressed", "corrupt_compressed"])
def test_the_compression_faults_break_the_stream_not_the_http_message(sandbox, kind, encoding):
    sandbox.call("POST", "/_sandbox/compression", {"encodings": [encoding]})
    sandbox.faults({"kind": kind, "pages": [1]})
    good = products(sandbox, BROWSER, page=0)
    assert json.loads(decode(good.body, encoding))
    broken = products(sandbox, BROWSER, page=1)
    assert broken.status == 200 and broken.headers["Content-Encoding"] == encoding
    with pytest.raises((brotli.error, zlib.error, EOFError, OSError, ValueError)):
        json.loads(decode(broken.body, encoding))
    # uncompressed, the same page is whole: the fault is the compressed stream's
    assert products(sandbox, None, page=1).json()["data"]["filteredProducts"]["products"]
