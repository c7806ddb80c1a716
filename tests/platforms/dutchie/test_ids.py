"""The one identity rule shared by the spider's seen set and the normalizer."""

from __future__ import annotations

import pytest

from cannaspider.items import RawProduct
from cannaspider.platforms.dutchie.ids import product_id
from cannaspider.platforms.dutchie.normalizer import NormalizationError, normalize
from cannaspider.storable import Losses

ID = "6405ef617056e8014d79101b"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ({"_id": ID}, ID),
        ({"id": ID}, ID),
        ({"_id": f"  {ID}\n"}, ID),  # stripped, as the normalizer stores it
        ({"_id": "", "id": ID}, ID),
        ({"_id": "   "}, None),
        ({"_id": 12345}, None),
        ({"_id": None}, None),
        ({}, None),
        ("not a product", None),
        ({"_id": "6405ef61\x007056e8014d79101b"}, None),  # NUL: PostgreSQL cannot store it
        ({"_id": "6405ef617056e8014d79\ud800"}, None),  # lone surrogate: not UTF-8
    ],
)
def test_product_id(raw, expected):
    assert product_id(raw) == expected


@pytest.mark.parametrize("bad", ["", "   ", "ab\x00cd", "ab\udc00cd"])
def test_the_normalizer_refuses_exactly_what_the_spider_cannot_count(bad):
    with pytest.raises(NormalizationError):
        normalize(RawProduct(1, 1, {"_id": bad, "Name": "Gummies"}), Losses())


def test_the_normalizer_stores_the_id_the_spider_counts():
    product = normalize(RawProduct(1, 1, {"_id": f" {ID} ", "Name": "Gummies"}), Losses())
    assert product.provider_product_id == product_id({"_id": f" {ID} "}) == ID
