"""Raw FilteredProducts product → canonical StoreProduct.

Every quirk of the real payload is handled here (DESIGN §5): price arrays aligned with Options
and [] when empty, irregular option strings, {unit, range} potency with range possibly null,
POSMetaData usually null, special true-or-null, effects key casing, createdAt as epoch-ms string.
A product we cannot identify or name raises NormalizationError; anything else degrades to None.
"""

from __future__ import annotations

import html
import re
from datetime import UTC, datetime
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from functools import lru_cache

from cannaspider.items import Potency, ProductOption, RawProduct, StoreProduct

OBJECT_ID = re.compile(r"^[0-9a-fA-F]{24}$")
TAG = re.compile(r"<[^>]*>")
OPTION = re.compile(r"^\s*(?P<num>\d+/\d+|\d+(?:\.\d+)?|\.\d+)\s*(?P<unit>oz|g|gc|mg|ml|pk|ct)?\b", re.I)
POTENCY_UNITS = {"PERCENTAGE": "percent", "MILLIGRAMS": "mg", "MILLIGRAMS_PER_GRAM": "mg_per_g"}
STRAIN_TYPES = {"indica": "Indica", "sativa": "Sativa", "hybrid": "Hybrid", "high cbd": "High CBD",
                "1 to 1": "1:1", "1:1": "1:1", "indica-hybrid": "Indica-Hybrid",
                "sativa-hybrid": "Sativa-Hybrid", "cbd": "CBD"}
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


@lru_cache(maxsize=65536)
def _decimal_of(value: float, places: int) -> Decimal | None:
    # Hot path: tens of thousands of prices and potencies per crawl, nearly all plain numbers
    # that repeat. Decimals are immutable, so cached ones are safe to share.
    if value != value or value in (float("inf"), float("-inf")):
        return None
    return Decimal(f"{value:.{places}f}")


def _parse_decimal(value: object, places: int, strip: str = "") -> Decimal | None:
    """None, bools and garbage → None; numbers and numeric strings → a Decimal with `places` decimals."""
    cls = type(value)
    if cls is float or cls is int:
        return _decimal_of(value, places)
    if value is None or cls is bool:
        return None
    try:
        number = Decimal(str(value).strip().lstrip(strip))
    except (InvalidOperation, ValueError):
        return None
    return number.quantize(QUANTUM[places], rounding=ROUND_HALF_UP) if number.is_finite() else None


def money(value: object) -> Decimal | None:
    amount = _parse_decimal(value, 2, strip="$")
    return None if amount is None or amount < 0 else amount


def _int(value: object) -> int | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        return int(float(value))
    except (TypeError, ValueError):
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


def _prices(values: object) -> list[Decimal | None]:
    if not values or type(values) is not list:
        return []
    # plain non-negative numbers straight to the cache; anything else through money()
    return [_decimal_of(v, 2) if type(v) in (float, int) and v >= 0 else money(v) for v in values]


def _at(prices: list, index: int) -> Decimal | None:
    return prices[index] if index < len(prices) else None


def _lowest(prices: list) -> Decimal | None:
    present = [p for p in prices if p is not None]
    return min(present) if present else None


def potency(content: object, scalar: object) -> Potency:
    if type(content) is dict:
        values = content.get("range")
        if values and type(values) is list:  # range is often null: check it before the unit
            raw_unit = content.get("unit")
            unit = POTENCY_UNITS.get(raw_unit) or POTENCY_UNITS.get(str(raw_unit or "").upper())
            if unit:
                rng = [v for v in map(_decimal, values) if v is not None]
                if rng:
                    return Potency(max(rng), unit, rng)
    if scalar is not None:
        fallback = _decimal(scalar)
        if fallback is not None:
            # the scalar THC/CBD fields are percentages on Dutchie
            return Potency(fallback, "percent", None)
    return Potency(None, None, None)


def _decimal(value: object) -> Decimal | None:
    return _parse_decimal(value, 3)


def timestamp(value: object) -> datetime | None:
    if value is None or isinstance(value, bool):
        return None
    text = str(value).strip()
    try:
        if text.isdigit():
            return datetime.fromtimestamp(int(text) / 1000, tz=UTC)
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
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
            out.append({
                "name": clean_text(sp.get("specialName")),
                "type": sp.get("specialType") or ("bogo" if kind == "bogoSpecials" else "sale"),
                "discount": _decimal(sp.get("discount")),
                "percent_discount": sp.get("percentDiscount"),
                "bundle_price": money(_dict(sp.get("itemsForAPrice")).get("value")),
                "required_quantity": next((q for q in rewards if q is not None), None),
            })
    return out


