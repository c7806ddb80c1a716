"""The options of a Dutchie product (docs/dutchie.md): option strings ("1/8oz", "1gC", "1 lb", "N/A"),
the rawOptions aligned with them (the size, "3.5g", where an option is a tier name, "Tier 1"), the
price arrays aligned with them ([] when empty), their stock from POSMetaData (usually null).
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from functools import lru_cache
from typing import Any, cast

from cannaspider.items import ProductOption
from cannaspider.storable import (
    INT_MAX,
    LABEL,
    LARGEST_DECIMAL,
    MONEY_MAX,
    Losses,
    as_dict,
    as_list,
    bounded,
    integer,
    money,
    repair,
)

OPTION = re.compile(r"^\s*(?P<num>\d+/\d+|\d+(?:\.\d+)?|\.\d+)\s*(?P<unit>oz|lbs?|g|gc|mg|ml|pk|ct)?\b", re.I)
GRAMS_PER_OZ = Decimal("28")  # the trade's ounce: an eighth is sold as 3.5 g
GRAMS_PER_LB = Decimal("453.592")  # the avoirdupois pound (docs/dutchie.md: "1 lb" is sold by it)


@lru_cache(maxsize=4096)
def option_name_size(losses: Losses, option: str) -> tuple[str, float | None, str | None]:
    """An option's storable name and its size (made storable in the cache: see fields.label)."""
    text = option if option.isascii() and "\x00" not in option else repair(losses, option, "Options")
    return bounded(losses, text, LABEL, "Options"), *parse_option_size(text)


@lru_cache(maxsize=4096)
def raw_option_size(losses: Losses, raw_option: str) -> tuple[str, float | None, str | None]:
    """option_name_size(losses, ) of a rawOptions entry."""
    text = raw_option if raw_option.isascii() and "\x00" not in raw_option else repair(losses, raw_option, "rawOptions")
    return bounded(losses, text, LABEL, "rawOptions"), *parse_option_size(text)


@lru_cache(maxsize=4096)
def parse_option_size(option: str) -> tuple[float | None, str | None]:
    """'1/8oz' → (3.5, 'g'); '.5g' → (0.5, 'g'); '1gC' → (1, 'g'); '1/2 lb' → (226.8, 'g'); '100mg' → (100, 'mg');
    'N/A' → (None, None)."""
    match = OPTION.match(option or "")
    if not match:
        return None, None
    num, unit = match["num"], (match["unit"] or "").lower()
    try:
        if "/" in num:
            top, bottom = num.split("/")
            value = Decimal(top) / Decimal(bottom)
        else:
            value = Decimal(num)
    except (InvalidOperation, ZeroDivisionError):
        return None, None
    if unit == "oz":
        value *= GRAMS_PER_OZ
    elif unit in ("lb", "lbs"):
        value *= GRAMS_PER_LB
    if not value <= LARGEST_DECIMAL[3]:  # no real size; and beyond numeric(12, 3)
        return None, None
    if unit in ("oz", "lb", "lbs"):
        return float(value.quantize(Decimal("0.01"))), "g"
    if unit in ("g", "gc"):
        return float(value), "g"
    if unit in ("mg", "ml"):
        return float(value), unit
    if unit in ("pk", "ct"):
        return float(value), "each"
    return None, None


def prices(losses: Losses, values: object) -> list[float | None]:
    if not values or type(values) is not list:
        return []
    # plain floats already to the cent (the rule) make a copy; anything else (ints, strings, garbage)
    # goes through money(losses, ), which names no field: a comprehension using a local of this function
    # would cost a closure
    for v in values:
        if type(v) is not float or not 0 <= v <= MONEY_MAX or round(v, 2) != v:
            return [
                v if type(v) is float and 0 <= v <= MONEY_MAX and round(v, 2) == v else money(losses, v) for v in values
            ]
    return values.copy()


def lowest(prices: list[float | None]) -> float | None:
    if not prices:
        return None
    if None in prices:
        prices = [p for p in prices if p is not None]
        if not prices:
            return None
    return min(cast(list[float], prices))


def _stock(pos_meta: object) -> dict[str, dict[str, Any]]:
    children = as_list(as_dict(pos_meta).get("children"))
    return {str(c["option"]): c for c in children if type(c) is dict and c.get("option") is not None}


def parse_options(
    losses: Losses,
    raw: dict[str, Any],
    options_raw: list[Any],
    rec: list[float | None],
    med: list[float | None],
    rec_sp: list[float | None],
    med_sp: list[float | None],
) -> tuple[list[ProductOption], int | None]:
    """The options, and the sum of their available quantities (None when no option has one). An
    option whose name has no size ('Tier 1') takes the size of its rawOptions entry ('3.5g')."""
    pos = raw.get("POSMetaData")
    stock = _stock(pos) if pos else None
    raw_options = raw.get("rawOptions")
    n_raw = len(raw_options) if type(raw_options) is list else 0
    n_rec, n_med, n_rec_sp, n_med_sp = len(rec), len(med), len(rec_sp), len(med_sp)
    options = []
    total = None
    for i, opt in enumerate(options_raw):
        if type(opt) is not str:
            opt = str(opt)
        text, size, unit = option_name_size(losses, opt)
        raw_text = None
        if i < n_raw and type(entry := raw_options[i]) is str:  # type: ignore[index]
            raw_text, raw_size, raw_unit = raw_option_size(losses, entry)
            if size is None:
                size, unit = raw_size, raw_unit
        st = stock.get(opt) if stock else None  # POSMetaData names the option as the payload does
        if st:
            quantity = integer(losses, st.get("quantity"), "quantity")
            available = integer(losses, st.get("quantityAvailable"), "quantityAvailable")
            kiosk = integer(losses, st.get("kioskQuantityAvailable"), "kioskQuantityAvailable")
            if available is not None:
                total = available if total is None else total + available
        else:
            quantity = available = kiosk = None
        options.append(
            ProductOption(
                text,
                size,
                unit,
                rec[i] if i < n_rec else None,
                med[i] if i < n_med else None,
                rec_sp[i] if i < n_rec_sp else None,
                med_sp[i] if i < n_med_sp else None,
                quantity,
                available,
                kiosk,
                raw_text,
            )
        )
    if total is not None and total > INT_MAX:  # each option's count fits, their sum does not
        losses.degrade("quantity_available", total)
        total = None
    return options, total
