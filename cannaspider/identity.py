"""What makes two store products the same product, and what a product costs per unit.

Both run in the normalizer, once per product of every crawl, so they stay plain Python with the
common shapes on the shortest path. The rules (docs/analytics.md, "One brand, one product"):

- A brand is named by Dutchie's `brandId` when the product has one, else by its normalized name
  (`normalize_name`: case, Latin accents, punctuation and "&"/"and" do not matter; the letters of
  every script are kept, so a Cyrillic or CJK name has a key too). Which brands are one
  canonical brand is decided in the database (migrations/016_canonical_brands_products.sql):
  an operator's alias, else the first brand seen with the same normalized name.
- A product is named by Dutchie's `enterpriseProductId` when present (a chain's catalog id, shared
  by its stores), else by its canonical brand, category, normalized name (without the brand's
  name in front) and option sizes (`size_key`).
- Unit prices (`unit_prices`): per gram for weighed options, per 100 mg THC for edibles with a
  potency in mg, per unit otherwise, taken on the option whose price is the product's price
  (`price_rec`, the lowest option's price), and its special price on the same option. A unit price
  outside its basis's plausible range (`PLAUSIBLE`, docs/analytics.md, "Unit prices") is no figure
  to compare: it is left out (None) and counted (`IMPLAUSIBLE`, the normalize pipeline's stat
  `cannaspider/unit_prices_implausible`); the listing's own price is kept as sent.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

from cannaspider.items import Potency, ProductOption
from cannaspider.storable import NAME_KEY, SIZE_KEY, Tally

NOT_ALNUM = re.compile(r"[^0-9a-z]+")
LATIN_END = "\u0250"  # Latin letters are below it (Basic Latin to Latin Extended-B)
EDIBLE_CATEGORIES = frozenset({"Edible", "Edibles"})
UNIT_PRICE_PLACES = 4  # numeric(16, 4) (migrations/017_unit_prices.sql)
# The plausible unit prices per basis, in dollars (docs/analytics.md, "Unit prices", argues them):
# outside, a price or a size is wrong ($0, a placeholder $99,999, a size misread), not a bargain.
# (Far below what numeric(16, 4) holds: an absurd one would have lost its whole batch.)
PLAUSIBLE = {"g": (0.25, 200.0), "100mg_thc": (1.0, 250.0), "unit": (0.10, 2500.0)}
IMPLAUSIBLE = Tally()  # unit prices left out as implausible by this process


def normalize_name(text: str | None) -> str | None:
    """'Dr. Zodiak's' → 'dr zodiaks'; 'Bud & Bros' and 'Bud and Bros' → 'bud and bros'; 'Cañamo' →
    'canamo'; 'Шишки' → 'шишки'; None when empty. At most NAME_KEY characters (storable.py)."""
    if not text:
        return None
    if not text.isascii():
        return _normalize_unicode(text)
    text = text.lower()
    if "'" in text:
        text = text.replace("'", "")
    if "&" in text:  # the word 'and' stays itself: 'Bud & Bros' is 'bud and bros'
        text = text.replace("&", " and ")
    key = NOT_ALNUM.sub(" ", text).strip()  # (one space for each run: nothing to collapse)
    return (key[:NAME_KEY].rstrip() if len(key) > NAME_KEY else key) or None


def _normalize_unicode(text: str) -> str | None:
    """normalize_name() of a name with non-ASCII characters: compatibility forms folded (NFKC: 'ｂｕｄ'
    is 'bud'), case folded, the accents of Latin letters dropped ('Cañamo' is 'canamo', as menus
    write it both ways); the letters, digits and marks of every other script kept as they are."""
    kept = []
    latin = False
    for ch in unicodedata.normalize("NFKD", text.replace("\u2019", "")):
        if latin and unicodedata.combining(ch):
            continue  # an accent on a Latin letter
        kept.append(ch)
        latin = ch < LATIN_END
    text = unicodedata.normalize("NFKC", "".join(kept)).casefold().replace("'", "").replace("&", " and ")
    # everything but letters, digits and combining marks separates words
    words = "".join(ch if ch.isalnum() or unicodedata.category(ch)[0] == "M" else " " for ch in text).split()
    key = " ".join(words)
    return (key[:NAME_KEY].rstrip() if len(key) > NAME_KEY else key) or None


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
    return sizes_key(sizes) if sizes else ""


def sizes_key(sizes: set[tuple[str, float]]) -> str:
    """size_key() of (unit, value) pairs, at most SIZE_KEY characters (storable.py)."""
    return ",".join(f"{value:g}{unit}" for unit, value in sorted(sizes))[:SIZE_KEY]


def unit_prices(
    options: list[ProductOption], price: float | None, category: str | None, thc: Potency
) -> tuple[float | None, float | None, str | None]:
    """(unit price, unit price on special, basis: 'g' | '100mg_thc' | 'unit'); Nones without a price or
    when the unit price is implausible (PLAUSIBLE), the special alone None when only it is."""
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
    low, high = PLAUSIBLE[basis]
    value = price / per
    if not low <= value <= high:
        IMPLAUSIBLE.count += 1
        return None, None, None
    if special is not None:
        special /= per
        if not low <= special <= high:
            IMPLAUSIBLE.count += 1
            special = None
    return round(value, UNIT_PRICE_PLACES), round(special, UNIT_PRICE_PLACES) if special is not None else None, basis