def _stock(pos_meta: object) -> dict[str, dict]:
    children = _list(_dict(pos_meta).get("children"))
    return {str(_dict(c).get("option")): _dict(c) for c in children if _dict(c).get("option") is not None}


def _effects(raw: dict) -> dict:
    value = raw.get("effects") or raw.get("Effects")
    if value is None and "effects" not in raw and "Effects" not in raw:
        value = next((v for k, v in raw.items() if k.lower() == "effects"), None)
    return {str(k).lower(): v for k, v in value.items()} if isinstance(value, dict) else {}


def _strain(value: object) -> str | None:
    text = clean_text(value)
    if not text or text.upper() == "N/A":
        return None
    return STRAIN_TYPES.get(text.lower(), text)


def normalize(item: RawProduct) -> StoreProduct:
    raw = item.raw
    if not isinstance(raw, dict):
        raise NormalizationError(f"product is a {type(raw).__name__}, not an object")
    pid = raw.get("_id") or raw.get("id")
    if not isinstance(pid, str) or not pid.strip():
        raise NormalizationError("product has no _id/id")
    name_raw = raw.get("Name")
    name = clean_text(name_raw)
    if not name:
        raise NormalizationError(f"product {pid} has no usable Name ({name_raw!r})")

    options_raw = [str(o) for o in _list(raw.get("Options"))]
    rec = _prices(raw.get("recPrices")) or _prices(raw.get("Prices"))
    med = _prices(raw.get("medicalPrices"))
    rec_sp = _prices(raw.get("recSpecialPrices"))
    med_sp = _prices(raw.get("medicalSpecialPrices"))
    pos = raw.get("POSMetaData")
    stock = _stock(pos) if pos else {}
    options = []
    for i, opt in enumerate(options_raw):
        size, unit = parse_option_size(opt)
        st = stock.get(opt) or {}
        options.append(ProductOption(
            option=opt, size_value=size, size_unit=unit,
            price_rec=_at(rec, i), price_med=_at(med, i), price_rec_special=_at(rec_sp, i),
            price_med_special=_at(med_sp, i),
            quantity=_int(st.get("quantity")), quantity_available=_int(st.get("quantityAvailable")),
            kiosk_quantity_available=_int(st.get("kioskQuantityAvailable")),
        ))
    quantities = [o.quantity_available for o in options if o.quantity_available is not None]
    special_data = raw.get("specialData")
    specials = _specials(special_data) if special_data else []
    rec_special, med_special = _lowest(rec_sp), _lowest(med_sp)
    brand = _dict(raw.get("brand"))
    brand_name = raw.get("brandName")
    images = []
    for url in [raw.get("Image")] + [_dict(i).get("url") for i in _list(raw.get("images"))]:
        if isinstance(url, str) and url and url not in images:
            images.append(url)
    cannabinoids = []
    for c in _list(raw.get("cannabinoidsV2")):
        c = _dict(c)
        cname = clean_text(_dict(c.get("cannabinoid")).get("name"))
        if cname:
            cannabinoids.append({"name": cname, "value": _decimal(c.get("value")),
                                 "unit": POTENCY_UNITS.get(str(c.get("unit") or "").upper())})
    return StoreProduct(
        dispensary_id=item.dispensary_id,
        crawl_run_id=item.crawl_run_id,
        provider_product_id=pid.strip(),
        name_raw=str(name_raw),
        name=name,
        brand_name_raw=brand_name if isinstance(brand_name, str) else brand.get("name"),
        brand_id=str(raw.get("brandId") or brand.get("id") or "") or None,
        category=clean_text(raw.get("type")),
        subcategory=clean_text(raw.get("subcategory")),
        strain_type=_strain(raw.get("strainType")),
        price_rec=_lowest(rec),
        price_med=_lowest(med),
        price_rec_special=rec_special,
        price_med_special=med_special,
        is_on_special=bool(raw.get("special")) or bool(specials) or rec_special is not None,
        options=options,
        thc=potency(raw.get("THCContent"), raw.get("THC")),
        cbd=potency(raw.get("CBDContent"), raw.get("CBD")),
        cannabinoids=cannabinoids,
        specials=specials,
        effects=_effects(raw),
        image_url=images[0] if images else None,
        images=images,
        quantity_available=sum(quantities) if quantities else None,
        provider_created_at=timestamp(raw.get("createdAt")),
        provider_updated_at=timestamp(raw.get("updatedAt")),
    )
