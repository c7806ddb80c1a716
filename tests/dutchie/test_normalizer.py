"""Raw FilteredProducts products → StoreProduct, quirks and bad input included."""

from __future__ import annotations

import copy
import dataclasses
from datetime import UTC, datetime

import pytest

from cannaspider.dutchie.normalizer import NormalizationError, normalize, parse_option_size
from cannaspider.items import RawProduct
from cannaspider.sandbox.catalog import _product

BASE = {
    "_id": "6913e3cd444eac3935e928b9",
    "Name": "Blue Dream",
    "brandName": "Bud Bros",
    "brand": {"id": "0d3f5a9e-1b2c-4d5e-8f90-123456789abc", "name": "Bud Bros"},
    "brandId": "0d3f5a9e-1b2c-4d5e-8f90-123456789abc",
    "type": "Flower",
    "subcategory": "premium",
    "strainType": "Hybrid",
    "Image": "https://images.dutchie.com/a.png",
    "images": [],
    "Options": ["1/8oz", "1gC", "N/A"],
    "Prices": [35, 12, 5],
    "recPrices": [35, 12, 5],
    "medicalPrices": [],
    "recSpecialPrices": [],
    "medicalSpecialPrices": [],
    "special": None,
    "specialData": None,
    "THC": None,
    "CBD": None,
    "THCContent": {"unit": "PERCENTAGE", "range": [21.5, 24.0]},
    "CBDContent": {"unit": "PERCENTAGE", "range": None},
    "POSMetaData": None,
    "createdAt": "1700000000000",
    "updatedAt": "2026-03-04T12:00:00.000Z",
}


def norm(raw) -> object:
    return normalize(RawProduct(dispensary_id=7, crawl_run_id=3, raw=raw))


@pytest.mark.parametrize(
    "option, expected",
    [
        ("1/8oz", (3.5, "g")),
        ("1oz", (28.0, "g")),
        ("1/2oz", (14.0, "g")),
        ("1gC", (1.0, "g")),
        (".5g", (0.5, "g")),
        ("3.5g", (3.5, "g")),
        ("100mg", (100.0, "mg")),
        ("10pk", (10.0, "each")),
        ("N/A", (None, None)),
        ("each", (None, None)),
        ("", (None, None)),
    ],
)
def test_option_sizes(option, expected):
    assert parse_option_size(option) == expected


def test_prices_aligned_with_options_and_lowest_price_wins():
    p = norm(BASE)
    assert [o.option for o in p.options] == ["1/8oz", "1gC", "N/A"]
    assert [o.price_rec for o in p.options] == [35.0, 12.0, 5.0]
    assert p.price_rec == 5.0 and p.price_med is None  # [] is "no medical price", not 0
    assert p.options[0].size_value == 3.5 and p.options[0].size_unit == "g"


def test_money_is_a_float_to_the_cent_and_potency_to_three_places():
    p = norm(
        {
            **BASE,
            "recPrices": [35.004999, "$12.005", 7],
            "recSpecialPrices": [float("nan"), -1, True],
            "THCContent": {"unit": "PERCENTAGE", "range": [21.12345, "19.9995"]},
        }
    )
    assert [o.price_rec for o in p.options] == [35.0, 12.01, 7.0]  # strings round half-up, exactly
    assert all(type(o.price_rec) is float for o in p.options)
    assert [o.price_rec_special for o in p.options] == [None, None, None] and p.price_rec_special is None
    assert p.thc.range == [21.123, 20.0] and p.thc.value == 21.123


def test_potency_is_value_plus_unit_never_mixed():
    p = norm(BASE)
    assert (p.thc.value, p.thc.unit, p.thc.range) == (24.0, "percent", [21.5, 24.0])
    assert (p.cbd.value, p.cbd.unit) == (None, None)  # range null and no scalar: nothing, not 0%
    mg = norm({**BASE, "THCContent": {"unit": "MILLIGRAMS", "range": [100]}})
    assert (mg.thc.value, mg.thc.unit) == (100.0, "mg")
    per_g = norm({**BASE, "THCContent": {"unit": "MILLIGRAMS_PER_GRAM", "range": [250]}})
    assert per_g.thc.unit == "mg_per_g"
    scalar = norm({**BASE, "THCContent": None, "THC": 18.2})
    assert (scalar.thc.value, scalar.thc.unit) == (18.2, "percent")


def test_timestamps_are_real_timestamps():
    p = norm(BASE)
    assert p.provider_created_at == datetime.fromtimestamp(1_700_000_000, tz=UTC)
    assert p.provider_updated_at == datetime(2026, 3, 4, 12, tzinfo=UTC)
    bad = norm({**BASE, "createdAt": "yesterday", "updatedAt": 12})
    assert bad.provider_updated_at is not None or bad.provider_created_at is None


