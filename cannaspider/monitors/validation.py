"""Validates a sample of the StoreProducts, every HEALTH_VALIDATION_SAMPLE_EVERY-th (50; 1: all),
against the generated JSON Schema (schema.py): jsonschema-rs answers "valid?", Spidermon's JSON
Schema validator names the failing fields of a product that is not. It counts, never drops: a
product that breaks the schema is still written (losing data on a schema slip would be worse);
ItemValidationMonitor (suite.py) fails the crawl's health when the share of invalid items passes
HEALTH_MAX_INVALID_ITEM_SHARE.

Stats: cannaspider/validation/items (products validated), cannaspider/validation/items_invalid and
cannaspider/validation/errors/<field> (one per failing field)."""

from __future__ import annotations

import logging
from typing import Any

import jsonschema_rs
from scrapy.crawler import Crawler
from spidermon import monitors
from spidermon.contrib.validation import JSONSchemaValidator

from cannaspider.items import StoreProduct
from cannaspider.monitors.base import HealthMonitor
from cannaspider.monitors.schema import inlined_schema, item_json

logger = logging.getLogger(__name__)

ITEMS_STAT = "cannaspider/validation/items"
INVALID_STAT = "cannaspider/validation/items_invalid"
FIELD_ERRORS_PREFIX = "cannaspider/validation/errors/"


class StoreProductValidationPipeline:
    def __init__(self, crawler: Crawler):
        self.stats = crawler.stats
        schema = inlined_schema()
        # "valid?" is the common case and the only one on the hot path: jsonschema-rs (Rust) answers
        # it in ~7 µs a product, pure-Python jsonschema in ~1,600 µs (compiled once, both; the item's
        # JSON dump costs ~12 µs: benchmarks/normalize.py). Spidermon's validator, which names the
        # failing fields, runs only for a product that is not valid. Every
        # HEALTH_VALIDATION_SAMPLE_EVERY-th product is validated: a schema slip comes from a change
        # of Dutchie's payload or of the normalizer, so it shows in every product and a sample
        # catches it; 1 validates all.
        # formats checked as Spidermon's validator checks them (date-time): off by default in both
        # jsonschema libraries, and a product one passed would never reach the other
        self.check = jsonschema_rs.validator_for(schema, validate_formats=True, offline=True)
        self.validator = JSONSchemaValidator(schema)
        self.every = max(1, crawler.settings.getint("HEALTH_VALIDATION_SAMPLE_EVERY"))
        self.seen = 0
        self.logged = 0

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> StoreProductValidationPipeline:
        return cls(crawler)

    def process_item(self, item: Any) -> Any:
        if not isinstance(item, StoreProduct):
            return item
        assert self.stats is not None
        self.seen += 1
        if (self.seen - 1) % self.every:
            return item
        self.stats.inc_value(ITEMS_STAT)
        try:
            data = item_json(item)
            ok, errors = (True, {}) if self.check.is_valid(data) else self.validator.validate(data)
        except Exception as exc:  # noqa: BLE001 - a value pydantic cannot even serialise: invalid, not a crash
            ok, errors = False, {"item": [type(exc).__name__]}
        if not ok:
            self.stats.inc_value(INVALID_STAT)
            for field in errors:
                self.stats.inc_value(FIELD_ERRORS_PREFIX + field)
            if self.logged < 5:  # a systematic slip would otherwise log every product
                self.logged += 1
                logger.warning(
                    "dispensary %s product %s breaks the item schema: %s",
                    item.dispensary_id,
                    item.provider_product_id,
                    "; ".join(f"{k}: {', '.join(v)}" for k, v in sorted(errors.items())),
                )
        return item


@monitors.name("Item validation")
class ItemValidationMonitor(HealthMonitor):
    @monitors.name("StoreProduct items match the item schema")  # type: ignore[untyped-decorator]  # Spidermon's
    def test_items_valid(self) -> None:
        items = self.stat(ITEMS_STAT)
        if not items:
            return
        invalid = self.stat(INVALID_STAT)
        limit = self.settings.getfloat("HEALTH_MAX_INVALID_ITEM_SHARE")
        fields = sorted(k.removeprefix(FIELD_ERRORS_PREFIX) for k in self.stats if k.startswith(FIELD_ERRORS_PREFIX))
        self.assertLessEqual(
            invalid / items,
            limit,
            f"{invalid} of {items} products break the item schema (fields: {', '.join(fields)}; "
            f"HEALTH_MAX_INVALID_ITEM_SHARE = {limit:g})",
        )
