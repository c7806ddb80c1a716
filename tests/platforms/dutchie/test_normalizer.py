"""Raw FilteredProducts products → StoreProduct, quirks and bad input included."""

from __future__ import annotations

import copy
import dataclasses
import random
import sys
from datetime import UTC, datetime
from math import inf, nan

import orjson
import pytest

from cannaspider import storable
from cannaspider.items import RawProduct
from cannaspider.platforms.dutchie.fields import potency
from cannaspider.platforms.dutchie.normalizer import STORABLE_CACHES, NormalizationError, normalize
from cannaspider.storable import money
from sandbox.catalog import _product

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


NO_UNIT_PRICE = {"unit_price": None, "unit_price_basis": None}  # no price, no unit price


# what the normalizer loses, as the normalize pipeline holds it: replaced for each test (fresh_losses)
LOSSES = storable.Losses()


@pytest.fixture(autouse=True)
def fresh_losses(monkeypatch):
    """Each test normalizes with fresh Losses (an empty rate limit for the warnings about degraded
    values, counts from zero), and empty caches (a string repaired in a cache is warned about once)."""
    losses = storable.Losses()
    monkeypatch.setattr(sys.modules[__name__], "LOSSES", losses)
    for cached in STORABLE_CACHES:
        cached.cache_clear()
    return losses


def norm(raw) -> object:
    return normalize(RawProduct(dispensary_id=7, crawl_run_id=3, raw=raw), LOSSES)


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


def test_money_rounds_half_up_on_the_decimal_text_as_written():
    # 2.675 as a JSON number is the float 2.67499999…; rounded as written, like the string, it is 2.68
    assert money(LOSSES, 2.675) == money(LOSSES, "2.675") == 2.68
    assert money(LOSSES, 0.125) == money(LOSSES, "0.125") == 0.13  # an exact binary tie: half-up, not half-even
    assert money(LOSSES, 1.005) == money(LOSSES, "1.005") == 1.01
    assert money(LOSSES, 35.0) == 35.0 and money(LOSSES, 45.99) == 45.99 and money(LOSSES, 7) == 7.0
    assert (
        money(LOSSES, "1,299.00") == 1299.0 and money(LOSSES, "$1,299.995") == 1300.0 and money(LOSSES, " $12 ") == 12.0
    )
    assert money(LOSSES, "1,5") is None and money(LOSSES, "12,34.5") is None  # not thousands separators: not a price
    p = norm({**BASE, "recPrices": [2.675, "2.675", "1,299.00"]})
    assert [o.price_rec for o in p.options] == [2.68, 2.68, 1299.0] and p.price_rec == 2.68


def test_a_number_and_its_text_always_round_alike():
    rng = random.Random(5)
    for _ in range(20_000):
        decimals = rng.randint(1, 6)
        text = f"{rng.randrange(10**7)}.{rng.randrange(10**decimals):0{decimals}d}"
        assert money(LOSSES, float(text)) == money(LOSSES, text), text
        by_number = potency(LOSSES, {"unit": "PERCENTAGE", "range": [float(text[:-1] or "0")]}, None).value
        assert by_number == potency(LOSSES, {"unit": "PERCENTAGE", "range": [text[:-1]]}, None).value, text


def test_potency_rounds_half_up_on_the_decimal_text_as_written():
    p = norm({**BASE, "THCContent": {"unit": "PERCENTAGE", "range": [2.0005, "2.0005"]}})
    assert p.thc.range == [2.001, 2.001]


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
    both = norm({**BASE, "createdAt": 1_700_000_000_000, "updatedAt": "2026-03-04T12:00:00+02:00"})
    assert both.provider_created_at == datetime.fromtimestamp(1_700_000_000, tz=UTC)
    assert both.provider_updated_at == datetime(2026, 3, 4, 10, tzinfo=UTC)
    naive = norm({**BASE, "updatedAt": "2026-03-04T12:00:00"})  # no offset: UTC, never the session's zone
    assert naive.provider_updated_at == datetime(2026, 3, 4, 12, tzinfo=UTC)


