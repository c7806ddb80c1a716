"""Raw FilteredProducts product → canonical StoreProduct.

Every quirk of the real payload is handled here (docs/dutchie.md): price arrays aligned with
Options and [] when empty, irregular option strings, {unit, range} potency with range possibly
null, POSMetaData usually null, special true-or-null, effects key casing, createdAt as epoch-ms
string. A product we cannot identify or name raises NormalizationError; anything else degrades to
None.

What leaves this module is storable as is: the writers send each batch of 1,000 products of many
stores as one statement, and a single value PostgreSQL refuses would lose them all. So numbers
beyond their column (money numeric(12, 2), potency numeric(12, 3), counts integer: see
migrations/001 and 002; nested JSON values get the limits of their top-level counterparts, should
anyone cast them), infinities and NaN become None, and every string loses its NUL characters
(neither text nor jsonb takes them) and has lone surrogates (valid JSON escapes, not UTF-8: the
JSON encoder refuses them) replaced by U+FFFD. Each product that lost a value is logged, rate
limited (`DEGRADATIONS`).

Money is a float rounded half-up to the cent, potency a float rounded half-up to 3 places, both on
the decimal text as written (the JSON number 2.675 and the string "2.675" both give 2.68): the API
sends JSON numbers, PostgreSQL stores numeric, and floats go to the writers' JSON encoder (orjson,
in C) with no per-value Python call, where Decimals cost half a microsecond each. This runs once
per product of every crawl (millions a day), so the common shapes take the shortest path: type
checks inline, few calls, labels (category, strain type) cached; only unusual values take the
slower, careful one.
"""

from __future__ import annotations

import html
import logging
import re
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from functools import lru_cache
from math import inf

from cannaspider.dutchie.identity import brand_key_name, product_name_key, size_key, unit_prices
from cannaspider.dutchie.ids import product_id
from cannaspider.items import Potency, ProductOption, RawProduct, StoreProduct

logger = logging.getLogger(__name__)

TAG = re.compile(r"<[^>]*>")
OPTION = re.compile(r"^\s*(?P<num>\d+/\d+|\d+(?:\.\d+)?|\.\d+)\s*(?P<unit>oz|g|gc|mg|ml|pk|ct)?\b", re.I)
SURROGATE = re.compile("[\ud800-\udfff]")
THOUSANDS = re.compile(r"\d{1,3}(?:,\d{3})+(?:\.\d*)?")
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
SCALE = (1.0, 10.0, 100.0, 1000.0)

# The columns' limits (migrations/001_dispensaries_products.sql, 002_product_snapshots.sql)
MONEY_MAX = 9_999_999_999.99  # numeric(12, 2): prices
POTENCY_MAX = 999_999_999.999  # numeric(12, 3): potency, cannabinoids, discounts, option sizes
LARGEST = (0.0, 0.0, MONEY_MAX, POTENCY_MAX)  # by decimal places
LARGEST_DECIMAL = (Decimal(0), Decimal(0), Decimal("9999999999.99"), Decimal("999999999.999"))
INT_MIN, INT_MAX = -(2**31), 2**31 - 1  # integer: quantities
SMALL_COUNTS = frozenset(range(1001))  # effects values: storable without a closer look

# createdAt/updatedAt outside [2000-01-01, a year after this process started] are not real: Dutchie
# started in 2017 and no online menu item is older than 2000, so an epoch that small is a
# placeholder (0, 12) or seconds sent for milliseconds (which read as January 1970), and a date
# years ahead is garbage. Both degrade to None instead of a wrong date.
EARLIEST = datetime(2000, 1, 1, tzinfo=UTC)
LATEST = datetime.now(UTC) + timedelta(days=366)
EARLIEST_MS = int(EARLIEST.timestamp()) * 1000
LATEST_MS = int(LATEST.timestamp()) * 1000


class NormalizationError(ValueError):
    """The product cannot be stored (no usable id or name)."""


# -- values that could not be kept ---------------------------------------------------------------
class DegradationLog:
    """Warns about products that lost values, without flooding the log: at most `burst` lines per
    `interval` seconds; the next line logged says how many products went unlogged meanwhile.
    `products` counts every degraded product of this process."""

    def __init__(self, burst: int = 10, interval: float = 60.0, clock: Callable[[], float] = time.monotonic):
        self.burst, self.interval, self.clock = burst, interval, clock
        self.products = 0
        self.unlogged = 0
        self.window_start = -inf
        self.logged_in_window = 0

    def report(self, pid: str, what: list[str]) -> None:
        self.products += 1
        now = self.clock()
        if now - self.window_start >= self.interval:
            self.window_start, self.logged_in_window = now, 0
        if self.logged_in_window >= self.burst:
            self.unlogged += 1
            return
        self.logged_in_window += 1
        more = f" ({self.unlogged} more degraded products not logged)" if self.unlogged else ""
        self.unlogged = 0
        logger.warning(
            "product %s: values PostgreSQL cannot hold were degraded (stored as NULL or cleaned): %s%s",
            pid,
            ", ".join(what),
            more,
        )


