"""Jane's Algolia requests and answers (cannaspider/platforms/jane/algolia.py): the headers a browser
sends, the store filter, how each failure of the host is classified, store documents."""

from __future__ import annotations

import json

from scrapy import Request
from scrapy.http import HtmlResponse, TextResponse
from scrapy.settings import Settings

from cannaspider import platforms
from cannaspider.platforms.interface import PlatformFailure
from cannaspider.platforms.jane import algolia
from cannaspider.platforms.jane.platform import JanePlatform

URL = "http://127.0.0.1:1/1/indexes/menu-products-production/query"


def response(body: bytes, status: int = 200, cls: type[TextResponse] = TextResponse) -> TextResponse:
    return cls(URL, status=status, body=body, request=Request(URL, method="POST"))


def jane(**settings: object) -> JanePlatform:
    s = Settings()
    s.setmodule("cannaspider.settings")
    s.update(settings)
    platform = platforms.build("jane", s)
    assert isinstance(platform, JanePlatform)
    return platform


def test_a_menu_page_is_a_post_with_algolias_headers_and_the_embedding_pages_origin():
    request = jane().menu_request("5876", 2, 1000, callback=print, errback=print, meta={"page": 2})
    assert request.method == "POST" and request.dont_filter
    assert request.url.startswith("https://search.iheartjane.com/1/indexes/menu-products-production/query?")
    assert "x-algolia-agent=Algolia%20for%20JavaScript" in request.url
    assert request.headers["x-algolia-application-id"] == b"VFM4X0N23A"
    assert request.headers["x-algolia-api-key"] == b"edc5435c65d771cecbd98bbd488aa8d3"
    assert request.headers["origin"] == b"https://www.iheartjane.com"
    assert request.headers["referer"] == b"https://www.iheartjane.com/"
    assert json.loads(request.body) == {"query": "", "filters": "store_id = 5876", "hitsPerPage": 1000, "page": 2}


def test_settings_point_the_platform_elsewhere():
    platform = jane(
        JANE_ALGOLIA_URL="http://127.0.0.1:9/jane/",
        JANE_ALGOLIA_APP_ID="APP",
        JANE_ALGOLIA_API_KEY="KEY",
        JANE_PRODUCTS_INDEX="products-x",
        JANE_STORES_INDEX="stores-x",
        JANE_PER_PAGE=5000,
    )
    assert platform.per_page == 1000  # Algolia's maximum
    request = platform.menu_request("1", 0, 10, callback=print, errback=print, meta={})
    assert request.url.startswith("http://127.0.0.1:9/jane/1/indexes/products-x/query?")
    assert request.headers["x-algolia-api-key"] == b"KEY"
    search = platform.area_requests("AZ", "Phoenix", callback=print, errback=print, meta={})[0]
    params = json.loads(search.body)
    assert "/indexes/stores-x/" in search.url and params["aroundRadius"] == int(50 * 1609.344)
    assert params["aroundLatLng"].count(",") == 1


def test_a_store_id_that_is_not_a_number_cannot_add_a_clause():
    assert algolia.store_filter("42") == "store_id = 42"
    assert algolia.store_filter('1" OR store_id:"2') == 'store_id:"1\\" OR store_id:\\"2"'


def test_each_failure_of_the_host_is_said_so():
    bad_key = response(b'{"message":"Invalid Application-ID or API key","status":403}', 403)
    failure = algolia.read(bad_key)
    assert isinstance(failure, PlatformFailure) and failure.kind == "http_error"
    assert "refused the application id or API key" in failure.message
    blocked = algolia.read(response(b"<!DOCTYPE html><html><head></head></html>", 403, HtmlResponse))
    assert isinstance(blocked, PlatformFailure) and blocked.kind == "blocked"
    challenge = algolia.read(response(b"<html><head><title>Just a moment...</title></head></html>", 503, HtmlResponse))
    assert isinstance(challenge, PlatformFailure) and challenge.kind == "challenge"
    limited = algolia.read(response(b'{"message":"Too many requests","status":429}', 429))
    assert isinstance(limited, PlatformFailure) and "HTTP 429" in limited.message
    broken = algolia.read(response(b'{"hits": ['))
    assert isinstance(broken, PlatformFailure) and broken.kind == "malformed"
    deep = algolia.read(response(b"[" * 100_000 + b"]" * 100_000))
    assert isinstance(deep, PlatformFailure) and deep.kind == "malformed"


def test_a_50_mb_page_is_read_or_refused_as_a_whole():
    hit = {"product_id": 1, "name": "A", "padding": "x" * (50 * 1024 * 1024)}
    body = json.dumps({"hits": [hit], "nbHits": 1, "nbPages": 1, "page": 0}).encode()
    page = jane().read_menu_page(response(body))
    assert not isinstance(page, PlatformFailure) and len(page.products) == 1
    cut = jane().read_menu_page(response(body[: len(body) // 2]))
    assert isinstance(cut, PlatformFailure) and cut.kind == "malformed"


def test_a_store_document_is_the_shared_record():
    doc = {
        "id": 5876,
        "name": " Buffalo Dreams ",
        "url_slug": "buffalo-dreams",
        "full_address": "900 Niagara Falls Blvd, Buffalo, NY 14223",
        "city": "Buffalo",
        "state": "ny",
        "zip": "14223",
        "_geoloc": {"lat": 42.97, "lng": -78.82},
        "recreational": True,
        "medical": "yes",
    }
    record = algolia.dispensary_record(doc)
    assert record is not None
    assert (record.platform, record.platform_dispensary_id, record.name, record.state) == (
        "jane",
        "5876",
        "Buffalo Dreams",
        "NY",
    )
    assert record.menu_url == "https://www.iheartjane.com/stores/5876/buffalo-dreams/menu"
    assert (record.lat, record.lng, record.is_recreational, record.is_medical) == (42.97, -78.82, True, None)
    assert algolia.dispensary_record({"id": "abc", "name": "x"}) is None
    assert algolia.dispensary_record({"id": 1, "name": " "}) is None


def test_a_menu_url_or_embed_names_the_store_id():
    platform = jane()
    assert platform.slug_of("https://www.iheartjane.com/embed/stores/4536/menu/vapes") == "4536"
    assert platform.slug_of("https://www.iheartjane.com/stores/5876") == "5876"
    assert platform.slug_of("https://dutchie.com/embedded-menu/x") is None
    assert platform.read_website('<script>window.janeStoreId = "6928";</script>', "http://x/").platform_id == "6928"
