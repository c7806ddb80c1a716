"""Bytes received, as the crawl's stats count them (cannaspider/stealth/wire_bytes.py and the curl
download in stealth/tls.py): per platform, proxy id and kind, and equal to what a counting proxy
relayed, headers and compressed body, less the chunked framing curl does not count."""

from __future__ import annotations

import asyncio
import json
import random
from urllib.parse import urlencode

import pytest
from scrapy import Request
from scrapy.settings import Settings

from cannaspider.platforms.dutchie.operations import DEFAULT_PERSISTED_HASHES, products_variables
from cannaspider.stealth.identity import IdentityFactory
from cannaspider.stealth.routing import PROXY_META
from cannaspider.stealth.tls import WIRE_BYTES_META, CurlImpersonator, impersonate_target
from cannaspider.stealth.wire_bytes import PREFIX, stat_names
from sandbox.counting_proxy import CountingProxy
from tests.helpers import project_settings


def test_the_stats_name_the_platform_the_proxy_id_and_the_kind_never_the_url():
    page = Request("http://user:secret@proxy.example/graphql", meta={"graphql_operation": "F", PROXY_META: 7})
    assert stat_names(page) == (
        PREFIX,
        f"{PREFIX}/platform/dutchie",
        f"{PREFIX}/proxy/7",
        f"{PREFIX}/kind/graphql",
    )
    image = Request("http://cdn.example/a.png", meta={"stealth": True, "stealth_slot": "images", PROXY_META: 3})
    assert stat_names(image)[2:] == (f"{PREFIX}/proxy/3", f"{PREFIX}/kind/images")
    direct = Request("http://example.com/", meta={"platform": "other"})
    assert stat_names(direct)[1:] == (f"{PREFIX}/platform/other", f"{PREFIX}/proxy/direct", f"{PREFIX}/kind/other")
    assert not any("secret" in name or "example" in name for name in stat_names(page) + stat_names(image))


def graphql_url(sandbox) -> str:
    store = sandbox.stores("AZ")[0]["id"]
    params = {
        "operationName": "FilteredProducts",
        "variables": json.dumps(products_variables(store, 0, 100)),
        "extensions": json.dumps(
            {"persistedQuery": {"version": 1, "sha256Hash": DEFAULT_PERSISTED_HASHES["FilteredProducts"]}}
        ),
    }
    return f"{sandbox.urls.graphql}?{urlencode(params)}"


@pytest.mark.parametrize("compressed", [True, False], ids=["br-chunked", "uncompressed"])
def test_the_bytes_curl_received_are_the_proxys_less_the_chunk_framing(sandbox, compressed):
    sandbox.call("POST", "/_sandbox/compression", {"on": compressed})
    who = IdentityFactory(random.Random(5)).draw()
    curl = CurlImpersonator(Settings({**project_settings(), "DOWNLOAD_TIMEOUT": 60}))
    with CountingProxy() as proxy:
        requests = []
        for url in (graphql_url(sandbox), sandbox.urls.base + "/images/products/abc.png"):
            request = Request(url, meta={"proxy": proxy.url, "impersonate": impersonate_target(who)})
            for name, value in who.apply([("apollo-require-preflight", "true")]):
                request.headers[name] = value
            requests.append(request)

        async def run() -> list:
            try:
                return [await curl.download(r) for r in requests]
            finally:
                await curl.close()

        page, image = asyncio.run(run())
        exchanges = proxy.take()
    assert json.loads(page.body)["data"]["filteredProducts"]["products"]  # decoded by curl
    assert "Content-Encoding" not in page.headers  # so HttpCompressionMiddleware cannot decode it twice
    answer, picture = exchanges
    assert answer.encoding == ("br" if compressed else None)
    assert page.meta[WIRE_BYTES_META] == answer.received - answer.framing
    assert image.meta[WIRE_BYTES_META] == picture.received
    if compressed:
        assert page.meta[WIRE_BYTES_META] < len(page.body) / 4  # counted as it came, not decoded
