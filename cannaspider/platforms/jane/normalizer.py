"""A products-index document (a "hit") → the shared StoreProduct (docs/jane.md, "Products").

A Jane product is priced per named weight: `available_weights` lists the weights the store sells
(`eighth ounce`, `each`, …) and each has its fields, `price_<weight>` (the weight's name with
underscores), `special_price_<weight>` and `discounted_price_<weight>`. Each available weight
becomes one option, its size in grams (the trade's ounce of 28 g: an eighth is 3.5 g) or one unit
for `each`. A weight name we do not know is left out of the options and reported as lost
(`Losses`, cannaspider/storable.py), the product kept. The category is mapped onto the taxonomy Dutchie's
products carry, so market figures group both platforms' products together; `category` on Jane is
the strain lineage (indica, sativa, hybrid, cbd). Lab results become cannabinoids in the shape
Dutchie's do. A product without a usable `product_id` or name raises NormalizationError.
"""

from __future__ import annotations

from typing import Any

from cannaspider.identity import brand_key_name, option_grams, product_name_key, sizes_key, unit_prices
from cannaspider.items import Potency, ProductOption, RawProduct, StoreProduct
from cannaspider.platforms.interface import NormalizationError
from cannaspider.storable import (
    BRAND_NAME,
    ID,
    LABEL,
    NAME,
    Losses,
    as_list,
    bounded,
    clean,
    clean_text,
    fetchable,
    money,
    number,
    repair,
    storable,
)

# a weight's name → (its fields' suffix, size, unit)
WEIGHTS: dict[str, tuple[str, float, str]] = {
    "half gram": ("half_gram", 0.5, "g"),
    "gram": ("gram", 1.0, "g"),
    "two gram": ("two_gram", 2.0, "g"),
    "eighth ounce": ("eighth_ounce", 3.5, "g"),
    "quarter ounce": ("quarter_ounce", 7.0, "g"),
    "half ounce": ("half_ounce", 14.0, "g"),
    "ounce": ("ounce", 28.0, "g"),
    "each": ("each", 1.0, "each"),
}
# Jane's `kind` → the category Dutchie's products carry (sandbox/catalog.py CATEGORIES, docs/dutchie.md)
CATEGORIES = {
    "flower": "Flower",
    "pre-roll": "Pre-Rolls",
    "pre_roll": "Pre-Rolls",
    "vape": "Vaporizers",
    "vaporizer": "Vaporizers",
    "extract": "Concentrate",
    "edible": "Edible",
    "tincture": "Tincture",
    "topical": "Topicals",
    "gear": "Accessories",
    "merch": "Accessories",
}
# `category` (the lineage) → the strain types Dutchie's normalizer stores
STRAIN_TYPES = {"indica": "Indica", "sativa": "Sativa", "hybrid": "Hybrid", "cbd": "CBD"}
LAB_UNITS = {"percentage": "percent", "percent": "percent", "%": "percent", "mg": "mg", "milligrams": "mg"}


def product_id(raw: object) -> str | None:
    """`product_id` as text: Jane's id of the product (the same across crawls; objectID also names
    the store). Digits only: a number, or a string of digits as sent."""
    if not isinstance(raw, dict):
        return None
    value = raw.get("product_id")
    if type(value) is int:
        return str(value) if value >= 0 else None
    if type(value) is str:
        text = value.strip()
        return text if text and text.isascii() and text.isdigit() else None
    return None


def _label(losses: Losses, value: str, what: str) -> str | None:
    text = clean(storable(losses, value, what))
    return bounded(losses, text, LABEL, what) if text else None


def _category(losses: Losses, kind: object) -> str | None:
    if type(kind) is not str:
        return None
    return CATEGORIES.get(kind.strip().lower()) or _label(losses, kind, "kind")


def _strain(losses: Losses, category: object) -> str | None:
    if type(category) is not str:
        return None
    return STRAIN_TYPES.get(category.strip().lower()) or _label(losses, category, "category")


