"""Item validation: the StoreProduct JSON Schema, generated from the item dataclasses, and the item
pipeline that validates a sample of the crawl's StoreProducts against it.

The schema is generated from the dataclasses in cannaspider/items.py (the item classes are the one
definition; docs/item-schema.json is this, written out and checked by a test): pydantic reads the
dataclass annotations; `item_json` gives an item the JSON shape feeds use.

The pipeline validates every HEALTH_VALIDATION_SAMPLE_EVERY-th StoreProduct (50; 1: all):
jsonschema-rs answers "valid?", Spidermon's JSON Schema validator names the failing fields of a
product that is not. It counts, never drops: a product that breaks the schema is still written
(losing data on a schema slip would be worse); ItemValidationMonitor (checks.py) fails the crawl's
health when the share of invalid items passes HEALTH_MAX_INVALID_ITEM_SHARE.

Stats: cannaspider/validation/items (products validated), cannaspider/validation/items_invalid and
cannaspider/validation/errors/<field> (one per failing field).
"""

from __future__ import annotations

import json
import logging
from functools import cache, cached_property
from typing import TYPE_CHECKING, Any

import jsonschema_rs
from pydantic import TypeAdapter
from scrapy.crawler import Crawler

from cannaspider.items import StoreProduct

if TYPE_CHECKING:
    from spidermon.contrib.validation import JSONSchemaValidator

logger = logging.getLogger(__name__)


# -- the schema -------------------------------------------------------------------------------------


@cache
def _adapter() -> TypeAdapter[StoreProduct]:
    return TypeAdapter(StoreProduct)


@cache
def store_product_schema() -> dict[str, Any]:
    schema = _adapter().json_schema(mode="serialization")
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = "https://cannaspider.invalid/schemas/store-product.json"
    return schema


@cache
def inlined_schema() -> dict[str, Any]:
    """The same schema with its $refs replaced by their definitions (none is recursive): jsonschema
    validates it a third faster than resolving references per item."""

    def inline(node: Any, defs: dict[str, Any]) -> Any:
        if isinstance(node, dict):
            if "$ref" in node:
                return inline(defs[node["$ref"].rsplit("/", 1)[-1]], defs)
            return {k: inline(v, defs) for k, v in node.items() if k not in {"$defs", "$id"}}
        if isinstance(node, list):
            return [inline(v, defs) for v in node]
        return node

    schema = store_product_schema()
    inlined: dict[str, Any] = inline(schema, schema.get("$defs", {}))
    return inlined


def item_json(item: StoreProduct) -> dict[str, Any]:
    """The item as JSON data (datetimes as ISO strings), what the schema describes."""
    data: dict[str, Any] = _adapter().dump_python(item, mode="json", warnings=False)
    return data


def schema_text() -> str:
    return json.dumps(store_product_schema(), indent=2, sort_keys=True) + "\n"


# -- the pipeline -----------------------------------------------------------------------------------

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
        self.schema = schema
        self.every = max(1, crawler.settings.getint("HEALTH_VALIDATION_SAMPLE_EVERY"))
        self.seen = 0
        self.logged = 0

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> StoreProductValidationPipeline:
        return cls(crawler)

    @cached_property
    def validator(self) -> JSONSchemaValidator:
        """Spidermon's validator, built for the first product that is not valid: it loads
        jsonschema (~70 ms of every crawl's start when built with the pipeline), which a crawl
        whose products keep to the schema never needs."""
        from spidermon.contrib.validation import JSONSchemaValidator  # noqa: PLC0415 - a crawl's start-up time

        return JSONSchemaValidator(self.schema)

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


if __name__ == "__main__":  # python -m cannaspider.monitors.validation > docs/item-schema.json
    print(schema_text(), end="")