@pytest.mark.parametrize(
    "value",
    [
        12,  # not a real epoch: it would be 1970-01-01T00:00:00.012
        "12",
        0,
        "1700000000",  # epoch seconds where milliseconds are due: 1970-01-20
        "99999999999999999999",  # year 3 million
        "1" * 5000,  # beyond int()'s digit limit
        "1999-12-31T23:59:59Z",  # before any online menu
        "9999-12-31T00:00:00Z",
        "0001-01-01T00:00:00Z",
        "yesterday",
        "",
        -1_700_000_000_000,
        True,
        1.5,
        [1_700_000_000_000],
    ],
)
def test_timestamps_outside_a_sane_window_degrade_to_none(value):
    p = norm({**BASE, "createdAt": value, "updatedAt": value})
    assert p.provider_created_at is None and p.provider_updated_at is None


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
    "field, value, changed",
    [
        ("Prices", None, {}),  # recPrices are there: Prices is only their fallback
        ("recPrices", "35", {}),  # not a list: Prices instead
        (
            {"recPrices": None, "Prices": None},
            None,
            {"price_rec": None, "options.price_rec": [None, None, None], **NO_UNIT_PRICE},
        ),
        ("medicalPrices", [None, "x", True], {}),
        ("Options", None, {"options": [], "size_key": ""}),
        ("THCContent", "21%", {"thc": {"value": None, "unit": None, "range": None}}),
        ("THCContent", {"unit": "GRAMS", "range": [3]}, {"thc": {"value": None, "unit": None, "range": None}}),
        ("POSMetaData", {"children": "none"}, {}),
        ("specialData", [], {}),
        ("images", None, {}),
        ("Image", None, {"image_url": None, "images": []}),
        ("brand", None, {}),
        (
            {"brand": None, "brandName": None, "brandId": None},
            None,
            {"brand_name_raw": None, "brand_id": None, "brand_name_key": None},
        ),
        ("brandName", 12, {"brand_name_raw": "Bud Bros"}),  # not a string: the brand object's name
        ("createdAt", None, {"provider_created_at": None}),
        ("updatedAt", {"at": 1}, {"provider_updated_at": None}),
        ("type", 5, {"category": None}),
        ("subcategory", ["premium"], {"subcategory": None}),
        ("strainType", 3, {"strain_type": None}),
        ("cannabinoidsV2", [None, 3, {"value": "x"}], {}),
        ("effects", "calm", {}),
    ],
)
def test_wrong_types_and_nulls_degrade_to_none(field, value, changed):
    # every field of the product is compared: what degraded, and that nothing else moved
    patch = field if isinstance(field, dict) else {field: value}
    assert dataclasses.asdict(norm({**BASE, **patch})) == _expected(changed)


def _expected(changed: dict) -> dict:
    """BASE's product with `changed` applied; `options.<name>` sets that field of each option."""
    fields = dataclasses.asdict(norm(BASE))
    for key, value in changed.items():
        if key.startswith("options."):
            for option, v in zip(fields["options"], value, strict=True):
                option[key.removeprefix("options.")] = v
        else:
            fields[key] = value
    for option in fields["options"]:  # no price, no unit price (each option its own)
        if option["price_rec"] is None:
            option.update(unit_price=None, unit_price_special=None, unit_price_basis=None)
        elif option["price_rec_special"] is None:
            option["unit_price_special"] = None
    return fields


@pytest.mark.parametrize(
    "raw, message",
    [
        ({**BASE, "_id": None, "id": None}, "no usable _id"),
        ({**BASE, "_id": 12345, "id": None}, "no usable _id"),
        ({**BASE, "Name": None}, "no usable Name"),
        ({**BASE, "Name": "<b></b>  "}, "no usable Name"),
        ({**BASE, "Name": "\x00 \x00"}, "no usable Name"),
        # an id PostgreSQL cannot hold cannot be stored under another: the product is skipped
        ({**BASE, "_id": "6913e3cd\x00444eac3935e928b9"}, "no usable _id"),
        ({**BASE, "_id": "6913e3cd\ud800444eac3935e928b9"}, "no usable _id"),
        ("not an object", "not an object"),
    ],
)
def test_unidentifiable_products_raise(raw, message):
    with pytest.raises(NormalizationError, match=message):
        norm(raw)