def test_specials_stock_and_effects():
    raw = {
        **BASE,
        "special": True,
        "recSpecialPrices": [28, 9.6, 4],
        "specialData": {
            "saleSpecials": [
                {"specialName": "20% off", "specialType": "sale", "discount": 20, "percentDiscount": True}
            ],
            "bogoSpecials": [
                {
                    "specialName": "B2G1",
                    "specialType": "bogo",
                    "itemsForAPrice": {"value": "45.00"},
                    "bogoRewards": [{"totalQuantity": {"quantity": 3}}],
                }
            ],
        },
        "POSMetaData": {
            "children": [
                {"option": "1/8oz", "quantity": 12, "quantityAvailable": 10, "kioskQuantityAvailable": 2},
                {"option": "1gC", "quantity": "4", "quantityAvailable": None},
            ]
        },
        "Effects": {"Relaxed": 3},
    }
    p = norm(raw)
    assert p.is_on_special and p.price_rec_special == 4.0
    assert [s["type"] for s in p.specials] == ["sale", "bogo"]
    assert p.specials[1]["bundle_price"] == 45.0 and p.specials[1]["required_quantity"] == 3
    assert p.options[0].quantity_available == 10 and p.options[1].quantity == 4
    assert p.quantity_available == 10
    assert p.effects == {"relaxed": 3}


def test_html_in_names_is_cleaned_and_raw_kept():
    p = norm({**BASE, "Name": "Blue <b>Dream</b> &amp; Co.\n"})
    assert p.name == "Blue Dream & Co."
    assert p.name_raw == "Blue <b>Dream</b> &amp; Co.\n"


def test_strain_types_beyond_the_three():
    assert norm({**BASE, "strainType": "1 to 1"}).strain_type == "1:1"
    assert norm({**BASE, "strainType": "High CBD"}).strain_type == "High CBD"
    assert norm({**BASE, "strainType": "N/A"}).strain_type is None
    assert norm({**BASE, "strainType": None}).strain_type is None


@pytest.mark.parametrize(
    "field, value",
    [
        ("Prices", None),
        ("recPrices", "35"),
        ("medicalPrices", [None, "x", True]),
        ("Options", None),
        ("THCContent", "21%"),
        ("POSMetaData", {"children": "none"}),
        ("specialData", []),
        ("images", None),
        ("brand", None),
        ("createdAt", None),
        ("type", 5),
        ("cannabinoidsV2", [None, 3, {"value": "x"}]),
    ],
)
def test_wrong_types_and_nulls_degrade_to_none(field, value):
    p = norm({**BASE, field: value})
    assert p.provider_product_id == BASE["_id"]


@pytest.mark.parametrize(
    "raw, message",
    [
        ({**BASE, "_id": None, "id": None}, "no _id"),
        ({**BASE, "_id": 12345, "id": None}, "no _id"),
        ({**BASE, "Name": None}, "no usable Name"),
        ({**BASE, "Name": "<b></b>  "}, "no usable Name"),
        ("not an object", "not an object"),
    ],
)
def test_unidentifiable_products_raise(raw, message):
    with pytest.raises(NormalizationError, match=message):
        norm(raw)


def test_every_sandbox_product_normalizes():
    for index in range(400):
        raw = copy.deepcopy(_product(42, "store", index, index % 5, "http://127.0.0.1:1"))
        p = norm(raw)
        assert p.price_rec is None or p.price_rec > 0
        assert p.thc.unit in (None, "percent", "mg", "mg_per_g")
        assert "<" not in p.name


def test_every_field_lands_under_its_own_name():
    # normalize() builds StoreProduct positionally: a reordered items.py must fail here
    p = norm(
        {
            **BASE,
            "medicalPrices": [30, 10, 4],
            "recSpecialPrices": [33, 11, 4.5],
            "medicalSpecialPrices": [29, 9, 3],
            "cannabinoidsV2": [{"value": 1.5, "unit": "PERCENTAGE", "cannabinoid": {"name": "CBG"}}],
            "Effects": {"Calm": 2},
            "POSMetaData": {"children": [{"option": "1gC", "quantityAvailable": 6}]},
            "specialData": {"saleSpecials": [{"specialName": "Deal"}]},
        }
    )
    assert dataclasses.asdict(p) | {"options": None, "thc": None, "cbd": None} == {
        "dispensary_id": 7,
        "crawl_run_id": 3,
        "provider_product_id": BASE["_id"],
        "name_raw": "Blue Dream",
        "name": "Blue Dream",
        "brand_name_raw": "Bud Bros",
        "brand_id": BASE["brandId"],
        "category": "Flower",
        "subcategory": "premium",
        "strain_type": "Hybrid",
        "price_rec": 5.0,
        "price_med": 4.0,
        "price_rec_special": 4.5,
        "price_med_special": 3.0,
        "is_on_special": True,
        "options": None,
        "thc": None,
        "cbd": None,
        "cannabinoids": [{"name": "CBG", "value": 1.5, "unit": "percent"}],
        "specials": [
            {
                "name": "Deal",
                "type": "sale",
                "discount": None,
                "percent_discount": None,
                "bundle_price": None,
                "required_quantity": None,
            }
        ],
        "effects": {"calm": 2},
        "image_url": BASE["Image"],
        "images": [BASE["Image"]],
        "quantity_available": 6,
        "provider_created_at": datetime(2023, 11, 14, 22, 13, 20, tzinfo=UTC),
        "provider_updated_at": datetime(2026, 3, 4, 12, 0, tzinfo=UTC),
        "provider": "dutchie",
    }
    assert [o.option for o in p.options] == BASE["Options"] and p.thc.unit == "percent" and p.cbd.value is None
