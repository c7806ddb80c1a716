"""Dutchie's answers for the conformance suite (tests/platforms/test_conformance.py): every platform
gives the same samples in its own shapes (docs/platforms.md, "Adding a platform"). The recorded ones
come from tests/fixtures/ (the real ConsumerDispensaries answer, Cloudflare's real 403 page); the
products are the sandbox catalog's, which imitates the real FilteredProducts payload and its quirks
(docs/dutchie.md, "Products")."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from scrapy import Request
from scrapy.http import HtmlResponse, Response, TextResponse

from sandbox.catalog import _product

ROOT = Path(__file__).resolve().parents[3]
URL = "http://127.0.0.1:1/graphql"
SLUG = "sandbox-store"


def _answer(payload: object, status: int = 200) -> Response:
    return TextResponse(URL, status=status, body=json.dumps(payload).encode(), request=Request(URL))


def raw_products(n: int) -> list[Any]:
    """`n` products of one store, with distinct ids, as the platform sends them (copies: a test may
    change one)."""
    return [copy.deepcopy(_product(7, "conformance", i, 0, "http://127.0.0.1:1")) for i in range(n)]


def anonymous_product() -> Any:
    """A product the platform sent without a usable id."""
    raw = raw_products(1)[0]
    raw.pop("_id", None)
    raw.pop("id", None)
    return raw


def menu_response(products: list[Any], total_count: int | None, per_page: int) -> Response:
    """A menu page holding `products`, announcing `total_count` products in all."""
    info: dict[str, Any] = {}
    if total_count is not None:
        info = {"totalCount": total_count, "totalPages": -(-total_count // per_page)}
    return _answer({"data": {"filteredProducts": {"products": products, "queryInfo": info}}})


def malformed_menu_response() -> Response:
    """An answer of the API that holds no product list."""
    return _answer({"data": {"filteredProducts": None}})


def blocked_response() -> Response:
    """The block page the platform's edge really returns (tests/fixtures/README.md)."""
    body = (ROOT / "sandbox" / "cloudflare_403.html").read_bytes()
    return HtmlResponse(URL, status=403, body=body, request=Request(URL))


def _real_dispensary() -> dict[str, Any]:
    payload = json.loads((ROOT / "tests" / "fixtures" / "dutchie" / "consumer-dispensaries.real.json").read_text())
    found: list[dict[str, Any]] = payload["data"]["filteredDispensaries"]
    return found[0]


def stores_response() -> Response:
    """An area search's answer: the recorded store (DispensarySearch answers in its shape)."""
    return _answer({"data": {"filteredDispensaries": [_real_dispensary(), {"name": "no id"}]}})


def lookup_response() -> tuple[Response, str]:
    """A platform-id lookup's recorded answer, and the slug it was asked for."""
    obj = _real_dispensary()
    return _answer({"data": {"filteredDispensaries": [obj]}}), obj["cName"]


def website_html() -> tuple[str, str]:
    """A store's own page embedding the platform's menu, and the platform id the embed names."""
    pid = "5e2f1c0a9b8d7e6f5a4b3c2d"
    return f'<html><script src="https://dutchie.com/api/v2/embedded-menu/{pid}.js"></script></html>', pid


def menu_url() -> tuple[str, str]:
    """A menu URL on the platform, and the slug it names."""
    return f"https://dutchie.com/embedded-menu/{SLUG}", SLUG