# -- values PostgreSQL cannot hold (numeric(12, 2) money, numeric(12, 3) potency, integer
# quantities; text and jsonb refuse NUL; orjson refuses lone surrogates and ints beyond 64 bits):
# each refused the whole 1,000-row batch of every store in it, or crashed the writer
MONEY_MAX = 9_999_999_999.99  # numeric(12, 2)
POTENCY_MAX = 999_999_999.999  # numeric(12, 3)
INT_MIN, INT_MAX = -(2**31), 2**31 - 1  # integer


def assert_storable(p) -> None:
    """The product's row encodes (as the writers do) and every value fits its column, nested ones
    included with the type of their top-level counterpart."""
    encoded = orjson.dumps(p)  # raises on lone surrogates and on ints beyond 64 bits
    assert b"\\u0000" not in encoded  # neither text nor jsonb takes NUL
    money_values = [p.price_rec, p.price_med, p.price_rec_special, p.price_med_special]
    money_values += [s["bundle_price"] for s in p.specials]
    potency_values = [p.thc.value, p.cbd.value, *(p.thc.range or []), *(p.cbd.range or [])]
    potency_values += [c["value"] for c in p.cannabinoids] + [s["discount"] for s in p.specials]
    ints = [p.quantity_available] + [s["required_quantity"] for s in p.specials]
    for o in p.options:
        money_values += [o.price_rec, o.price_med, o.price_rec_special, o.price_med_special]
        potency_values.append(o.size_value)
        ints += [o.quantity, o.quantity_available, o.kiosk_quantity_available]
    for v in p.effects.values():
        assert v is None or type(v) in (str, int, float, bool), v
        (ints if type(v) is int else potency_values if type(v) is float else []).append(v)
    assert all(v is None or (type(v) is float and 0 <= v <= MONEY_MAX) for v in money_values), money_values
    assert all(v is None or (type(v) is float and -POTENCY_MAX <= v <= POTENCY_MAX) for v in potency_values)
    assert all(v is None or (type(v) is int and INT_MIN <= v <= INT_MAX) for v in ints), ints
    for t in (p.provider_created_at, p.provider_updated_at):
        assert t is None or t.tzinfo is not None


