"""The JSON Schema of StoreProduct, generated from the dataclasses in cannaspider/items.py (the
item classes are the one definition; docs/item-schema.json is this, written out and checked by a
test). pydantic reads the dataclass annotations; `item_json` gives an item the JSON shape feeds use."""

from __future__ import annotations

import json
from functools import cache
from typing import Any

from pydantic import TypeAdapter

from cannaspider.items import StoreProduct


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


if __name__ == "__main__":  # python -m cannaspider.monitors.schema > docs/item-schema.json
    print(schema_text(), end="")
