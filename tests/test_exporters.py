"""`-O file.csv`: flat columns a spreadsheet or pandas reads (cannaspider/exporters.py)."""

from __future__ import annotations

import csv
import json

from cannaspider.dutchie.normalizer import normalize
from cannaspider.items import RawProduct
from sandbox.catalog import CatalogConfig, _product
from tests.helpers import add_store

NESTED = ("options", "thc", "cbd", "cannabinoids", "specials", "effects", "images")


def test_a_crawl_to_csv_reads_back_with_the_csv_module_and_json(crawl, db, sandbox, tmp_path):
    store = sandbox.stores("AZ")[0]
    d = add_store(db, store)
    out = tmp_path / "products.csv"
    result = crawl("product_resync", "-O", str(out), dispensary_id=d)
    assert result.returncode == 0, result.stderr[-2000:]
    with out.open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == len(sandbox.menu(store["id"], 0))
    for row in rows:
        assert row["is_on_special"] in ("true", "false")
        for name in NESTED:
            json.loads(row[name])  # never a Python repr
        assert row["price_rec"] == "" or float(row["price_rec"]) > 0
    # each cell is what the crawl saw: the sandbox's product, normalized, field for field
    by_id = {row["provider_product_id"]: row for row in rows}
    checked = 0
    for index in range(40):
        raw = _product(CatalogConfig().seed, store["id"], index, 0, sandbox.urls.base)
        if raw["_id"] not in by_id:
            continue
        expected = normalize(RawProduct(d, None, raw))
        row = by_id[raw["_id"]]
        options = json.loads(row["options"])
        assert [o["option"] for o in options] == [o.option for o in expected.options]
        assert [o["size_value"] for o in options] == [o.size_value for o in expected.options]
        assert json.loads(row["thc"]) == {
            "value": expected.thc.value,
            "unit": expected.thc.unit,
            "range": expected.thc.range,
        }
        assert row["is_on_special"] == ("true" if expected.is_on_special else "false")
        assert row["name"] == expected.name
        assert row["brand_id"] == (expected.brand_id or "")
        assert row["unit_price_basis"] == (expected.unit_price_basis or "")
        assert (float(row["unit_price"]) if row["unit_price"] else None) == expected.unit_price
        checked += 1
    assert checked >= 30