HOSTILE = [
    # numbers beyond their columns
    ({"recPrices": [1e15, 12, 5]}, {"options.price_rec": [None, 12.0, 5.0]}),
    ({"recPrices": [1e15, 1e15, 1e15]}, {"price_rec": None, "options.price_rec": [None, None, None], **NO_UNIT_PRICE}),
    (
        {"recPrices": ["1e15", 10**30, 9_999_999_999.995]},
        {"price_rec": None, "options.price_rec": [None] * 3, **NO_UNIT_PRICE},
    ),
    ({"recPrices": [inf, nan, -inf]}, {"price_rec": None, "options.price_rec": [None] * 3, **NO_UNIT_PRICE}),
    (
        {"recSpecialPrices": [1e12, None, None], "medicalSpecialPrices": ["1e15"]},
        {"options.price_rec_special": [None] * 3, "options.price_med_special": [None] * 3},
    ),
    ({"THCContent": {"unit": "PERCENTAGE", "range": [1e12]}}, {"thc": {"value": None, "unit": None, "range": None}}),
    (
        {"THCContent": {"unit": "PERCENTAGE", "range": [1e12, 21.5, nan]}},
        {"thc": {"value": 21.5, "unit": "percent", "range": [21.5]}},
    ),
    ({"THCContent": None, "THC": 1e12}, {"thc": {"value": None, "unit": None, "range": None}}),
    ({"THCContent": None, "THC": "1e12"}, {"thc": {"value": None, "unit": None, "range": None}}),
    ({"CBDContent": {"unit": "MILLIGRAMS", "range": [10**30]}, "CBD": inf}, {}),
    (
        {
            "POSMetaData": {
                "children": [
                    {"option": "1/8oz", "quantity": 1e10, "quantityAvailable": 10**30, "kioskQuantityAvailable": 1e300},
                    {
                        "option": "1gC",
                        "quantity": 2**31,
                        "quantityAvailable": INT_MAX,
                        "kioskQuantityAvailable": INT_MIN,
                    },
                ]
            }
        },
        {
            "options.quantity": [None, None, None],
            "options.quantity_available": [None, INT_MAX, None],
            "options.kiosk_quantity_available": [None, INT_MIN, None],
            "quantity_available": INT_MAX,
        },
    ),
    (  # each option's count fits, their sum does not
        {
            "POSMetaData": {
                "children": [
                    {"option": "1/8oz", "quantityAvailable": 2_000_000_000},
                    {"option": "1gC", "quantityAvailable": "2000000000"},
                ]
            }
        },
        {"options.quantity_available": [2_000_000_000, 2_000_000_000, None], "quantity_available": None},
    ),
    (
        {
            "specialData": {
                "saleSpecials": [{"specialName": "Deal", "discount": 1e12, "percentDiscount": "yes\x00"}],
                "bogoSpecials": [
                    {
                        "specialName": "B2G1",
                        "specialType": {"nested": "x"},
                        "itemsForAPrice": {"value": 1e15},
                        "bogoRewards": [{"totalQuantity": {"quantity": 1e10}}],
                    }
                ],
            }
        },
        {
            "is_on_special": True,
            "specials": [
                {
                    "name": "Deal",
                    "type": "sale",
                    "discount": None,
                    "percent_discount": None,
                    "bundle_price": None,
                    "required_quantity": None,
                },
                {
                    "name": "B2G1",
                    "type": "bogo",
                    "discount": None,
                    "percent_discount": None,
                    "bundle_price": None,
                    "required_quantity": None,
                },
            ],
        },
    ),
    (
        {"cannabinoidsV2": [{"value": 1e12, "unit": "PERCENTAGE", "cannabinoid": {"name": "CBG"}}]},
        {"cannabinoids": [{"name": "CBG", "value": None, "unit": "percent"}]},
    ),
    (
        {"Effects": {"Relaxed": 10**30, "Happy": 2, "Calm": nan, "Deep": {"a": [1]}, "Big": 1e300, "Odd": "x\x00y"}},
        {"effects": {"relaxed": None, "happy": 2, "calm": None, "deep": None, "big": None, "odd": "xy"}},
    ),
    # strings PostgreSQL refuses (NUL) or orjson cannot encode (lone surrogates), everywhere in the row
    ({"Name": "Blue\x00 Dream\x00"}, {}),
    ({"Name": "Blue \ud800Dream"}, {"name_raw": "Blue \ufffdDream", "name": "Blue \ufffdDream"}),
    (
        {"brandName": "Bud\x00 Bros", "brandId": "0d3f\ud800"},
        {"brand_name_raw": "Bud Bros", "brand_id": "0d3f\ufffd"},
    ),
    (
        {"type": "Flo\x00wer", "subcategory": "prem\udfffium", "strainType": "Hyb\x00rid"},
        {"subcategory": "prem\ufffdium"},
    ),
    (
        {
            "Options": ["1/8oz\x00", "1gC\ud800", "N/A"],
            "POSMetaData": {"children": [{"option": "1/8oz\x00", "quantityAvailable": 4}]},
        },
        {
            "options.option": ["1/8oz", "1gC\ufffd", "N/A"],
            "options.quantity_available": [4, None, None],
            "quantity_available": 4,
        },
    ),
    (
        {"Image": "https://x/\x00a.png", "images": [{"url": "https://x/\ud800b.png"}]},
        {"image_url": "https://x/a.png", "images": ["https://x/a.png", "https://x/\ufffdb.png"]},
    ),
    (
        {
            "specialData": {"saleSpecials": [{"specialName": "Deal\ud800", "specialType": "sa\x00le"}]},
            "cannabinoidsV2": [{"value": 1, "unit": "PERCENTAGE", "cannabinoid": {"name": "CB\x00G"}}],
            "effects": {"\ud800Calm": 1, "Happy\x00": 2},
        },
        {
            "is_on_special": True,
            "specials": [
                {
                    "name": "Deal\ufffd",
                    "type": "sale",
                    "discount": None,
                    "percent_discount": None,
                    "bundle_price": None,
                    "required_quantity": None,
                }
            ],
            "cannabinoids": [{"name": "CBG", "value": 1.0, "unit": "percent"}],
            "effects": {"\ufffdcalm": 1, "happy": 2},
        },
    ),
]


