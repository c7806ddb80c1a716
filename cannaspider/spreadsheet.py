"""CSV cells a spreadsheet opens as text, never as a formula (README, "Feeds and the item schema").

Names come from stores and brands, and a spreadsheet runs a cell that begins with `=`, `+`, `-` or
`@` as a formula (`=HYPERLINK(…)`, `=cmd|…`), and one that begins with a tab or a carriage return
after skipping it. As spreadsheet-safe CSV writers do (OWASP's rule for CSV injection), such a text
cell gets a leading `'`, which the spreadsheet shows as text and does not display. Only text is
touched: numbers (a negative price) are written as numbers. JSON feeds are data, not
spreadsheets: they carry every value as it was seen.
"""

from __future__ import annotations

from typing import Any

FORMULA_LEADERS = ("=", "+", "-", "@", "\t", "\r")


def text_cell(value: Any) -> Any:
    """`value`, with a `'` before a text that a spreadsheet would read as a formula."""
    if isinstance(value, str) and value.startswith(FORMULA_LEADERS):
        return "'" + value
    return value