DEGRADATIONS = DegradationLog()
# What the product being normalized lost: the helpers add to it, normalize() reports it with the
# product's id. normalize() runs on the reactor's thread only, one product at a time.
_lost: list[str] = []


def _degrade(what: str, value: object) -> None:
    text = repr(value)  # repr: escapes NUL and surrogates, so the log line itself stays valid
    _lost.append(f"{what}={text if len(text) <= 40 else text[:37] + '...'}")


# -- strings -------------------------------------------------------------------------------------
def _repair(value: str, what: str) -> str:
    """`value` without NUL and with lone surrogates replaced by U+FFFD (for strings that are not
    plain ASCII without NUL: callers check that first, inline)."""
    fixed = value.replace("\x00", "") if "\x00" in value else value
    if not fixed.isascii():
        try:
            fixed.encode("utf-8")
        except UnicodeEncodeError:
            fixed = SURROGATE.sub("\ufffd", fixed)
    if fixed != value:
        _degrade(what, value)
    return fixed


def _text(value: str, what: str) -> str:
    return value if value.isascii() and "\x00" not in value else _repair(value, what)


def clean_text(value: object, what: str = "text") -> str | None:
    """Text without HTML tags and entities, whitespace collapsed, storable; None when empty."""
    if not isinstance(value, str):
        return None
    if not value.isascii() or "\x00" in value:
        value = _repair(value, what)
    if "<" in value or "&" in value:  # (as _clean(), inline: this runs for most products)
        value = html.unescape(TAG.sub(" ", value))
    return " ".join(value.split()) or None


def _clean(value: str) -> str | None:
    """clean_text() of a string already made storable."""
    if "<" in value or "&" in value:
        value = html.unescape(TAG.sub(" ", value))  # entities of NUL or surrogates become U+FFFD
    return " ".join(value.split()) or None


# Strings that repeat across products (labels, option names) are made storable inside a cache:
# free for the usual ones, and a bad one is warned about once per process, with the first product
# that carried it.
@lru_cache(maxsize=4096)
def _label(value: str) -> str | None:
    # category, subcategory: a few dozen distinct strings across every store
    return _clean(value if value.isascii() and "\x00" not in value else _repair(value, "label"))


# -- numbers -------------------------------------------------------------------------------------
def _number(value: object, places: int, what: str, strip: str = "") -> float | None:
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
            return _decimal(Decimal(repr(value)), places, what, value)  # repr: the text as written
        _degrade(what, value)  # inf, NaN, beyond the column
        return None
    if type(value) is int:
        if -LARGEST[places] <= value <= LARGEST[places]:
            return float(value)
        _degrade(what, value)
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
    return _decimal(number, places, what, value)


def _decimal(number: Decimal, places: int, what: str, value: object) -> float | None:
    if not number.is_finite() or number.adjusted() >= 12:  # NaN, Infinity, far beyond any column
        _degrade(what, value)
        return None
    rounded = number.quantize(QUANTUM[places], rounding=ROUND_HALF_UP)
    if abs(rounded) > LARGEST_DECIMAL[places]:
        _degrade(what, value)
        return None
    return float(rounded)


def money(value: object, what: str = "price") -> float | None:
    """A price: None for garbage and negatives, else a float to the cent (half-up, as written)."""
    amount = _number(value, 2, what, "$")
    return None if amount is None or amount < 0 else amount


def _int(value: object, what: str) -> int | None:
    """A count that fits an integer column: 4, 4.0, "4" → 4; garbage → None; beyond → None, warned."""
    if type(value) is int:
        if INT_MIN <= value <= INT_MAX:
            return value
        _degrade(what, value)
        return None
    if value is None or isinstance(value, bool) or not isinstance(value, (float, str)):
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    if INT_MIN <= number < INT_MAX + 1:
        return int(number)
    _degrade(what, value)  # inf, NaN, beyond the column
    return None


def _list(value: object) -> list:
    return value if isinstance(value, list) else []


def _dict(value: object) -> dict:
    return value if isinstance(value, dict) else {}


