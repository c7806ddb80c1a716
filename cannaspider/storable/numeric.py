"""Numbers their columns hold (migrations/001 and 002): money numeric(12, 2), potency numeric(12, 3),
counts integer; nested JSON values get the limits of their top-level counterparts, should anyone
cast them. Infinities, NaN and values beyond the column become None, recorded
(storable/degraded.py); garbage (bools, text that is no number) becomes None silently.

Money is a float rounded half-up to the cent, potency a float rounded half-up to 3 places, both on
the decimal text as written (the JSON number 2.675 and the string "2.675" both give 2.68): the API
sends JSON numbers, PostgreSQL stores numeric, and floats go to the writers' JSON encoder (orjson,
in C) with no per-value Python call, where Decimals cost half a microsecond each. The common
shapes (a float already in range and to its places) take the shortest path.
"""

from __future__ import annotations

import re
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation

from cannaspider.storable.degraded import degrade

THOUSANDS = re.compile(r"\d{1,3}(?:,\d{3})+(?:\.\d*)?")
QUANTUM = {2: Decimal("0.01"), 3: Decimal("0.001")}
SCALE = (1.0, 10.0, 100.0, 1000.0)

# The columns' limits (migrations/001_dispensaries_products.sql, 002_product_snapshots.sql)
MONEY_MAX = 9_999_999_999.99  # numeric(12, 2): prices
POTENCY_MAX = 999_999_999.999  # numeric(12, 3): potency, cannabinoids, discounts, option sizes
LARGEST = (0.0, 0.0, MONEY_MAX, POTENCY_MAX)  # by decimal places
LARGEST_DECIMAL = (Decimal(0), Decimal(0), Decimal("9999999999.99"), Decimal("999999999.999"))
INT_MIN, INT_MAX = -(2**31), 2**31 - 1  # integer: quantities
SMALL_COUNTS = frozenset(range(1001))  # effects values: storable without a closer look


def number(value: object, places: int, what: str, strip: str = "") -> float | None:
    """A float rounded half-up to `places` decimals as the number is written (floats by their
    shortest repr, which is the JSON text they were read from), or None: for None, bools and
    garbage silently, for infinities, NaN and values beyond the column with a warning."""
    if value is None:
        return None
    if type(value) is float:
        largest = LARGEST[places]
        if -largest <= value <= largest:
            rounded = round(value, places)
            # round() rounds the binary value, which is the decimal text give or take half an ulp:
            # the same result unless the text is (nearly) a tie, like 2.675 (2.67499999… in binary)
            if rounded == value or abs(value * SCALE[places] % 1 - 0.5) > 0.001:
                return rounded
            return decimal(Decimal(repr(value)), places, what, value)  # repr: the text as written
        degrade(what, value)  # inf, NaN, beyond the column
        return None
    if type(value) is int:
        if -LARGEST[places] <= value <= LARGEST[places]:
            return float(value)
        degrade(what, value)
        return None
    if type(value) is not str:  # bools, lists, objects
        return None
    text = value.strip().lstrip(strip).strip()
    if "," in text:  # thousands separators ("1,299.00"); any other comma is not a number we know
        if not THOUSANDS.fullmatch(text.lstrip("+-")):
            return None
        text = text.replace(",", "")
    try:
        number = Decimal(text)
    except (InvalidOperation, ValueError):
        return None
    return decimal(number, places, what, value)


def decimal(number: Decimal, places: int, what: str, value: object) -> float | None:
    if not number.is_finite() or number.adjusted() >= 12:  # NaN, Infinity, far beyond any column
        degrade(what, value)
        return None
    rounded = number.quantize(QUANTUM[places], rounding=ROUND_HALF_UP)
    if abs(rounded) > LARGEST_DECIMAL[places]:
        degrade(what, value)
        return None
    return float(rounded)


def money(value: object, what: str = "price") -> float | None:
    """A price: None for garbage and negatives, else a float to the cent (half-up, as written)."""
    amount = number(value, 2, what, "$")
    return None if amount is None or amount < 0 else amount


def integer(value: object, what: str) -> int | None:
    """A count that fits an integer column: 4, 4.0, "4" → 4; garbage → None; beyond → None, warned."""
    if type(value) is int:
        if INT_MIN <= value <= INT_MAX:
            return value
        degrade(what, value)
        return None
    if value is None or isinstance(value, bool) or not isinstance(value, (float, str)):
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    if INT_MIN <= number < INT_MAX + 1:
        return int(number)
    degrade(what, value)  # inf, NaN, beyond the column
    return None
