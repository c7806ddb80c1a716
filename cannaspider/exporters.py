"""Feed exporters. `FlatCsvItemExporter` is the `csv` format of our feeds (FEED_EXPORTERS in
settings.py): one flat column per field that a spreadsheet or pandas reads as it is (README,
"Feeds and the item schema"); `FlatXmlItemExporter` the `xml` format, one element per field with
the same text.

Scrapy's own CSV exporter writes a nested value as Python's repr (`[ProductOption(option='10pk',
…)]`, `Potency(value=97.0, …)`), which nothing reads back. Here scalars are written as they are,
booleans as `true`/`false`, timestamps in ISO 8601, None as an empty cell, and every nested value
(lists, dicts, dataclasses such as the options and the potencies) as JSON text, the same JSON as
the JSON-lines feed carries for that field. A text cell that a spreadsheet would run as a
formula (`=…`, `+…`, `-…`, `@…`) gets a leading `'` (cannaspider/spreadsheet.py).

Scrapy's XML exporter has the same fault (a dataclass, None or a boolean written as its repr:
`<thc>Potency(value=97.0, …)</thc>`, `<brand_id>None</brand_id>`), and writes a control
character a menu may hold (a vertical tab) into the file, which no XML parser then reads. Its
fields are flat_value()s too (a nested value is the JSON text the JSON-lines feed carries, an
empty element for None), and a character XML 1.0 does not allow is written as U+FFFD.
"""

from __future__ import annotations

import re
from datetime import date, datetime
from typing import Any

import orjson
from scrapy.exporters import CsvItemExporter, XmlItemExporter

from cannaspider.spreadsheet import text_cell


def flat_value(value: Any) -> Any:
    """A field's value as one CSV cell."""
    if value is None:
        return ""
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, (str, int, float)):
        return value
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    # lists, dicts, dataclasses: JSON (orjson encodes dataclasses and datetimes itself)
    return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()


class FlatCsvItemExporter(CsvItemExporter):
    """CsvItemExporter whose cells are flat_value()s (a field's own serializer still wins), none of
    them a formula."""

    def serialize_field(self, field: Any, name: str, value: Any) -> Any:
        serializer = field.get("serializer") if field else None
        return text_cell(serializer(value) if serializer else flat_value(value))


# what XML 1.0 does not allow in a document (its Char production): C0 controls but tab, newline and
# carriage return; surrogates; U+FFFE and U+FFFF
NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


class FlatXmlItemExporter(XmlItemExporter):
    """XmlItemExporter whose elements hold flat_value()s as text (a field's own serializer still
    wins), every one of them a character XML allows."""

    def serialize_field(self, field: Any, name: str, value: Any) -> Any:
        serializer = field.get("serializer") if field else None
        flat = serializer(value) if serializer else flat_value(value)
        return NOT_XML.sub("\ufffd", flat if isinstance(flat, str) else str(flat))
