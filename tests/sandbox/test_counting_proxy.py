"""The byte-counting forward proxy (sandbox/counting_proxy.py): every byte either way counted,
per exchange on a kept connection, the answer relayed unchanged."""

from __future__ import annotations

import json
import socket
from urllib.parse import urlencode

import pytest

from cannaspider.platforms.dutchie.operations import DEFAULT_PERSISTED_HASHES, products_variables
from sandbox.counting_proxy import CountingProxy, graphql_of

SHA = DEFAULT_PERSISTED_HASHES["FilteredProducts"]


def request_bytes(url: str, close: bool) -> bytes:
    head = [
        f"GET {url} HTTP/1.1",
        "Host: 127.0.0.1",
        "Accept-Encoding: br",
        "apollo-require-preflight: true",
        "Proxy-Authorization: Basic c2NvdXQ6cHc=",
    ]
    if close:
        head.append("Connection: close")
    return ("\r\n".join(head) + "\r\n\r\n").encode()


@pytest.mark.integration
def test_each_exchange_on_a_kept_connection_is_counted_to_the_byte(sandbox):
    store = sandbox.stores("AZ")[0]["id"]
    params = {
        "operationName": "FilteredProducts",
        "variables": json.dumps(products_variables(store, 0, 100)),
        "extensions": json.dumps({"persistedQuery": {"version": 1, "sha256Hash": SHA}}),
    }
    graphql = f"{sandbox.urls.graphql}?{urlencode(params)}"
    image = f"{sandbox.urls.base}/images/products/abc.png"
    first, second = request_bytes(graphql, close=False), request_bytes(image, close=True)
    with CountingProxy() as proxy, socket.create_connection(("127.0.0.1", proxy.port), timeout=30) as conn:
        conn.sendall(first)
        received = bytearray()
        while b"0\r\n\r\n" not in received:  # the chunked answer's end
            received += conn.recv(65536)
        conn.sendall(second)
        while chunk := conn.recv(65536):
            received += chunk
        exchanges = proxy.take()
    assert [e.sent for e in exchanges] == [len(first), len(second)]
    assert sum(e.received for e in exchanges) == len(received)
    answer, picture = exchanges
    assert (answer.operation, answer.store, answer.encoding, answer.status) == ("FilteredProducts", store, "br", 200)
    assert answer.framing > 0 and picture.framing == 0  # chunked, then Content-Length
    assert picture.operation is None and picture.url == image
    assert received.endswith(picture_body(sandbox, image))


def picture_body(sandbox, image: str) -> bytes:
    with socket.create_connection(("127.0.0.1", int(sandbox.urls.base.rsplit(":", 1)[1])), timeout=30) as conn:
        conn.sendall(b"GET /images/products/abc.png HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        raw = bytearray()
        while chunk := conn.recv(65536):
            raw += chunk
    return bytes(raw.split(b"\r\n\r\n", 1)[1])


def test_the_store_and_operation_come_from_a_get_or_a_post():
    variables = json.dumps({"productsFilter": {"dispensaryId": "abc"}})
    query = urlencode({"operationName": "Op", "variables": variables})
    assert graphql_of("http://h/graphql?" + query, b"") == ("Op", "abc")
    body = json.dumps({"operationName": "D", "variables": {"dispensaryFilter": {"cNameOrID": "shop"}}}).encode()
    assert graphql_of("http://h/graphql", body) == ("D", "shop")
    assert graphql_of("http://h/images/x.png", b"") == (None, None)
