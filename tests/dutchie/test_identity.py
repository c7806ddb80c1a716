"""Identity keys and unit prices, through the normalizer (as a crawl computes them)."""

from __future__ import annotations

import pytest

from cannaspider.dutchie.identity import normalize_name, product_name_key
from cannaspider.dutchie.normalizer import normalize
from cannaspider.items import RawProduct

# the payload's shapes as docs/dutchie.md records them (option strings, {unit, range} potency)
FLOWER = {
    "_id": "6913e3cd444eac3935e928b9",
    "Name": "Blue Dream",
    "brandName": "Bud Bros",
    "brandId": "0d3f5a9e-1b2c-4d5e-8f90-123456789abc",
    "type": "Flower",
    "Options": ["1/8oz", "1/4oz", "1oz"],
    "recPrices": [35, 60, 200],
    "recSpecialPrices": [28, 48, 160],
    "THCContent": {"unit": "PERCENTAGE", "range": [21.5]},
}


def norm(**changes):
    return normalize(RawProduct(dispensary_id=1, crawl_run_id=1, raw={**FLOWER, **changes}))


def test_flower_costs_per_gram_of_its_cheapest_option():
    p = norm()
    # 1/8oz = 3.5 g at $35: $10/g; its special ($28) on the same option: $8/g
    assert (p.unit_price, p.unit_price_special, p.unit_price_basis) == (10.0, 8.0, "g")


def test_per_gram_of_half_gram_and_1gc_options():
    assert norm(Options=[".5g", "1g"], recPrices=[12.5, 20], recSpecialPrices=[]).unit_price == 25.0
    p = norm(Options=["1gC", "1/8oz"], recPrices=[9, 30], recSpecialPrices=[])
    assert (p.unit_price, p.unit_price_special, p.unit_price_basis) == (9.0, None, "g")


def test_edibles_with_mg_potency_cost_per_100_mg_thc():
    p = norm(
        type="Edible",
        Options=["10pk"],
        recPrices=[18],
        recSpecialPrices=[],
        THCContent={"unit": "MILLIGRAMS", "range": [100.0]},
    )
    assert (p.unit_price, p.unit_price_basis) == (18.0, "100mg_thc")
    mg = {"unit": "MILLIGRAMS", "range": [50.0]}
    p = norm(type="Edible", Options=["100mg"], recPrices=[9], recSpecialPrices=[], THCContent=mg)
    assert (p.unit_price, p.unit_price_basis) == (18.0, "100mg_thc")


def test_other_products_cost_per_unit():
    # an edible without a potency in mg: per piece of its pack
    p = norm(type="Edible", Options=["10pk"], recPrices=[25], recSpecialPrices=[], THCContent=None)
    assert (p.unit_price, p.unit_price_basis) == (2.5, "unit")
    p = norm(type="Accessories", Options=["N/A"], recPrices=[14.99], recSpecialPrices=[])
    assert (p.unit_price, p.unit_price_basis) == (14.99, "unit")
    p = norm(type="Tincture", Options=["30ml"], recPrices=[40], recSpecialPrices=[])  # ml: not weighed
    assert (p.unit_price, p.unit_price_basis) == (40.0, "unit")


def test_no_price_no_unit_price_and_no_absurd_one():
    p = norm(recPrices=[], Prices=[], recSpecialPrices=[])
    assert (p.unit_price, p.unit_price_special, p.unit_price_basis) == (None, None, None)
    # $9,999,999,999 for 0.001 g would overflow its column (and lose the batch): none
    p = norm(Options=[".001g"], recPrices=[9_999_999_999.0], recSpecialPrices=[])
    assert (p.unit_price, p.unit_price_basis) == (None, None)


@pytest.mark.parametrize(
    "a, b",
    [
        ("Dr. Zodiak's", "DR ZODIAKS"),
        ("Bud & Bros", "Bud and Bros"),
        ("Cañamo", "Canamo"),
        ("  Item 9   Labs ", "item-9-labs"),
    ],
)
def test_spellings_of_one_brand_normalize_alike(a, b):
    assert normalize_name(a) == normalize_name(b) is not None


def test_identity_keys():
    p = norm(Name="Bud Bros - Blue Dream", enterpriseProductId="ent42")
    assert (p.brand_name_key, p.name_key, p.size_key) == ("bud bros", "blue dream", "3.5g,7g,28g")
    assert p.enterprise_product_id == "ent42"
    assert norm(enterpriseProductId="  ").enterprise_product_id is None
    assert norm(enterpriseProductId=12).enterprise_product_id is None
    # a name that only starts like the brand keeps it
    assert product_name_key("Bud Brosette OG", "bud bros") == "bud brosette og"


def test_the_cached_size_key_is_the_options_own():
    from cannaspider.dutchie.identity import size_key
    from sandbox.catalog import _product

    for index in range(300):
        p = normalize(RawProduct(1, 1, _product(42, "sizes", index, 0, "http://127.0.0.1:1")))
        assert p.size_key == size_key(p.options)
    assert norm(Options=["1g", ["x"]], recPrices=[1, 2]).size_key == "1g"  # unhashable: the slow path
