"""Identity keys and unit prices, through the normalizer (as a crawl computes them)."""

from __future__ import annotations

import pytest

from cannaspider.identity import PLAUSIBLE, normalize_name, product_name_key
from cannaspider.items import RawProduct
from cannaspider.platforms.dutchie.normalizer import normalize
from cannaspider.storable import Losses

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


def norm(losses: Losses | None = None, **changes):
    return normalize(RawProduct(dispensary_id=1, crawl_run_id=1, raw={**FLOWER, **changes}), losses or Losses())


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
    "changes",
    [
        {"recPrices": [0, 60, 200]},  # $0: a placeholder, not a free eighth
        {"Options": [".001g"], "recPrices": [285_000.0], "recSpecialPrices": []},  # $285M a gram
        {"Options": ["1oz"], "recPrices": [5], "recSpecialPrices": []},  # $0.18 a gram
        {"type": "Edible", "Options": ["10pk"], "THCContent": {"unit": "MILLIGRAMS", "range": [1.0]}},
        {"type": "Accessories", "Options": ["N/A"], "recPrices": [9_999.0], "recSpecialPrices": []},
    ],
)
def test_an_implausible_unit_price_is_left_out_and_counted_the_price_kept_as_sent(changes):
    losses = Losses()
    p = norm(losses, **changes)
    assert (p.unit_price, p.unit_price_special, p.unit_price_basis) == (None, None, None)
    assert losses.implausible == 1
    assert p.price_rec == min(changes.get("recPrices", FLOWER["recPrices"]))


def test_an_implausible_special_alone_is_left_out():
    losses = Losses()
    p = norm(losses, recSpecialPrices=[0.5, 48, 160])  # $0.50 for an eighth: $0.14 a gram
    assert (p.unit_price, p.unit_price_special, p.unit_price_basis) == (10.0, None, "g")
    assert losses.implausible == 1


def test_the_plausible_ranges_keep_their_edges():
    for basis, (low, high) in PLAUSIBLE.items():
        assert 0 < low < high, basis
    # a pound of shake at $113.40 ($0.25 a gram) and a gram of rosin at $200 are plausible
    assert norm(Options=["1 lb"], recPrices=[113.4], recSpecialPrices=[]).unit_price == 0.25
    assert norm(Options=["1g"], recPrices=[200], recSpecialPrices=[]).unit_price == 200.0


def test_a_pound_costs_per_gram():
    p = norm(Options=["1/2 lb", "1lb"], recPrices=[900, 1700], recSpecialPrices=[])
    assert (p.unit_price, p.unit_price_basis, p.size_key) == (3.9683, "g", "226.8g,453.59g")


def test_options_named_by_tier_take_their_size_from_raw_options():
    sized = norm()
    tiered = norm(Options=["Tier 1", "Tier 2", "Tier 3"], rawOptions=["3.5g", "7g", "28g"])
    assert [o.option for o in tiered.options] == ["Tier 1", "Tier 2", "Tier 3"]
    assert [o.raw_option for o in tiered.options] == ["3.5g", "7g", "28g"]
    assert [(o.size_value, o.size_unit) for o in tiered.options] == [(3.5, "g"), (7.0, "g"), (28.0, "g")]
    # so it has a unit price, and the keys of the same product sold by size (it matches across stores)
    assert (tiered.unit_price, tiered.unit_price_special, tiered.unit_price_basis) == (10.0, 8.0, "g")
    assert (tiered.size_key, tiered.name_key, tiered.brand_name_key) == (
        sized.size_key,
        sized.name_key,
        sized.brand_name_key,
    )
    # an option's own size wins; rawOptions that are not strings, or missing, give none
    assert norm(rawOptions=["1g", "2g", "3g"]).size_key == "3.5g,7g,28g"
    assert norm(Options=["Tier 1", "Tier 2"], rawOptions=[7, None], recPrices=[35, 60]).size_key == ""
    assert norm(Options=["Tier 1", "Tier 2"], rawOptions=["3.5g"], recPrices=[35, 60]).size_key == "3.5g"


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


@pytest.mark.parametrize(
    "name, key",
    [
        ("Шишки", "шишки"),  # Cyrillic
        ("ШИШКИ & Ко.", "шишки and ко"),
        ("大麻工房", "大麻工房"),  # CJK
        ("ガンジャ", "ガンジャ"),  # kana keep their voicing marks
        ("Ｂｕｄ Ｂｒｏｓ", "bud bros"),  # full-width forms (NFKC)
        ("Crème Brûlée Farms", "creme brulee farms"),  # accented Latin
        ("Straße", "strasse"),  # case folded
        ("Bjørn’s", "bjørns"),
    ],
)
def test_a_brand_of_any_script_has_a_key(name, key):
    assert normalize_name(name) == key
    assert norm(brandName=name, brandId=None, brand=None).brand_name_key == key


def test_names_of_other_scripts_stay_distinct():
    names = ["Шишки", "Шишка", "大麻工房", "大麻商店", "ガンジャ", "カンジャ"]
    assert len({normalize_name(n) for n in names}) == len(names)
    assert normalize_name("Шишки") == normalize_name("шишки") == normalize_name(" шишки! ")


def test_a_key_is_bounded_whatever_the_name_expands_to():
    # U+FDFA is 18 characters under NFKC: a 500-character name of it must not make a 9,000-character key
    assert len(normalize_name("\ufdfa" * 500) or "") <= 400
    assert len(normalize_name("a" * 5000) or "") == 400


def test_identity_keys():
    p = norm(Name="Bud Bros - Blue Dream", enterpriseProductId="ent42")
    assert (p.brand_name_key, p.name_key, p.size_key) == ("bud bros", "blue dream", "3.5g,7g,28g")
    assert p.enterprise_product_id == "ent42"
    assert norm(enterpriseProductId="  ").enterprise_product_id is None
    assert norm(enterpriseProductId=12).enterprise_product_id is None
    # a name that only starts like the brand keeps it
    assert product_name_key("Bud Brosette OG", "bud bros") == "bud brosette og"


def test_the_cached_size_key_is_the_options_own():
    from cannaspider.identity import size_key
    from sandbox.catalog import _product

    for index in range(300):
        p = normalize(RawProduct(1, 1, _product(42, "sizes", index, 0, "http://127.0.0.1:1")), Losses())
        assert p.size_key == size_key(p.options)
    assert norm(Options=["1g", ["x"]], recPrices=[1, 2]).size_key == "1g"  # unhashable: the slow path