@pytest.mark.parametrize("patch, changed", HOSTILE)
def test_values_postgresql_cannot_hold_degrade_and_the_row_stays_storable(patch, changed, caplog):
    p = norm({**BASE, **patch})
    assert_storable(p)
    assert dataclasses.asdict(p) == _expected(changed)
    # an operator can tell: a warning names the product and what was degraded
    assert any("degraded" in r.getMessage() and BASE["_id"] in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize(
    "patch, changed",
    [
        (
            {"recPrices": [MONEY_MAX, "9999999999.99", 10**9]},
            # the prices are kept as sent; $1e9 a unit is no unit price (docs/analytics.md, "Unit prices")
            {
                "price_rec": 1e9,
                "options.price_rec": [MONEY_MAX, MONEY_MAX, 1e9],
                **NO_UNIT_PRICE,
                "options.unit_price": [None] * 3,  # nor for any of its sizes
                "options.unit_price_basis": [None] * 3,
            },
        ),
        (
            {"THCContent": {"unit": "MILLIGRAMS", "range": [POTENCY_MAX, -POTENCY_MAX]}},
            {"thc": {"value": POTENCY_MAX, "unit": "mg", "range": [POTENCY_MAX, -POTENCY_MAX]}},
        ),
    ],
)
def test_values_at_the_columns_limits_are_kept(patch, changed):
    p = norm({**BASE, **patch})
    assert_storable(p)
    assert dataclasses.asdict(p) == _expected(changed)


def test_a_product_carrying_every_hostile_value_is_stored_by_postgresql(sql):
    raw = dict(BASE)
    for patch, _ in HOSTILE:
        raw.update(patch)
    raw["Options"] = ["1/8oz\x00", "1gC\ud800", "1" * 400 + "g"]
    p = norm(raw)
    dispensary = sql("INSERT INTO dispensaries (name) VALUES ('d') RETURNING id")[0][0]
    # what the writers do: the row as JSON (orjson) read back by PostgreSQL into typed columns
    sql(
        """INSERT INTO store_products (dispensary_id, provider_product_id, name_raw, name, brand_name_raw, brand_id,
               category, subcategory, strain_type, price_rec, price_med, price_rec_special, price_med_special,
               options, thc_value, cbd_value, cannabinoids, specials, effects, image_url, images,
               quantity_available, provider_created_at, provider_updated_at)
           SELECT %s, r->>'provider_product_id', r->>'name_raw', r->>'name', r->>'brand_name_raw',
               r->>'brand_id', r->>'category', r->>'subcategory', r->>'strain_type',
               (r->>'price_rec')::numeric, (r->>'price_med')::numeric, (r->>'price_rec_special')::numeric,
               (r->>'price_med_special')::numeric, r->'options', (r->'thc'->>'value')::numeric,
               (r->'cbd'->>'value')::numeric, r->'cannabinoids', r->'specials', r->'effects', r->>'image_url',
               r->'images', (r->>'quantity_available')::integer, (r->>'provider_created_at')::timestamptz,
               (r->>'provider_updated_at')::timestamptz
             FROM (SELECT %s::jsonb AS r) AS row""",
        (dispensary, orjson.dumps(p).decode()),
    )
    # nested values fit the type of their top-level counterpart, should anyone cast them
    nested = sql(
        """SELECT count(*) FROM store_products,
                  jsonb_array_elements(options) o,
                  LATERAL (SELECT (o->>'price_rec')::numeric(12, 2), (o->>'price_med_special')::numeric(12, 2),
                                  (o->>'size_value')::numeric(12, 3), (o->>'quantity')::integer,
                                  (o->>'quantity_available')::integer,
                                  (o->>'kiosk_quantity_available')::integer) casts"""
    )
    assert nested == [(3,)]
    sql(
        """SELECT (s->>'discount')::numeric(12, 3), (s->>'bundle_price')::numeric(12, 2),
                  (s->>'required_quantity')::integer
             FROM store_products, jsonb_array_elements(specials) s"""
    )
    sql("SELECT (c->>'value')::numeric(12, 3) FROM store_products, jsonb_array_elements(cannabinoids) c")
    assert sql("SELECT name, effects FROM store_products") == [(p.name, p.effects)]


def test_warnings_about_degraded_products_are_rate_limited(monkeypatch, caplog):
    now = [1000.0]
    log = storable.DegradationLog(burst=10, interval=60.0, clock=lambda: now[0])
    monkeypatch.setattr(LOSSES, "log", log)
    for index in range(25):
        norm({**BASE, "_id": f"p{index}", "recPrices": [1e15, 12, 5]})
    lines = [r.getMessage() for r in caplog.records if "degraded" in r.getMessage()]
    assert len(lines) == 10 and lines[0].startswith("product p0: ") and "price=1000000000000000.0" in lines[0]
    now[0] += 61
    norm({**BASE, "_id": "later", "THC": 1e12, "THCContent": None})
    lines = [r.getMessage() for r in caplog.records if "degraded" in r.getMessage()]
    assert (
        len(lines) == 11
        and "THC=1000000000000.0" in lines[-1]
        and "(15 more degraded products not logged)" in lines[-1]
    )
    assert log.products == 26
    norm(BASE)  # nothing degraded: nothing said
    assert log.products == 26 and len(caplog.records) == 11


FUZZ = [
    None,
    True,
    0,
    -1,
    3.7,
    nan,
    inf,
    -inf,
    1e15,
    1e300,
    10**30,
    -(10**30),
    2**31,
    "",
    "abc",
    "12.5",
    "$4.99",
    "1,299.00",
    "1e400",
    "1e15",
    "\x00",
    "a\x00b",
    "\ud800",
    "x\udfffy",
    [],
    {},
    [None],
    [1e15, "\x00", 10**30],
    ["1g", 2],
    {"unit": None, "range": ["x"]},
    {"unit": "PERCENTAGE", "range": [1e12, "\ud800"]},
    {"children": [{"option": "1g", "quantity": 1e300, "quantityAvailable": "\x00"}]},
    {"saleSpecials": [{"discount": 1e15, "specialName": "\ud800"}], "bogoSpecials": [{"bogoRewards": "x"}]},
    "<b>x</b> &amp; y",
]


def test_every_broken_variant_of_every_sandbox_product_is_refused_or_storable():
    rng = random.Random(7)
    stored = refused = 0
    for index in range(300):
        raw = _product(42, "fuzz", index, index % 4, "http://127.0.0.1:1")
        for _ in range(8):  # the same product with broken fields, nested ones included
            broken = copy.deepcopy(raw)
            broken[rng.choice(list(broken))] = rng.choice(FUZZ)
            for key in ("THCContent", "POSMetaData", "specialData", "recPrices", "cannabinoidsV2", "effects"):
                value = broken.get(key)
                if value and isinstance(value, (dict, list)) and rng.random() < 0.4:
                    if isinstance(value, dict):
                        value[rng.choice(list(value))] = rng.choice(FUZZ)
                    else:
                        value[0] = rng.choice(FUZZ)
            try:
                p = norm(broken)
            except NormalizationError:
                refused += 1
                continue
            assert_storable(p)
            stored += 1
    assert stored > 2000 and refused > 0


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
            "enterpriseProductId": " 5f1e2d3c4b5a69788796a5b4 ",
            "Status": "Active",
            "brand": {**BASE["brand"], "description": " Small-batch flower from Tucson. "},
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
        "brand_logo_url": None,
        "enterprise_product_id": "5f1e2d3c4b5a69788796a5b4",
        "brand_name_key": "bud bros",
        "name_key": "blue dream",
        "size_key": "1g,3.5g",
        "unit_price": 5.0,
        "unit_price_special": 4.5,
        "unit_price_basis": "unit",
        "status": "Active",
        "brand_description": "Small-batch flower from Tucson.",
    }
    assert [o.option for o in p.options] == BASE["Options"] and p.thc.unit == "percent" and p.cbd.value is None


