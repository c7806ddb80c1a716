"""Jane's products-index documents as the shared item (cannaspider/platforms/jane/normalizer.py):
one option per available weight with its size, prices, potency, lab results, specials, images, the
category in Dutchie's taxonomy; bad input degrades with a reason and nothing else is lost."""

from __future__ import annotations

import copy

import pytest

from cannaspider.items import RawProduct
from cannaspider.platforms.interface import NormalizationError
from cannaspider.platforms.jane.normalizer import normalize
from cannaspider.storable import DegradationLog, Losses

# a document with the fields of a real products-index hit (docs/jane.md, "Products")
HIT = {
    "objectID": "5876-2698533",
    "product_id": 2698533,
    "store_id": 5876,
    "name": "Blue Dream",
    "brand": "Wana",
    "product_brand_id": 1234,
    "brand_logo_url": "https://product-assets.iheartjane.com/brands/wana.png",
    "kind": "flower",
    "kind_subtype": "Premium",
    "root_subtype": "Premium",
    "category": "hybrid",
    "available_weights": ["half gram", "gram", "two gram", "eighth ounce", "quarter ounce", "half ounce", "ounce"],
    "price_half_gram": 8,
    "price_gram": 15.0,
    "price_two_gram": 28.0,
    "price_eighth_ounce": 45.0,
    "price_quarter_ounce": 80.0,
    "price_half_ounce": 150.0,
    "price_ounce": 280.0,
    "special_price_eighth_ounce": 36.0,
    "discounted_price_gram": 12.0,
    "max_cart_quantity_gram": 13,
    "special_id": 901,
    "special_title": "20% off Flower",
    "special_amount": 20,
    "applicable_special_ids": [901, 902],
    "percent_thc": 24.43,
    "percent_cbd": 0.1,
    "lab_results": [
        {
            "price_id": "gram",
            "lab_results": [
                {"compound_name": "thc", "value": 24.43, "unit_type": "percentage"},
                {"compound_name": "cbg", "value": 1.2, "unit_type": "percentage"},
            ],
        }
    ],
    "effects": ["Relaxed", "Happy"],
    "photos": [{"id": "p", "position": 0, "urls": {"original": "https://product-assets.iheartjane.com/photos/a.jpeg"}}],
    "image_urls": ["https://product-assets.iheartjane.com/photos/a.jpeg"],
    "_geoloc": {"lat": 42.97, "lng": -78.82},
}


@pytest.fixture
def fresh_degradation_log():
    return LOSSES.log


@pytest.fixture(autouse=True)
def fresh_losses():
    global LOSSES
    LOSSES = Losses(DegradationLog())  # what each test's products lose, apart from the others'


LOSSES = Losses()


def norm(raw):
    return normalize(RawProduct(7, 3, raw, 0, "jane"), LOSSES)


def test_each_available_weight_is_an_option_with_its_size_and_prices():
    item = norm(HIT)
    assert [(o.option, o.size_value, o.size_unit, o.price_rec) for o in item.options] == [
        ("half gram", 0.5, "g", 8.0),
        ("gram", 1.0, "g", 15.0),
        ("two gram", 2.0, "g", 28.0),
        ("eighth ounce", 3.5, "g", 45.0),
        ("quarter ounce", 7.0, "g", 80.0),
        ("half ounce", 14.0, "g", 150.0),
        ("ounce", 28.0, "g", 280.0),
    ]
    specials = {o.option: o.price_rec_special for o in item.options if o.price_rec_special is not None}
    assert specials == {"gram": 12.0, "eighth ounce": 36.0}
    assert (item.price_rec, item.price_rec_special, item.price_med, item.is_on_special) == (8.0, 12.0, None, True)
    assert item.size_key == "0.5g,1g,2g,3.5g,7g,14g,28g"
    assert (item.unit_price, item.unit_price_basis) == (16.0, "g")


def test_the_product_in_the_shared_taxonomy_and_identity():
    item = norm(HIT)
    assert (item.provider, item.provider_product_id, item.dispensary_id, item.crawl_run_id) == ("jane", "2698533", 7, 3)
    assert (item.category, item.subcategory, item.strain_type) == ("Flower", "Premium", "Hybrid")
    assert (item.brand_name_raw, item.brand_id, item.brand_name_key, item.name_key) == (
        "Wana",
        "1234",
        "wana",
        "blue dream",
    )
    assert (item.thc.value, item.thc.unit, item.cbd.value) == (24.43, "percent", 0.1)
    assert item.cannabinoids == [
        {"name": "THC", "value": 24.43, "unit": "percent"},
        {"name": "CBG", "value": 1.2, "unit": "percent"},
    ]
    assert [(s["id"], s["name"]) for s in item.specials] == [("901", "20% off Flower"), ("902", None)]
    assert item.images == ["https://product-assets.iheartjane.com/photos/a.jpeg"] == [item.image_url]
    assert item.brand_logo_url == "https://product-assets.iheartjane.com/brands/wana.png"
    assert item.effects == {"relaxed": None, "happy": None}


def test_each_is_one_unit_and_kinds_map_onto_dutchies_categories():
    raw = {**copy.deepcopy(HIT), "kind": "edible", "available_weights": ["each"], "price_each": "12.50"}
    item = norm(raw)
    assert item.category == "Edible"
    assert [(o.option, o.size_value, o.size_unit, o.price_rec) for o in item.options] == [("each", 1.0, "each", 12.5)]
    for kind, category in (
        ("pre-roll", "Pre-Rolls"),
        ("vape", "Vaporizers"),
        ("extract", "Concentrate"),
        ("gear", "Accessories"),
    ):
        assert norm({**HIT, "kind": kind}).category == category


def test_bad_values_degrade_with_a_reason_and_the_product_is_kept(fresh_degradation_log, caplog):
    raw = {**copy.deepcopy(HIT), "available_weights": ["gram", "three quarters of a pound"], "price_gram": "cheap"}
    item = norm(raw)
    assert [(o.option, o.price_rec) for o in item.options] == [("gram", None)]
    assert fresh_degradation_log.products == 1
    assert "available_weights='three quarters of a pound'" in caplog.text and "2698533" in caplog.text


def test_a_product_without_an_id_or_name_cannot_be_stored():
    for bad in ({**HIT, "product_id": None}, {**HIT, "product_id": "12a"}, {**HIT, "product_id": True}):
        with pytest.raises(NormalizationError, match="product_id"):
            norm(bad)
    with pytest.raises(NormalizationError, match="name"):
        norm({**HIT, "name": " <b></b> "})
    with pytest.raises(NormalizationError):
        norm(["not", "an", "object"])  # type: ignore[arg-type]
