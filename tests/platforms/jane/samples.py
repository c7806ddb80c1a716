"""Jane's answers for the conformance suite (tests/platforms/test_conformance.py), in the shapes of
Jane's Algolia (docs/jane.md): products are the sandbox's products-index documents
(sandbox/jane_api.py, with the fields of real ones), answers are Algolia's (`hits`, `nbHits`,
`nbPages`, `page`), the block page is the sandbox's edge page."""

from __future__ import annotations

import copy
import json
from typing import Any

from scrapy import Request
from scrapy.http import HtmlResponse, Response, TextResponse

from sandbox.jane_api import BLOCK_PAGE, JaneCatalog, hit

URL = "http://127.0.0.1:1/jane/1/indexes/menu-products-production/query"
STORE_ID = 4001


def _answer(payload: object, status: int = 200) -> Response:
    return TextResponse(URL, status=status, body=json.dumps(payload).encode(), request=Request(URL, method="POST"))


def raw_products(n: int) -> list[Any]:
    """`n` products of one store, with distinct ids (copies: a test may change one)."""
    return [copy.deepcopy(hit(7, STORE_ID, i, 0, "http://127.0.0.1:1")) for i in range(n)]


def anonymous_product() -> Any:
    raw = raw_products(1)[0]
    raw.pop("product_id", None)
    return raw


def menu_response(products: list[Any], total_count: int | None, per_page: int, page: int | None = None) -> Response:
    """A products page holding `products`, announcing `total_count` hits in all (no page number
    unless given: the conformance suite's pages say none)."""
    answer: dict[str, Any] = {"hits": products, "hitsPerPage": per_page}
    if total_count is not None:
        answer.update(nbHits=total_count, nbPages=-(-total_count // per_page))
    if page is not None:
        answer["page"] = page
    return _answer(answer)


def malformed_menu_response() -> Response:
    return _answer({"nbHits": 3, "page": 0})


def blocked_response() -> Response:
    return HtmlResponse(URL, status=403, body=BLOCK_PAGE.encode(), request=Request(URL, method="POST"))


def _store_document() -> dict[str, Any]:
    catalog = JaneCatalog()
    return catalog.store_document(catalog.stores[0])


def stores_response() -> Response:
    return _answer({"hits": [_store_document(), {"name": "no id"}], "nbHits": 2, "nbPages": 1, "page": 0})


def lookup_response() -> tuple[Response, str]:
    doc = _store_document()
    return _answer({"hits": [doc], "nbHits": 1, "nbPages": 1, "page": 0}), str(doc["id"])


def website_html() -> tuple[str, str]:
    return '<html><iframe src="https://www.iheartjane.com/embed/stores/4536/menu"></iframe></html>', "4536"


def menu_url() -> tuple[str, str]:
    return "https://www.iheartjane.com/stores/5876/buffalo-dreams/menu", "5876"