@lru_cache(maxsize=4096)
def _option(option: str) -> tuple[str, float | None, str | None]:
    """An option's storable name and its size (see above on the cache)."""
    text = option if option.isascii() and "\x00" not in option else _repair(option, "Options")
    return text, *parse_option_size(text)


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
        value *= GRAMS_PER_OZ
    if not value <= LARGEST_DECIMAL[3]:  # no real size; and beyond numeric(12, 3)
        return None, None
    if unit == "oz":
        return float(value.quantize(Decimal("0.01"))), "g"
    if unit in ("g", "gc"):
        return float(value), "g"
    if unit in ("mg", "ml"):
        return float(value), unit
    if unit in ("pk", "ct"):
        return float(value), "each"
    return None, None


@lru_cache(maxsize=4096)
def _size_key_of(option_strings: tuple[str, ...]) -> str:
    """identity.size_key() of the options sent as these strings (a few hundred distinct lists)."""
    sizes = {(unit, value) for value, unit in map(parse_option_size, option_strings) if value is not None and unit}
    return ",".join(f"{value:g}{unit}" for unit, value in sorted(sizes)) if sizes else ""


def _size_key(options_raw: object, options: list[ProductOption]) -> str:
    if type(options_raw) is list:
        try:
            return _size_key_of(tuple(options_raw))
        except TypeError:  # an option that is a list or an object: not hashable
            pass
    return size_key(options)


def _prices(values: object) -> list[float | None]:
    if not values or type(values) is not list:
        return []
    # plain floats already to the cent inline; anything else (ints, strings, garbage) through money()
    # (which names no field: a comprehension using a local of this function would cost a closure)
    return [v if type(v) is float and 0 <= v <= MONEY_MAX and round(v, 2) == v else money(v) for v in values]


def _lowest(prices: list) -> float | None:
    if not prices:
        return None
    if None in prices:
        prices = [p for p in prices if p is not None]
        if not prices:
            return None
    return min(prices)


def potency(content: object, scalar: object, what: str = "THC") -> Potency:
    if type(content) is dict:
        values = content.get("range")
        if values and type(values) is list:  # range is often null: check it before the unit
            raw_unit = content.get("unit")
            unit = (
                (POTENCY_UNITS.get(raw_unit) or POTENCY_UNITS.get(raw_unit.upper())) if type(raw_unit) is str else None
            )
            if unit:
                rng: list = [  # floats, and None for what did not parse (removed below)
                    v
                    if type(v) is float and -POTENCY_MAX <= v <= POTENCY_MAX and round(v, 3) == v
                    else _number(v, 3, "potency")  # (a literal: see _prices)
                    for v in values
                ]
                if None in rng:
                    rng = [v for v in rng if v is not None]
                if rng:
                    return Potency(max(rng), unit, rng)
    if scalar is not None:
        fallback = _number(scalar, 3, what)
        if fallback is not None:
            # the scalar THC/CBD fields are percentages on Dutchie
            return Potency(fallback, "percent", None)
    return Potency(None, None, None)


def timestamp(value: object, what: str = "timestamp") -> datetime | None:
    """Epoch milliseconds (a number or digits) or ISO 8601 (no offset: UTC) → an aware datetime;
    None for garbage and, warned, for dates outside [EARLIEST, LATEST]."""
    ms: int | float
    if type(value) is str:
        text = value.strip()
        if not text.isdigit():
            try:
                moment = datetime.fromisoformat(text)  # Python 3.11+ reads the trailing Z itself
            except ValueError:
                return None
            if moment.tzinfo is None:  # never the database session's zone
                moment = moment.replace(tzinfo=UTC)
            if EARLIEST <= moment <= LATEST:
                return moment
            _degrade(what, value)
            return None
        try:
            ms = int(text)
        except ValueError:  # beyond int()'s digit limit
            _degrade(what, value)
            return None
    elif type(value) is int or type(value) is float:
        ms = value
    else:  # None, bools, lists, objects
        return None
    if EARLIEST_MS <= ms <= LATEST_MS:
        return datetime.fromtimestamp(ms / 1000, UTC)  # tz positional: twice as fast as tz=UTC
    _degrade(what, value)
    return None


