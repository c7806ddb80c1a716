"""`-O file.csv`: flat columns a spreadsheet or pandas reads; `-O file.xml`: elements of the same text,
which an XML parser reads (cannaspider/exporters.py)."""

from __future__ import annotations

import csv
import io
import json
from xml.etree import ElementTree

import pytest
from scrapy.exporters import JsonLinesItemExporter

from cannaspider.exporters import FlatCsvItemExporter, FlatXmlItemExporter
from cannaspider.items import RawProduct
from cannaspider.platforms.dutchie.normalizer import normalize
from cannaspider.storable import Losses
from sandbox.catalog import CatalogConfig, _product
from tests.helpers import add_store

NESTED = ("options", "thc", "cbd", "cannabinoids", "specials", "effects", "images")


@pytest.mark.integration
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
        expected = normalize(RawProduct(d, None, raw), Losses())
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


def test_a_text_a_spreadsheet_would_run_as_a_formula_gets_a_quote_and_json_lines_keep_it_as_it_is():
    item = {
        "name": '=HYPERLINK("http://x","y")',
        "brand_name_raw": "+1 Brand",
        "category": "-Flower",
        "strain_type": "@SUM(A1)",
        "subcategory": "\tpre-rolls",
        "effects": "\rcalm",
        "name_raw": "Blue Dream = good",  # only a leading character counts
        "price_rec": -5.0,  # a number, not a text: as it is
        "options": [{"option": "=1"}],  # JSON text, which starts with [
    }
    out = io.BytesIO()
    exporter = FlatCsvItemExporter(out)
    exporter.start_exporting()
    exporter.export_item(item)
    exporter.finish_exporting()
    [row] = list(csv.DictReader(io.StringIO(out.getvalue().decode())))
    assert row == {
        "name": '\'=HYPERLINK("http://x","y")',
        "brand_name_raw": "'+1 Brand",
        "category": "'-Flower",
        "strain_type": "'@SUM(A1)",
        "subcategory": "'\tpre-rolls",
        "effects": "'\rcalm",
        "name_raw": "Blue Dream = good",
        "price_rec": "-5.0",
        "options": '[{"option":"=1"}]',
    }
    lines = io.BytesIO()
    JsonLinesItemExporter(lines).export_item(item)
    assert json.loads(lines.getvalue()) == item  # a JSON feed is data: every value as it was seen


def test_the_xml_feed_holds_text_and_json_never_a_python_repr_and_parses():
    raw = _product(CatalogConfig().seed, 1, 3, 0, "http://127.0.0.1:1")
    product = normalize(RawProduct(7, None, raw), Losses())
    product.name = "Gelato\x0b 1g"  # a control character a menu may hold: not allowed in XML 1.0
    product.brand_id = None
    out = io.BytesIO()
    exporter = FlatXmlItemExporter(out)
    exporter.start_exporting()
    exporter.export_item(product)
    exporter.finish_exporting()
    text = out.getvalue().decode()
    assert "Potency(" not in text and "ProductOption(" not in text and ">None<" not in text
    [item] = ElementTree.fromstring(text)  # a parser reads it back
    fields = {el.tag: el.text or "" for el in item}
    assert fields["name"] == "Gelato\ufffd 1g" and fields["brand_id"] == ""
    assert fields["is_on_special"] in ("true", "false")
    assert [o["option"] for o in json.loads(fields["options"])] == [o.option for o in product.options]
    assert json.loads(fields["thc"])["value"] == product.thc.value
