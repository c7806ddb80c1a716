"""What makes two store products the same product, and what a product costs per unit.

Both run in the normalizer, once per product of every crawl, so they stay plain Python with the
common shapes on the shortest path. The rules (docs/analytics.md, "One brand, one product"):

- A brand is named by Dutchie's `brandId` when the product has one, else by its normalized name
  (`normalize_name`: case, accents, punctuation and "&"/"and" do not matter). Which brands are one
  canonical brand is decided in the database (migrations/016_canonical_brands_products.sql):
  an operator's alias, else the first brand seen with the same normalized name.
- A product is named by Dutchie's `enterpriseProductId` when present (a chain's catalog id, shared
  by its stores), else by its canonical brand, category, normalized name (without the brand's
  name in front) and option sizes (`size_key`).
- Unit prices (`unit_prices`): per gram for weighed options, per 100 mg THC for edibles with a
  potency in mg, per unit otherwise, taken on the option whose price is the product's price
  (`price_rec`, the lowest option's price), and its special price on the same option.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

from cannaspider.items import Potency, ProductOption

NOT_ALNUM = re.compile(r"[^0-9a-z]+")
EDIBLE_CATEGORIES = frozenset({"Edible", "Edibles"})
UNIT_PRICE_PLACES = 4  # numeric(16, 4) (migrations/017_unit_prices.sql)
UNIT_PRICE_MAX = 999_999_999_999.0  # beyond it (a price over a size near zero) no real unit price: None


def normalize_name(text: str | None) -> str | None:
    """'Dr. Zodiak's' → 'dr zodiaks'; 'Bud & Bros' and 'Bud and Bros' → 'bud and bros'; None when empty."""
    if not text:
        return None
    if not text.isascii():  # accents off: 'Cañamo' → 'canamo' (and the typographic apostrophe)
        text = unicodedata.normalize("NFKD", text.replace("\u2019", "")).encode("ascii", "ignore").decode()
    text = text.lower()
    if "'" in text:
        text = text.replace("'", "")
    if "&" in text:  # the word 'and' stays itself: 'Bud & Bros' is 'bud and bros'
        text = text.replace("&", " and ")
    return NOT_ALNUM.sub(" ", text).strip() or None  # (one space for each run: nothing to collapse)


@lru_cache(maxsize=4096)
def brand_key_name(brand_name: str | None) -> str | None:
    """A brand's normalized name (a few hundred distinct names across every store: cached)."""
    return normalize_name(brand_name)


@lru_cache(maxsize=8192)
def product_name_key(name: str, brand_norm: str | None) -> str | None:
    """The product's normalized name, the brand's name in front of it removed ('Stiiizy - Blue
    Dream Pod' of Stiiizy → 'blue dream pod'), as menus write it with or without. Cached: a chain's
    stores carry the same products, and a crawl takes a chain's stores together."""
    key = normalize_name(name)
    if key and brand_norm and key.startswith(brand_norm) and len(key) > len(brand_norm):
        if key[len(brand_norm)] == " ":
            key = key[len(brand_norm) + 1 :]
    return key


def size_key(options: list[ProductOption]) -> str:
    """The product's option sizes, smallest first: '1g,3.5g,7g'; '' when none has a size."""
    sizes = {(o.size_unit, o.size_value) for o in options if o.size_value is not None and o.size_unit}
    if not sizes:
        return ""
    return ",".join(f"{value:g}{unit}" for unit, value in sorted(sizes))


def unit_prices(
    options: list[ProductOption], price: float | None, category: str | None, thc: Potency
) -> tuple[float | None, float | None, str | None]:
    """(unit price, unit price on special, basis: 'g' | '100mg_thc' | 'unit'), or Nones without a price."""
    if price is None:
        return None, None, None
    option = None
    for candidate in options:
        if candidate.price_rec == price:
            option = candidate
            break
    special = option.price_rec_special if option is not None else None
    if category in EDIBLE_CATEGORIES and thc.unit == "mg" and thc.value:
        per, basis = thc.value / 100.0, "100mg_thc"
    elif option is not None and option.size_value and option.size_unit == "g":
        per, basis = option.size_value, "g"
    elif option is not None and option.size_value and option.size_unit == "each":
        per, basis = option.size_value, "unit"
    else:
        per, basis = 1.0, "unit"
    value = price / per
    if value > UNIT_PRICE_MAX:  # the column would refuse it, and the whole batch with it
        return None, None, None
    return (
        round(value, UNIT_PRICE_PLACES),
        round(special / per, UNIT_PRICE_PLACES) if special is not None and special / per <= UNIT_PRICE_MAX else None,
        basis,
    )
