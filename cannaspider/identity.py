"""What makes two store products the same product, and what a product costs per unit.

Both run in the normalizer, once per product of every crawl, so they stay plain Python with the
common shapes on the shortest path. The rules (docs/analytics.md, "One brand, one product"):

- A brand is named by its platform's brand id when the product has one (Dutchie's `brandId`,
  Jane's `product_brand_id`: each platform's own, never compared with the other's), else by its
  brand key (`brand_key_name`: the normalized name, `normalize_name`: case, Latin accents,
  punctuation and "&"/"and" do not matter, the letters of every script are kept, so a Cyrillic or
  CJK name has a key too; and a company's legal suffix, "Co." / "Company" / "Inc." / "LLC", is
  dropped). Which brands are one canonical brand is decided in the database
  (migrations/016_canonical_brands_products.sql): an operator's alias, else the first brand seen,
  on any platform, with the same brand key. So a brand sold through Dutchie and through Jane is one.
- A product is named by Dutchie's `enterpriseProductId` when present (a chain's catalog id, shared
  by its stores), else by its canonical brand, category, normalized name (without the brand's
  name in front, nor a size behind that is one of its options': `product_name_key`) and weighed
  sizes in grams (`size_key`: Jane's "eighth ounce" and Dutchie's "1/8oz" are both 3.5 g; a count
  or a content, "each", "10pk", "100mg", is left out, as the platforms write those differently).
  None of it names the platform: the same product through Jane and through Dutchie is one.
- Unit prices (`unit_prices`): per gram for weighed options, per 100 mg THC for edibles with a
  potency in mg, per unit otherwise, taken on the option whose price is the product's price
  (`price_rec`, the lowest option's price), and its special price on the same option. A unit price
  outside its basis's plausible range (`PLAUSIBLE`, docs/analytics.md, "Unit prices") is no figure
  to compare: it is left out (None) and counted in the crawl's `Losses.implausible` (the normalize
  pipeline's stat `cannaspider/unit_prices_implausible`); the listing's own price is kept as sent.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

from cannaspider.items import Potency, ProductOption
from cannaspider.storable import NAME_KEY, SIZE_KEY, Losses

NOT_ALNUM = re.compile(r"[^0-9a-z]+")
LATIN_END = "\u0250"  # Latin letters are below it (Basic Latin to Latin Extended-B)
EDIBLE_CATEGORIES = frozenset({"Edible", "Edibles"})
# the categories sold by weight, whose gram sizes are priced per gram (Jane's kinds map onto these,
# platforms/jane/normalizer.py); a size in grams of any other (a 1 g tincture, a 2 oz balm) is per unit
WEIGHED_CATEGORIES = frozenset({"Flower", "Pre-Rolls", "Vaporizers", "Concentrate", "Concentrates"})
UNIT_PRICE_PLACES = 4  # numeric(16, 4) (migrations/017_unit_prices.sql)
# The plausible unit prices per basis, in dollars (docs/analytics.md, "Unit prices", argues them):
# outside, a price or a size is wrong ($0, a placeholder $99,999, a size misread), not a bargain.
# (Far below what numeric(16, 4) holds: an absurd one would have lost its whole batch.)
PLAUSIBLE = {"g": (0.25, 200.0), "100mg_thc": (1.0, 250.0), "unit": (0.10, 2500.0)}
# a company's legal suffix at a brand's end (brand_key_name), and after its name in a product's
CORPORATE = r"(?:co|company|inc|incorporated|llc|ltd|corp|corporation)"
CORPORATE_SUFFIX = re.compile(rf"(?: {CORPORATE})+$")
CORPORATE_PREFIX = re.compile(rf"^(?:{CORPORATE} )+")
# a size at a normalized name's end (product_name_key): '3 5g', '3 5 grams', '1 8 oz', 'eighth'
OUNCE_GRAMS = 28.0  # the trade's ounce, as the platforms size it (an eighth is 3.5 g)
WORD_GRAMS = {"eighth": 3.5, "quarter": 7.0, "half": 14.0, "ounce": 28.0}
LEADING_POINT = re.compile(r"(^|[^0-9])\.(?=[0-9])")
SIZE_SUFFIX = re.compile(
    r" (?:(\d{1,4})(?: (\d{1,3}))? ?(g|gr|gram|grams|oz|ounce|ounces)"
    r"|(eighth|quarter|half|ounce)(?: (oz|ounce|g|gram))?)$"
)


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
    """A brand's key: its normalized name less a company's legal suffix ('Mohave Cannabis Co.' and
    'Mohave Cannabis Company' → 'mohave cannabis'), as menus write it with one, another or none; a
    name that is only the suffix keeps it. A few hundred distinct names across every store: cached."""
    key = normalize_name(brand_name)
    if key and " " in key:
        folded = CORPORATE_SUFFIX.sub("", key)
        if folded:
            return folded
    return key


@lru_cache(maxsize=8192)
def product_name_key(name: str, brand_norm: str | None, grams: tuple[float, ...] = ()) -> str | None:
    """The product's normalized name, the brand's name in front of it removed ('Stiiizy - Blue
    Dream Pod' of Stiiizy → 'blue dream pod'; 'Kiva Co. Camino' of Kiva → 'camino') and a size
    behind it that is one of the product's own (`grams`: 'Blue Dream 3.5g', 'Blue Dream (1/8 oz)'
    and 'Blue Dream - Eighth' of a 3.5 g product → 'blue dream'), as menus write it with or without
    either: the sizes are in the product's key already. A size that is none of its options' stays
    (it tells products apart). Cached: a chain's stores carry the same products, and a crawl takes
    a chain's stores together."""
    if "." in name:  # '.5g' is '0.5g' (else the point, made a space, would leave '5g')
        name = LEADING_POINT.sub(r"\g<1>0.", name)
    key = normalize_name(name)
    if key and brand_norm and key.startswith(brand_norm) and len(key) > len(brand_norm):
        if key[len(brand_norm)] == " ":
            rest = key[len(brand_norm) + 1 :]
            key = CORPORATE_PREFIX.sub("", rest) or rest
    if key and grams and (found := SIZE_SUFFIX.search(key)) is not None and found.start() > 0:
        size = _grams_of(found)
        if size is not None and any(abs(size - g) < 0.05 for g in grams):
            key = key[: found.start()]
    return key


