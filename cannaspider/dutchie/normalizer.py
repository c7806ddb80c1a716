"""Raw FilteredProducts product → canonical StoreProduct.

Every quirk of the real payload is handled here (DESIGN §5): price arrays aligned with Options
and [] when empty, irregular option strings, {unit, range} potency with range possibly null,
POSMetaData usually null, special true-or-null, effects key casing, createdAt as epoch-ms string.
A product we cannot identify or name raises NormalizationError; anything else degrades to None.

Money is a float rounded to the cent and potency a float rounded to 3 places: the API sends JSON
numbers, PostgreSQL stores numeric, and floats go to the writers' JSON encoder (orjson, in C) with
no per-value Python call, where Decimals cost half a microsecond each. This runs once per product
of every crawl (millions a day), so the common shapes take the shortest path: type checks inline,
few calls, labels (category, strain type) cached.
"""

from __future__ import annotations

import html
import re
from datetime import UTC, datetime
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from functools import lru_cache
from math import inf

from cannaspider.dutchie.ids import product_id
from cannaspider.items import Potency, ProductOption, RawProduct, StoreProduct

TAG = re.compile(r"<[^>]*>")
OPTION = re.compile(r"^\s*(?P<num>\d+/\d+|\d+(?:\.\d+)?|\.\d+)\s*(?P<unit>oz|g|gc|mg|ml|pk|ct)?\b", re.I)
POTENCY_UNITS = {"PERCENTAGE": "percent", "MILLIGRAMS": "mg", "MILLIGRAMS_PER_GRAM": "mg_per_g"}
STRAIN_TYPES = {
    "indica": "Indica",
    "sativa": "Sativa",
    "hybrid": "Hybrid",
    "high cbd": "High CBD",
    "1 to 1": "1:1",
    "1:1": "1:1",
    "indica-hybrid": "Indica-Hybrid",
    "sativa-hybrid": "Sativa-Hybrid",
    "cbd": "CBD",
}
GRAMS_PER_OZ = Decimal("28")
QUANTUM = {2: Decimal("0.01"), 3: Decimal("0.001")}


class NormalizationError(ValueError):
    """The product cannot be stored (no usable id or name)."""


def clean_text(value: object) -> str | None:
    if not isinstance(value, str):
        return None
    if "<" in value or "&" in value:
        value = html.unescape(TAG.sub(" ", value))
    return " ".join(value.split()) or None


@lru_cache(maxsize=4096)
def _label(value: str) -> str | None:
    # category, subcategory: a few dozen distinct strings across every store
    return clean_text(value)


def _number(value: object, places: int, strip: str = "") -> float | None:
    """None, bools, NaN, infinities and garbage → None; numbers and numeric strings → a float rounded
    to `places` decimals (strings half-up, exactly, through Decimal)."""
    cls = type(value)
    if cls is float:
        return round(value, places) if -inf < value < inf else None
    if value is None or cls is bool:
        return None
    try:
        if cls is int:
            return float(value)
        number = Decimal(str(value).strip().lstrip(strip))
        if not number.is_finite():
            return None
        return float(number.quantize(QUANTUM[places], rounding=ROUND_HALF_UP))
    except (InvalidOperation, ValueError, OverflowError):  # garbage, or beyond any real price
        return None


def money(value: object) -> float | None:
    amount = _number(value, 2, "$")
    return None if amount is None or amount < 0 else amount


def _int(value: object) -> int | None:
    if type(value) is int:
        return value
    if value is None or isinstance(value, bool):
        return None
    try:
        return int(float(value))
    except (TypeError, ValueError, OverflowError):
        return None


def _list(value: object) -> list:
    return value if isinstance(value, list) else []


def _dict(value: object) -> dict:
    return value if isinstance(value, dict) else {}


@lru_cache(maxsize=4096)
def parse_option_size(option: str) -> tuple[float | None, str | None]:
    """'1/8oz' → (3.5, 'g'); '.5g' → (0.5, 'g'); '1gC' → (1, 'g'); '100mg' → (100, 'mg'); 'N/A' → (None, None)."""
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
        return float((value * GRAMS_PER_OZ).quantize(Decimal("0.01"))), "g"
    if unit in ("g", "gc"):
        return float(value), "g"
    if unit in ("mg", "ml"):
        return float(value), unit
    if unit in ("pk", "ct"):
        return float(value), "each"
    return None, None


