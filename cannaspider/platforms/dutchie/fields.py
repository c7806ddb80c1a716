"""The Dutchie product fields besides its options (docs/dutchie.md): labels (category, subcategory,
strain type), {unit, range} potency with range possibly null, special true-or-null and its
specials, effects key casing, cannabinoids, images and the brand's fields and logo. Each degrades
to None (or empty) on what it cannot read, storable (cannaspider/storable.py).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from cannaspider.items import Potency
from cannaspider.storable import (
    DESCRIPTION,
    ID,
    INT_MAX,
    INT_MIN,
    LABEL,
    POTENCY_MAX,
    SMALL_COUNTS,
    Losses,
    as_dict,
    as_list,
    bounded,
    clean,
    clean_text,
    fetchable,
    integer,
    money,
    number,
    repair,
    storable,
)

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


# Strings that repeat across products (labels, option names) are made storable inside a cache:
# free for the usual ones, and a bad one is warned about once per process, with the first product
# that carried it.
@lru_cache(maxsize=4096)
def label(losses: Losses, value: str) -> str | None:
    # category, subcategory, Status: a few dozen distinct strings across every store
    text = clean(value if value.isascii() and "\x00" not in value else repair(losses, value, "label"))
    return bounded(losses, text, LABEL, "label") if text else None


@lru_cache(maxsize=1024)
def strain_type(losses: Losses, text: str) -> str | None:
    cleaned = clean(text if text.isascii() and "\x00" not in text else repair(losses, text, "strainType"))
    if not cleaned or cleaned.upper() == "N/A":
        return None
    return STRAIN_TYPES.get(cleaned.lower()) or bounded(losses, cleaned, LABEL, "strainType")


def potency(losses: Losses, content: object, scalar: object, what: str = "THC") -> Potency:
    if type(content) is dict:
        values = content.get("range")
        if values and type(values) is list:  # range is often null: check it before the unit
            raw_unit = content.get("unit")
            unit = (
                (POTENCY_UNITS.get(raw_unit) or POTENCY_UNITS.get(raw_unit.upper())) if type(raw_unit) is str else None
            )
            if unit:
                kept: list[float] = []  # a loop, not a comprehension: ranges hold one or two values
                for v in values:
                    if type(v) is float and -POTENCY_MAX <= v <= POTENCY_MAX and round(v, 3) == v:
                        kept.append(v)
                    elif (parsed := number(losses, v, 3, "potency")) is not None:  # None: did not parse, left out
                        kept.append(parsed)
                if kept:
                    return Potency(max(kept), unit, kept)
    if scalar is not None:
        fallback = number(losses, scalar, 3, what)
        if fallback is not None:
            # the scalar THC/CBD fields are percentages on Dutchie
            return Potency(fallback, "percent", None)
    return Potency(None, None, None)


def parse_specials(losses: Losses, special_data: object) -> list[dict[str, Any]]:
    data = as_dict(special_data)
    out = []
    for kind in ("saleSpecials", "bogoSpecials"):
        for sp in as_list(data.get(kind)):
            sp = as_dict(sp)
            if not sp:
                continue
            rewards = [
                integer(losses, as_dict(as_dict(r).get("totalQuantity")).get("quantity"), "bogoRewards.quantity")
                for r in as_list(sp.get("bogoRewards"))
            ]
            percent = sp.get("percentDiscount")
            out.append(
                {
                    "name": clean_text(losses, sp.get("specialName"), "specialName"),
                    "type": storable(losses, kind_name, "specialType")
                    if type(kind_name := sp.get("specialType")) is str and kind_name
                    else ("bogo" if kind == "bogoSpecials" else "sale"),
                    "discount": number(losses, sp.get("discount"), 3, "discount"),
                    "percent_discount": percent if type(percent) is bool else None,
                    "bundle_price": money(losses, as_dict(sp.get("itemsForAPrice")).get("value"), "itemsForAPrice"),
                    "required_quantity": next((q for q in rewards if q is not None), None),
                }
            )
    return out


def parse_effects(losses: Losses, raw: dict[str, Any]) -> dict[str, Any]:
    value = raw.get("effects") or raw.get("Effects")
    if value is None and "effects" not in raw and "Effects" not in raw:
        value = next((v for k, v in raw.items() if k.lower() == "effects"), None)
    if type(value) is not dict:
        return {}
    effects = {str(k).lower(): v for k, v in value.items()}
    try:
        usual = SMALL_COUNTS.issuperset(effects.values())  # values checked at once: small counts, as a rule
    except TypeError:  # a list or an object
        usual = False
    if not usual:
        effects = {k: _effect(losses, v) for k, v in effects.items()}
    keys = "".join(effects)  # and the keys
    if not keys.isascii() or "\x00" in keys:
        effects = {storable(losses, k, "effects"): v for k, v in effects.items()}
    return effects


def _effect(losses: Losses, value: object) -> object:
    """An effect's value (a small count on Dutchie), storable; containers are not expected: None."""
    if value is None or type(value) is bool:
        return value
    if type(value) is int and INT_MIN <= value <= INT_MAX:
        return value
    if type(value) is str:
        return storable(losses, value, "effects")
    if type(value) is float:
        if -POTENCY_MAX <= value <= POTENCY_MAX:
            return value
        losses.degrade("effects", value)
    elif type(value) is int:
        losses.degrade("effects", value)
    return None