# --- image and logo URLs: http(s) only (docs/images.md) ----------------------------------------
HOSTILE_URLS = [
    "file:///tmp/cannaspider-local.png",
    "file:///etc/passwd",
    "FILE:///etc/passwd",
    "ftp://127.0.0.1/x.png",
    "s3://node-bucket/secret.png",
    "gs://node-bucket/secret.png",
    "data:image/png;base64,iVBORw0KGgo=",
    "//images.example/scheme-relative.png",
    " file:///etc/passwd",
    "javascript:alert(1)",
]


@pytest.mark.parametrize("url", HOSTILE_URLS)
def test_only_http_image_and_logo_urls_survive_and_the_others_are_counted(url):
    raw = _product(42, "in-process", 1, 0, "http://127.0.0.1:1")
    raw.update({"Image": url, "images": [{"url": url}, {"url": "ftp://127.0.0.1/other.png"}]})
    raw["brand"] = {**raw["brand"], "imageUrl": url}
    before = LOSSES.refused_urls
    p = norm(raw)
    assert (p.image_url, p.images, p.brand_logo_url) == (None, [], None)
    assert LOSSES.refused_urls - before == 4  # Image, both images[], the brand's logo


def test_an_http_url_among_refused_ones_is_kept_whatever_the_case_of_its_scheme():
    raw = dict(BASE, Image="file:///etc/passwd", images=[{"url": "HTTPS://images.dutchie.com/b.png"}])
    raw["brand"] = {**BASE["brand"], "imageUrl": "Http://images.dutchie.com/logo.png"}
    p = norm(raw)
    assert p.image_url == "HTTPS://images.dutchie.com/b.png" and p.images == ["HTTPS://images.dutchie.com/b.png"]
    assert p.brand_logo_url == "Http://images.dutchie.com/logo.png"