def _prices(values: object) -> list[float | None]:
    if not values or type(values) is not list:
        return []
    # plain non-negative floats inline; anything else (ints, strings, garbage) through money()
    return [round(v, 2) if type(v) is float and 0 <= v < inf else money(v) for v in values]


def _lowest(prices: list) -> float | None:
    if not prices:
        return None
    if None in prices:
        prices = [p for p in prices if p is not None]
        if not prices:
            return None
    return min(prices)


def potency(content: object, scalar: object) -> Potency:
    if type(content) is dict:
        values = content.get("range")
        if values and type(values) is list:  # range is often null: check it before the unit
            raw_unit = content.get("unit")
            unit = POTENCY_UNITS.get(raw_unit) or POTENCY_UNITS.get(str(raw_unit or "").upper())
            if unit:
                rng = [round(v, 3) if type(v) is float and -inf < v < inf else _number(v, 3) for v in values]
                if None in rng:
                    rng = [v for v in rng if v is not None]
                if rng:
                    return Potency(max(rng), unit, rng)
    if scalar is not None:
        fallback = _number(scalar, 3)
        if fallback is not None:
            # the scalar THC/CBD fields are percentages on Dutchie
            return Potency(fallback, "percent", None)
    return Potency(None, None, None)


def timestamp(value: object) -> datetime | None:
    if value is None or isinstance(value, bool):
        return None
    text = value.strip() if type(value) is str else str(value).strip()
    try:
        if text.isdigit():  # epoch milliseconds (tz positional: twice as fast as tz=UTC)
            return datetime.fromtimestamp(int(text) / 1000, UTC)
        return datetime.fromisoformat(text)  # Python 3.11+ reads the trailing Z itself
    except (ValueError, OverflowError, OSError):
        return None


def _specials(special_data: object) -> list[dict]:
    data = _dict(special_data)
    out = []
    for kind in ("saleSpecials", "bogoSpecials"):
        for sp in _list(data.get(kind)):
            sp = _dict(sp)
            if not sp:
                continue
            rewards = [_int(_dict(_dict(r).get("totalQuantity")).get("quantity")) for r in _list(sp.get("bogoRewards"))]
            out.append(
                {
                    "name": clean_text(sp.get("specialName")),
                    "type": sp.get("specialType") or ("bogo" if kind == "bogoSpecials" else "sale"),
                    "discount": _number(sp.get("discount"), 3),
                    "percent_discount": sp.get("percentDiscount"),
                    "bundle_price": money(_dict(sp.get("itemsForAPrice")).get("value")),
                    "required_quantity": next((q for q in rewards if q is not None), None),
                }
            )
    return out


def _stock(pos_meta: object) -> dict[str, dict]:
    children = _list(_dict(pos_meta).get("children"))
    return {str(c["option"]): c for c in children if type(c) is dict and c.get("option") is not None}


def _effects(raw: dict) -> dict:
    value = raw.get("effects") or raw.get("Effects")
    if value is None and "effects" not in raw and "Effects" not in raw:
        value = next((v for k, v in raw.items() if k.lower() == "effects"), None)
    return {str(k).lower(): v for k, v in value.items()} if isinstance(value, dict) else {}


@lru_cache(maxsize=1024)
def _strain_of(text: str) -> str | None:
    text = clean_text(text)
    if not text or text.upper() == "N/A":
        return None
    return STRAIN_TYPES.get(text.lower(), text)


def _strain(value: object) -> str | None:
    return _strain_of(value) if type(value) is str else None