def parse_images(losses: Losses, raw: dict[str, Any]) -> list[str]:
    images = []
    first = raw.get("Image")
    if type(first) is str and first:
        first = first if first.isascii() and "\x00" not in first else repair(losses, first, "Image")
        if fetchable(losses, first):
            images.append(first)
    for image in as_list(raw.get("images")):
        url = image.get("url") if type(image) is dict else None
        if type(url) is str and url:
            if not url.isascii() or "\x00" in url:
                url = repair(losses, url, "images")
            if url not in images and fetchable(losses, url):
                images.append(url)
    return images


def parse_cannabinoids(losses: Losses, values: list[Any]) -> list[dict[str, Any]]:
    out = []
    for c in values:
        c = as_dict(c)
        name = c.get("cannabinoid")
        name = name.get("name") if isinstance(name, dict) else None
        # the usual name, plain ASCII without NUL, can lose nothing: its cleaning is cached (see label)
        if type(name) is str and name.isascii() and "\x00" not in name:
            name = _cannabinoid_name(losses, name)
        else:
            name = clean_text(losses, name, "cannabinoid")
        if name:
            value = c.get("value")
            unit = c.get("unit")
            out.append(
                {
                    "name": name,
                    "value": value
                    if type(value) is float and -POTENCY_MAX <= value <= POTENCY_MAX and round(value, 3) == value
                    else number(losses, value, 3, "cannabinoid"),
                    "unit": (POTENCY_UNITS.get(unit) or POTENCY_UNITS.get(unit.upper()))
                    if type(unit) is str and unit
                    else POTENCY_UNITS.get(str(unit or "").upper()),
                }
            )
    return out


@lru_cache(maxsize=1024)
def _cannabinoid_name(losses: Losses, name: str) -> str | None:
    return clean_text(losses, name, "cannabinoid")


def brand_field(losses: Losses, value: object, brand: object, key: str, what: str, limit: int) -> str | None:
    """brandName/brandId when not plain text or too long: made storable and bounded to `limit`
    (storable.py); else the brand object's own; else None."""
    for candidate in (value, brand.get(key) if type(brand) is dict else None):
        if type(candidate) is str and candidate:
            return bounded(losses, storable(losses, candidate, what), limit, what)
        if type(candidate) is int and key == "id":
            return bounded(losses, str(candidate), ID, what)
    return None


@lru_cache(maxsize=1024)
def brand_description(losses: Losses, text: str) -> str | None:
    """brand.description as sent (storable, bounded), None when blank: one text per brand, cached."""
    text = text.strip()
    return (
        bounded(losses, storable(losses, text, "brand.description"), DESCRIPTION, "brand.description") if text else None
    )


def brand_logo(losses: Losses, brand: object) -> str | None:
    """brand.imageUrl when it is an http(s) URL (stored once per brand: pipelines/images.py)."""
    url = brand.get("imageUrl") if type(brand) is dict else None
    return url if type(url) is str and url and url.isascii() and fetchable(losses, url) else None
