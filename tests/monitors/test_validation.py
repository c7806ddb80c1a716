"""StoreProduct items against the JSON Schema generated from the item dataclasses; the schema
published in docs/ is that schema."""

from __future__ import annotations

import dataclasses

import pytest

from cannaspider.items import Potency, ProductOption, StoreProduct
from cannaspider.monitors import validation as schema
from cannaspider.monitors.validation import StoreProductValidationPipeline
from tests.helpers import ROOT, project_crawler


def product(**changes) -> StoreProduct:
    item = StoreProduct(
        1, 7, "p1", "Gelato <b>1g</b>", "Gelato 1g", "Brand", "b1", "Flower", None, "hybrid",
        25.0, None, 20.0, None, True,
        [ProductOption("1g", 1.0, "g", 25.0, None, 20.0, None, 4, 4, None)],
        Potency(21.5, "percent"), Potency(None, None), [], [{"id": "s1"}], {}, None, [], 4, None, None,
    )  # fmt: skip
    return dataclasses.replace(item, **changes)


def test_the_published_schema_is_the_generated_one():
    assert (ROOT / "docs" / "item-schema.json").read_text() == schema.schema_text(), (
        "regenerate it: python -m cannaspider.monitors.validation > docs/item-schema.json"
    )
    props = schema.store_product_schema()["properties"]
    assert set(props) == {f.name for f in dataclasses.fields(StoreProduct)}


@pytest.fixture
def pipeline():
    crawler = project_crawler(HEALTH_VALIDATION_SAMPLE_EVERY=1)
    return StoreProductValidationPipeline.from_crawler(crawler), crawler.stats


def test_a_normal_product_is_valid(pipeline):
    pipe, stats = pipeline
    item = product()
    assert pipe.process_item(item) is item
    assert stats.get_value("cannaspider/validation/items") == 1
    assert stats.get_value("cannaspider/validation/items_invalid") is None


def test_a_broken_product_is_counted_per_field_and_still_passed_on(pipeline):
    pipe, stats = pipeline
    item = product(price_rec="cheap", thc=None, is_on_special="yes")
    assert pipe.process_item(item) is item  # counted, never dropped
    assert stats.get_value("cannaspider/validation/items_invalid") == 1
    assert {k for k in stats.get_stats() if k.startswith("cannaspider/validation/errors/")} == {
        "cannaspider/validation/errors/price_rec",
        "cannaspider/validation/errors/thc",
        "cannaspider/validation/errors/is_on_special",
    }


def test_a_sample_is_validated():
    crawler = project_crawler(HEALTH_VALIDATION_SAMPLE_EVERY=10)
    pipe = StoreProductValidationPipeline.from_crawler(crawler)
    for _ in range(25):
        pipe.process_item(product(price_rec="cheap"))
    assert crawler.stats.get_value("cannaspider/validation/items") == 3  # the 1st, 11th and 21st
    assert crawler.stats.get_value("cannaspider/validation/items_invalid") == 3


@pytest.mark.parametrize(
    ("changes", "valid"),
    [
        ({}, True),
        ({"provider_created_at": "2026-12-01T10:00:00Z"}, True),
        ({"price_rec": "cheap"}, False),
        ({"thc": None}, False),
        ({"is_on_special": "yes"}, False),
        ({"options": [{"option": 1}]}, False),
        ({"provider_product_id": None}, False),
        ({"quantity_available": "four"}, False),
        ({"provider_created_at": "yesterday"}, False),
        ({"category": 7}, False),
        ({"thc": {"value": "high", "unit": "percent"}}, False),
    ],
)
def test_the_fast_check_and_spidermons_validator_agree(changes, valid):
    # jsonschema-rs answers "valid?" alone: a product it passed would never reach Spidermon's
    # validator, so the two must judge every product alike (formats included)
    pipe = StoreProductValidationPipeline.from_crawler(project_crawler(HEALTH_VALIDATION_SAMPLE_EVERY=1))
    data = {**schema.item_json(product()), **changes}
    ok, errors = pipe.validator.validate(data)
    assert ok is valid, errors
    assert pipe.check.is_valid(data) is valid