def _options(
    raw: dict, options_raw: list, rec: list, med: list, rec_sp: list, med_sp: list
) -> tuple[list[ProductOption], int | None]:
    """The options, and the sum of their available quantities (None when no option has one)."""
    pos = raw.get("POSMetaData")
    stock = _stock(pos) if pos else None
    n_rec, n_med, n_rec_sp, n_med_sp = len(rec), len(med), len(rec_sp), len(med_sp)
    options = []
    total = None
    for i, opt in enumerate(options_raw):
        if type(opt) is not str:
            opt = str(opt)
        size, unit = parse_option_size(opt)
        st = stock.get(opt) if stock else None
        if st:
            quantity = _int(st.get("quantity"))
            available = _int(st.get("quantityAvailable"))
            kiosk = _int(st.get("kioskQuantityAvailable"))
            if available is not None:
                total = available if total is None else total + available
        else:
            quantity = available = kiosk = None
        options.append(
            ProductOption(
                opt,
                size,
                unit,
                rec[i] if i < n_rec else None,
                med[i] if i < n_med else None,
                rec_sp[i] if i < n_rec_sp else None,
                med_sp[i] if i < n_med_sp else None,
                quantity,
                available,
                kiosk,
            )
        )
    return options, total


def _images(raw: dict) -> list[str]:
    images = []
    first = raw.get("Image")
    if isinstance(first, str) and first:
        images.append(first)
    for image in _list(raw.get("images")):
        url = image.get("url") if type(image) is dict else None
        if isinstance(url, str) and url and url not in images:
            images.append(url)
    return images


def _cannabinoids(values: list) -> list[dict]:
    out = []
    for c in values:
        c = _dict(c)
        name = clean_text(_dict(c.get("cannabinoid")).get("name"))
        if name:
            out.append(
                {
                    "name": name,
                    "value": _number(c.get("value"), 3),
                    "unit": POTENCY_UNITS.get(str(c.get("unit") or "").upper()),
                }
            )
    return out


def normalize(item: RawProduct) -> StoreProduct:
    raw = item.raw
    if not isinstance(raw, dict):
        raise NormalizationError(f"product is a {type(raw).__name__}, not an object")
    get = raw.get
    pid = product_id(raw)
    if pid is None:
        raise NormalizationError("product has no _id/id")
    name_raw = get("Name")
    name = clean_text(name_raw)
    if not name:
        raise NormalizationError(f"product {pid} has no usable Name ({name_raw!r})")

    rec = _prices(get("recPrices")) or _prices(get("Prices"))
    med = _prices(get("medicalPrices"))
    rec_sp = _prices(get("recSpecialPrices"))
    med_sp = _prices(get("medicalSpecialPrices"))
    options_raw = get("Options")
    options, quantity_available = (
        _options(raw, options_raw, rec, med, rec_sp, med_sp) if type(options_raw) is list else ([], None)
    )
    special_data = get("specialData")
    specials = _specials(special_data) if special_data else []
    rec_special = _lowest(rec_sp)
    brand = get("brand")
    if type(brand) is not dict:
        brand = {}
    brand_name = get("brandName")
    category, subcategory = get("type"), get("subcategory")
    cannabinoids = get("cannabinoidsV2")
    images = _images(raw)
    # positional, in field order (keywords cost a dict and a parse per product)
    return StoreProduct(
        item.dispensary_id,  # dispensary_id
        item.crawl_run_id,  # crawl_run_id
        pid,  # provider_product_id
        str(name_raw),  # name_raw
        name,  # name
        brand_name if isinstance(brand_name, str) else brand.get("name"),  # brand_name_raw
        str(get("brandId") or brand.get("id") or "") or None,  # brand_id
        _label(category) if type(category) is str else None,  # category
        _label(subcategory) if type(subcategory) is str else None,  # subcategory
        _strain(get("strainType")),  # strain_type
        _lowest(rec),  # price_rec
        _lowest(med),  # price_med
        rec_special,  # price_rec_special
        _lowest(med_sp),  # price_med_special
        bool(get("special")) or bool(specials) or rec_special is not None,  # is_on_special
        options,  # options
        potency(get("THCContent"), get("THC")),  # thc
        potency(get("CBDContent"), get("CBD")),  # cbd
        _cannabinoids(cannabinoids) if cannabinoids and type(cannabinoids) is list else [],  # cannabinoids
        specials,  # specials
        _effects(raw),  # effects
        images[0] if images else None,  # image_url
        images,  # images
        quantity_available,  # quantity_available
        timestamp(get("createdAt")),  # provider_created_at
        timestamp(get("updatedAt")),  # provider_updated_at
    )