def _grams_of(found: re.Match[str]) -> float | None:
    """The grams a SIZE_SUFFIX match names: '3 5g' (3.5 g, the point made a space), '1 8 oz' (1/8
    oz, the slash made a space), 'eighth' (of an ounce), 'half gram'."""
    whole, part, unit, word, word_unit = found.groups()
    if word is not None:
        if word_unit in ("g", "gram"):
            return 0.5 if word == "half" else None
        return WORD_GRAMS[word]
    value = float(whole)
    if unit in ("oz", "ounce", "ounces"):
        if part is not None:
            value = value / float(part) if float(part) else 0.0
        return value * OUNCE_GRAMS
    return float(f"{whole}.{part}") if part is not None else value


def size_key(options: list[ProductOption]) -> str:
    """The product's weighed sizes, smallest first: '1g,3.5g,7g'; '' when none is in grams."""
    sizes = {(o.size_unit, o.size_value) for o in options if o.size_value is not None and o.size_unit == "g"}
    return sizes_key(sizes) if sizes else ""


def sizes_key(sizes: set[tuple[str, float]]) -> str:
    """size_key() of (unit, value) pairs, its grams only, at most SIZE_KEY characters (storable.py).
    A count or a content ('10each', '100mg') is no size to match on: Jane sells an edible 'each'
    where Dutchie writes its milligrams, so it would tell the same product apart by platform."""
    return ",".join(f"{value:g}{unit}" for unit, value in sorted(sizes) if unit == "g")[:SIZE_KEY]


def option_grams(options: list[ProductOption]) -> tuple[float, ...]:
    """The options' sizes in grams, for product_name_key (a hashable tuple: it is cached)."""
    return tuple(sorted({o.size_value for o in options if o.size_unit == "g" and o.size_value is not None}))


def option_unit(option: ProductOption | None, category: str | None, thc: Potency) -> tuple[float, str]:
    """(what one unit of `option` holds, basis): per 100 mg THC for an edible with a THC potency in
    mg (the product's: menus give it once per product), per gram for a weighed option of a weighed
    category (WEIGHED_CATEGORIES: a topical's 2 oz or a tincture's 1 g is no price per gram to
    compare with flower's; a product without a category keeps its grams), per piece of a pack
    ('10pk'), else per unit ('N/A', 'each', ml)."""
    if category in EDIBLE_CATEGORIES and thc.unit == "mg" and thc.value:
        return thc.value / 100.0, "100mg_thc"
    if option is not None and option.size_value:
        if option.size_unit == "g" and (category is None or category in WEIGHED_CATEGORIES):
            return option.size_value, "g"
        if option.size_unit == "each":
            return option.size_value, "unit"
    return 1.0, "unit"


def _plausible(price: float | None, per: float, basis: str, losses: Losses) -> float | None:
    """price / per rounded, None (counted in `losses.implausible`) when outside the basis's PLAUSIBLE
    range."""
    if price is None:
        return None
    low, high = PLAUSIBLE[basis]
    value = price / per
    if not low <= value <= high:
        losses.implausible += 1
        return None
    return round(value, UNIT_PRICE_PLACES)


def unit_prices(
    options: list[ProductOption], price: float | None, category: str | None, thc: Potency, losses: Losses
) -> tuple[float | None, float | None, str | None]:
    """(unit price, unit price on special, basis: 'g' | '100mg_thc' | 'unit') of the option priced
    `price` (the product's: its lowest option's); Nones without a price or when the unit price is
    implausible (PLAUSIBLE), the special alone None when only it is. Each option gets its own
    (`unit_price`, `unit_price_special`, `unit_price_basis`: each size its own SKU), by the same
    rule; an implausible one is left out there too, and counted once per product in
    `losses.implausible`."""
    chosen = None
    for candidate in options:
        per, basis = option_unit(candidate, category, thc)
        counted = losses.implausible
        candidate.unit_price = _plausible(candidate.price_rec, per, basis, losses)
        candidate.unit_price_special = (
            _plausible(candidate.price_rec_special, per, basis, losses) if candidate.unit_price is not None else None
        )
        candidate.unit_price_basis = basis if candidate.unit_price is not None else None
        if chosen is None and price is not None and candidate.price_rec == price:
            chosen = candidate
        else:
            losses.implausible = counted  # the product's own figure is counted below, once
    if price is None:
        return None, None, None
    if chosen is None:  # no option carries the price: per unit of the product, as sent
        per, basis = option_unit(None, category, thc)
        value = _plausible(price, per, basis, losses)
        return value, None, basis if value is not None else None
    if chosen.unit_price is None:
        return None, None, None
    return chosen.unit_price, chosen.unit_price_special, chosen.unit_price_basis