def _lowest(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return min(present) if present else None


def parse_options(losses: Losses, raw: dict[str, Any]) -> list[ProductOption]:
    """One option per available weight, with its prices (a price that is not a number: None, lost)."""
    weights = raw.get("available_weights")
    if type(weights) is not list:
        return []
    options: list[ProductOption] = []
    for weight in weights:
        known = WEIGHTS.get(weight.strip().lower()) if type(weight) is str else None
        if known is None:
            losses.degrade("available_weights", weight)
            continue
        suffix, size, unit = known
        price = money(losses, raw.get(f"price_{suffix}"), f"price_{suffix}")
        special = money(losses, raw.get(f"special_price_{suffix}"), f"special_price_{suffix}")
        discounted = money(losses, raw.get(f"discounted_price_{suffix}"), f"discounted_price_{suffix}")
        # the special's price, else the store's standing discount, when it is below the price
        reduced = _lowest([special, discounted])
        if reduced is not None and price is not None and reduced >= price:
            reduced = None
        options.append(
            ProductOption(weight.strip().lower(), size, unit, price, None, reduced, None, None, None, None, suffix)
        )
    return options


def _potency(losses: Losses, value: object, what: str) -> Potency:
    percent = number(losses, value, 3, what)
    return Potency(percent, "percent", None) if percent is not None else Potency(None, None, None)


def parse_cannabinoids(losses: Losses, raw: dict[str, Any]) -> list[dict[str, Any]]:
    """`lab_results` ({compound_name, value, unit_type} entries, or groups of them under
    `lab_results` per weight) as Dutchie's cannabinoids; the percentages sent beside them
    (percent_thc, percent_thca, …) when there are none."""
    entries: list[Any] = []
    for result in as_list(raw.get("lab_results")):
        if type(result) is dict and type(result.get("lab_results")) is list:
            entries.extend(result["lab_results"])
        else:
            entries.append(result)
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for entry in entries:
        if type(entry) is not dict:
            continue
        name = clean_text(losses, entry.get("compound_name") or entry.get("name"), "lab_results")
        if not name or name.lower() in seen:
            continue
        seen.add(name.lower())
        unit = entry.get("unit_type") or entry.get("unit")
        out.append(
            {
                "name": name.upper() if len(name) <= 5 else name,
                "value": number(losses, entry.get("value"), 3, "lab_results"),
                "unit": LAB_UNITS.get(unit.strip().lower()) if type(unit) is str else "percent",
            }
        )
    if not out:
        for key in ("percent_thc", "percent_thca", "percent_cbd", "percent_cbda", "percent_tac"):
            value = number(losses, raw.get(key), 3, key)
            if value is not None:
                out.append({"name": key.removeprefix("percent_").upper(), "value": value, "unit": "percent"})
    return out


def parse_specials(losses: Losses, raw: dict[str, Any]) -> list[dict[str, Any]]:
    """The special the product is on (`special_id`, `special_title`, `special_amount`), then the other
    specials it takes part in (`applicable_special_ids`), in Dutchie's specials' shape."""
    out: list[dict[str, Any]] = []
    ids: list[Any] = []
    main = raw.get("special_id")
    title = clean_text(losses, raw.get("special_title"), "special_title")
    if main is not None or title:
        ids.append(main)
        out.append(_special(main, title, number(losses, raw.get("special_amount"), 3, "special_amount")))
    for other in as_list(raw.get("applicable_special_ids")):
        if type(other) in (int, str) and other not in ids:
            ids.append(other)
            out.append(_special(other, None, None))
    return out


def _special(special_id: object, name: str | None, discount: float | None) -> dict[str, Any]:
    return {
        "name": name,
        "type": "sale",
        "discount": discount,
        "percent_discount": None,
        "bundle_price": None,
        "required_quantity": None,
        "id": str(special_id) if type(special_id) in (int, str) else None,
    }


def parse_images(losses: Losses, raw: dict[str, Any]) -> list[str]:
    """`photos` (objects with their `urls`, or URLs), else `image_urls`: the original of each."""
    images: list[str] = []
    for photo in as_list(raw.get("photos")) or as_list(raw.get("product_photos")) or as_list(raw.get("image_urls")):
        url = photo
        if type(photo) is dict:
            urls = photo.get("urls")
            url = (urls.get("original") or urls.get("extraLarge")) if type(urls) is dict else photo.get("url")
        if type(url) is str and url:
            url = url if url.isascii() and "\x00" not in url else repair(losses, url, "photos")
            if url not in images and fetchable(losses, url):
                images.append(url)
    return images


def _effects(losses: Losses, value: object) -> dict[str, Any]:
    # Jane sends effect names (Dutchie, counts by name): the names as keys
    if type(value) is not list:
        return {}
    return {text.lower(): None for v in value if (text := clean_text(losses, v, "effects"))}


def normalize(item: RawProduct, losses: Losses) -> StoreProduct:
    """The hit as the shared StoreProduct; what it lost goes to `losses` (reported once it is done)."""
    raw = item.raw
    if not isinstance(raw, dict):
        raise NormalizationError(f"product is a {type(raw).__name__}, not an object")
    if losses.lost:  # left by a product whose normalization raised
        losses.lost.clear()
    pid = product_id(raw)
    if pid is None:
        raise NormalizationError(f"product has no usable product_id ({raw.get('product_id')!r})")
    name_raw = raw.get("name")
    if type(name_raw) is not str:
        raise NormalizationError(f"product {pid} has no usable name ({name_raw!r})")
    name_raw = storable(losses, name_raw, "name")
    name = clean(name_raw)
    if not name:
        raise NormalizationError(f"product {pid} has no usable name ({name_raw!r})")
    if len(name_raw) > NAME:
        name_raw, name = bounded(losses, name_raw, NAME, "name"), name[:NAME]

    options = parse_options(losses, raw)
    price_rec = _lowest([o.price_rec for o in options])
    price_special = _lowest([o.price_rec_special for o in options])
    specials = parse_specials(losses, raw)
    brand = raw.get("brand")
    brand_name = (
        bounded(losses, storable(losses, brand.strip(), "brand"), BRAND_NAME, "brand") if type(brand) is str else None
    )
    brand_name = brand_name or None
    brand_id = raw.get("product_brand_id")
    if type(brand_id) in (int, str) and brand_id:
        brand_id = bounded(losses, storable(losses, str(brand_id), "product_brand_id"), ID, "product_brand_id")
    else:
        brand_id = None
    category = _category(losses, raw.get("kind"))
    subtype = raw.get("kind_subtype") or raw.get("root_subtype")
    thc = _potency(losses, raw.get("percent_thc"), "percent_thc")
    brand_norm = brand_key_name(brand_name)
    sizes = {(o.size_unit, o.size_value) for o in options if o.size_unit is not None and o.size_value is not None}
    unit_price, unit_price_special, unit_basis = unit_prices(options, price_rec, category, thc, losses)
    images = parse_images(losses, raw)
    logo = raw.get("brand_logo_url")
    product = StoreProduct(
        item.dispensary_id,
        item.crawl_run_id,
        pid,
        name_raw,
        name,
        brand_name,
        brand_id,
        category,
        _label(losses, subtype, "kind_subtype") if type(subtype) is str else None,
        _strain(losses, raw.get("category")),
        price_rec,
        None,  # Jane sends one price per weight: the store's (no separate medical price)
        price_special,
        None,
        price_special is not None or bool(specials),
        options,
        thc,
        _potency(losses, raw.get("percent_cbd"), "percent_cbd"),
        parse_cannabinoids(losses, raw),
        specials,
        _effects(losses, raw.get("effects")),
        images[0] if images else None,
        images,
        None,  # Jane sends cart limits per weight, not stock
        None,
        None,
        "jane",
        logo if type(logo) is str and logo.isascii() and fetchable(losses, logo) else None,
        None,
        brand_norm,
        product_name_key(name, brand_norm, option_grams(options)),
        sizes_key(sizes) if sizes else "",
        unit_price,
        unit_price_special,
        unit_basis,
    )
    if losses.lost:
        losses.report(pid)
    return product