def _specials(special_data: object) -> list[dict]:
    data = _dict(special_data)
    out = []
    for kind in ("saleSpecials", "bogoSpecials"):
        for sp in _list(data.get(kind)):
            sp = _dict(sp)
            if not sp:
                continue
            rewards = [
                _int(_dict(_dict(r).get("totalQuantity")).get("quantity"), "bogoRewards.quantity")
                for r in _list(sp.get("bogoRewards"))
            ]
            percent = sp.get("percentDiscount")
            out.append(
                {
                    "name": clean_text(sp.get("specialName"), "specialName"),
                    "type": _text(kind_name, "specialType")
                    if type(kind_name := sp.get("specialType")) is str and kind_name
                    else ("bogo" if kind == "bogoSpecials" else "sale"),
                    "discount": _number(sp.get("discount"), 3, "discount"),
                    "percent_discount": percent if type(percent) is bool else None,
                    "bundle_price": money(_dict(sp.get("itemsForAPrice")).get("value"), "itemsForAPrice"),
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
    if type(value) is not dict:
        return {}
    effects = {str(k).lower(): v for k, v in value.items()}
    try:
        usual = SMALL_COUNTS.issuperset(effects.values())  # values checked at once: small counts, as a rule
    except TypeError:  # a list or an object
        usual = False
    if not usual:
        effects = {k: _effect(v) for k, v in effects.items()}
    keys = "".join(effects)  # and the keys
    if not keys.isascii() or "\x00" in keys:
        effects = {_text(k, "effects"): v for k, v in effects.items()}
    return effects


def _effect(value: object) -> object:
    """An effect's value (a small count on Dutchie), storable; containers are not expected: None."""
    if value is None or type(value) is bool:
        return value
    if type(value) is int and INT_MIN <= value <= INT_MAX:
        return value
    if type(value) is str:
        return _text(value, "effects")
    if type(value) is float:
        if -POTENCY_MAX <= value <= POTENCY_MAX:
            return value
        _degrade("effects", value)
    elif type(value) is int:
        _degrade("effects", value)
    return None


@lru_cache(maxsize=1024)
def _strain_of(text: str) -> str | None:
    cleaned = _clean(text if text.isascii() and "\x00" not in text else _repair(text, "strainType"))
    if not cleaned or cleaned.upper() == "N/A":
        return None
    return STRAIN_TYPES.get(cleaned.lower(), cleaned)


def _options(
    raw: dict,
    options_raw: list,
    rec: list[float | None],
    med: list[float | None],
    rec_sp: list[float | None],
    med_sp: list[float | None],
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
        text, size, unit = _option(opt)
        st = stock.get(opt) if stock else None  # POSMetaData names the option as the payload does
        if st:
            quantity = _int(st.get("quantity"), "quantity")
            available = _int(st.get("quantityAvailable"), "quantityAvailable")
            kiosk = _int(st.get("kioskQuantityAvailable"), "kioskQuantityAvailable")
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
            )
        )
    if total is not None and total > INT_MAX:  # each option's count fits, their sum does not
        _degrade("quantity_available", total)
        total = None
    return options, total


# -- image and logo URLs --------------------------------------------------------------------------
# Only http(s) URLs are fetched (through the store's proxy: docs/images.md). Any other scheme in a
# payload (file:, ftp:, s3:, data:, …) would have Scrapy read a local file and publish it, dial
# around the proxy, or sign an S3 request with the node's AWS keys: it is dropped here, counted
# (REFUSED_URLS; the normalize pipeline makes it the stat cannaspider/image_urls_refused) and never
# logged with anything but the count.
HTTP_SCHEMES = ("https://", "http://")


class RefusedUrls:
    """Image and logo URLs dropped for their scheme by this process: a running total."""

    def __init__(self) -> None:
        self.count = 0


REFUSED_URLS = RefusedUrls()


def _fetchable(url: str) -> bool:
    if url.startswith(HTTP_SCHEMES) or url[:8].lower().startswith(HTTP_SCHEMES):
        return True
    REFUSED_URLS.count += 1
    return False


def _images(raw: dict) -> list[str]:
    images = []
    first = raw.get("Image")
    if type(first) is str and first:
        first = first if first.isascii() and "\x00" not in first else _repair(first, "Image")
        if _fetchable(first):
            images.append(first)
    for image in _list(raw.get("images")):
        url = image.get("url") if type(image) is dict else None
        if type(url) is str and url:
            if not url.isascii() or "\x00" in url:
                url = _repair(url, "images")
            if url not in images and _fetchable(url):
                images.append(url)
    return images


def _cannabinoids(values: list) -> list[dict]:
    out = []
    for c in values:
        c = _dict(c)
        name = clean_text(_dict(c.get("cannabinoid")).get("name"), "cannabinoid")
        if name:
            out.append(
                {
                    "name": name,
                    "value": _number(c.get("value"), 3, "cannabinoid"),
                    "unit": POTENCY_UNITS.get(str(c.get("unit") or "").upper()),
                }
            )
    return out


def _brand_field(value: object, brand: object, key: str, what: str) -> str | None:
    """brandName/brandId when not plain text: made storable; else the brand object's own; else None."""
    for candidate in (value, brand.get(key) if type(brand) is dict else None):
        if type(candidate) is str and candidate:
            return _text(candidate, what)
        if type(candidate) is int and key == "id":
            return str(candidate)
    return None


def _logo(brand: object) -> str | None:
    """brand.imageUrl when it is an http(s) URL (stored once per brand: pipelines/images.py)."""
    url = brand.get("imageUrl") if type(brand) is dict else None
    return url if type(url) is str and url and url.isascii() and _fetchable(url) else None


def normalize(item: RawProduct) -> StoreProduct:
    raw = item.raw
    if not isinstance(raw, dict):
        raise NormalizationError(f"product is a {type(raw).__name__}, not an object")
    if _lost:  # left by a product whose normalization raised
        _lost.clear()
    get = raw.get
    pid = product_id(raw)
    if pid is None:  # the spider counts it the same way (ids.py): the crawl is incomplete
        raise NormalizationError("product has no usable _id/id (missing, blank, or with a NUL or lone surrogate)")
    name_raw = get("Name")
    if type(name_raw) is not str:
        raise NormalizationError(f"product {pid} has no usable Name ({name_raw!r})")
    if not name_raw.isascii() or "\x00" in name_raw:
        name_raw = _repair(name_raw, "Name")
    name = _clean(name_raw)
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
    brand_name = get("brandName")
    if type(brand_name) is not str or not brand_name.isascii() or "\x00" in brand_name:
        brand_name = _brand_field(brand_name, get("brand"), "name", "brandName")
    brand_id = get("brandId")
    if type(brand_id) is not str or not brand_id or not brand_id.isascii() or "\x00" in brand_id:
        brand_id = _brand_field(brand_id, get("brand"), "id", "brandId")
    category, subcategory, strain = get("type"), get("subcategory"), get("strainType")
    cannabinoids = get("cannabinoidsV2")
    images = _images(raw)
    category = _label(category) if type(category) is str else None
    price_rec = _lowest(rec)
    thc = potency(get("THCContent"), get("THC"), "THC")
    brand_norm = brand_key_name(brand_name)
    enterprise_id = get("enterpriseProductId")
    if type(enterprise_id) is not str or not enterprise_id.strip():
        enterprise_id = None
    else:
        enterprise_id = _text(enterprise_id.strip(), "enterpriseProductId")
    unit_price, unit_price_special, unit_basis = unit_prices(options, price_rec, category, thc)
    product = StoreProduct(
        # positional, in field order (keywords cost a dict and a parse per product)
        item.dispensary_id,  # dispensary_id
        item.crawl_run_id,  # crawl_run_id
        pid,  # provider_product_id
        name_raw,  # name_raw
        name,  # name
        brand_name,  # brand_name_raw
        brand_id,  # brand_id
        category,  # category
        _label(subcategory) if type(subcategory) is str else None,  # subcategory
        _strain_of(strain) if type(strain) is str else None,  # strain_type
        price_rec,  # price_rec
        _lowest(med),  # price_med
        rec_special,  # price_rec_special
        _lowest(med_sp),  # price_med_special
        bool(get("special")) or bool(specials) or rec_special is not None,  # is_on_special
        options,  # options
        thc,  # thc
        potency(get("CBDContent"), get("CBD"), "CBD"),  # cbd
        _cannabinoids(cannabinoids) if cannabinoids and type(cannabinoids) is list else [],  # cannabinoids
        specials,  # specials
        _effects(raw),  # effects
        images[0] if images else None,  # image_url
        images,  # images
        quantity_available,  # quantity_available
        timestamp(get("createdAt"), "createdAt"),  # provider_created_at
        timestamp(get("updatedAt"), "updatedAt"),  # provider_updated_at
        "dutchie",  # provider
        _logo(get("brand")),  # brand_logo_url
        enterprise_id,  # enterprise_product_id
        brand_norm,  # brand_name_key
        product_name_key(name, brand_norm),  # name_key
        _size_key(options_raw, options),  # size_key
        unit_price,  # unit_price
        unit_price_special,  # unit_price_special
        unit_basis,  # unit_price_basis
    )
    if _lost:
        DEGRADATIONS.report(pid, _lost.copy())
        _lost.clear()
    return product