# --- texts bounded to their column's limit (storable.py, docs/architecture.md "Text limits") --
def test_texts_longer_than_their_limit_are_cut_logged_and_counted(caplog):
    rng = random.Random(5)
    long = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz ") for _ in range(10_000))  # 10 kB, no repeats
    before = LOSSES.truncated
    p = norm(
        {
            **BASE,
            "Name": "X" + long,
            "brandName": "B" + long,
            "brandId": "i" * 150,
            "enterpriseProductId": "e" * 150,
            "type": "T" + long,
            "subcategory": "S" + long,
            "strainType": "Z" + long,
            "Status": "A" + long,
            "Options": ["O" + long, "1g"],
            "rawOptions": ["R" + long, "1g"],
            "brand": {**BASE["brand"], "description": "D" + long},
        }
    )
    assert_storable(p)
    assert (len(p.name_raw), len(p.name or "")) == (storable.NAME, storable.NAME)
    assert len(p.brand_name_raw or "") == storable.BRAND_NAME
    assert (p.brand_id, p.enterprise_product_id) == ("i" * storable.ID, "e" * storable.ID)
    for text in (p.category, p.subcategory, p.strain_type, p.status, p.options[0].option, p.options[0].raw_option):
        assert text is not None and len(text) == storable.LABEL
    assert len(p.brand_description or "") == storable.DESCRIPTION
    assert LOSSES.truncated - before == 11
    # the keys built from them fit a btree index entry (~2,700 bytes) whatever the script
    assert len(p.name_key or "") <= storable.NAME_KEY and len(p.brand_name_key or "") <= storable.NAME_KEY
    assert any("degraded" in r.getMessage() and "Name=" in r.getMessage() for r in caplog.records)


def test_texts_at_their_limit_are_kept_whole():
    before = LOSSES.truncated
    p = norm(
        {**BASE, "Name": "N" * storable.NAME, "brandName": "B" * storable.BRAND_NAME, "Status": "S" * storable.LABEL}
    )
    assert (p.name, p.brand_name_raw, p.status) == (
        "N" * storable.NAME,
        "B" * storable.BRAND_NAME,
        "S" * storable.LABEL,
    )
    assert LOSSES.truncated == before
