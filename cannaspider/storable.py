"""Values PostgreSQL stores as they are: the column-safe rules, independent of any payload.

The writers send each batch of 1,000 products of many stores as one statement, and a single value
PostgreSQL refuses would lose them all, so what a normalizer hands on must be storable: strings
(no NUL, no lone surrogate, display text cleaned), numbers within their columns, timestamps in a
sane window, fetchable URLs, texts within the length limits their index keys need. What a product
lost to these rules is logged, rate limited, and counted.
"""

from __future__ import annotations

import html
import logging
import re
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from math import inf
from typing import Any

logger = logging.getLogger(__name__)


# -- values lost, reported rate limited -------------------------------------------------------------
# Values that could not be kept (or were cut to their limit: the text limits below): counted per product, warned
# about without flooding the log.
#
# No module-level state: the component that normalizes products (the normalize pipeline, one per
# crawler) holds a `Losses` and passes it to the normalizer, which passes it to every helper here
# that may lose a value. The helpers add what the product being normalized lost (`degrade`); the
# normalizer reports it with the product's id once the product is done (`report`); the pipeline
# turns the running counts (URLs refused, texts cut) into stats. A normalizer runs on the
# reactor's thread only, one product at a time.


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
            "product %s: values PostgreSQL cannot hold were degraded (stored as NULL, cleaned or cut short): %s%s",
            pid,
            ", ".join(what),
            more,
        )


class Losses:
    """What normalizing products loses, held by the component that normalizes them: what the
    product being normalized lost so far (`lost`), reported rate limited once it is done, and the
    running counts of texts cut to their limit, of image and logo URLs refused for their scheme and
    of unit prices left out as implausible: one crawl's facts, passed explicitly (never a global).
    Its identity keys the normalizers' caches (a string repaired in one is reported once per Losses)."""

    def __init__(self, log: DegradationLog | None = None) -> None:
        self.log = log if log is not None else DegradationLog()
        self.lost: list[str] = []
        self.truncated = 0  # texts cut to their limit (the stat cannaspider/text_truncated)
        self.refused_urls = 0  # image and logo URLs dropped for their scheme (cannaspider/image_urls_refused)
        self.implausible = 0  # unit prices left out (identity.py, PLAUSIBLE: cannaspider/unit_prices_implausible)

    def degrade(self, what: str, value: object) -> None:
        text = repr(value)  # repr: escapes NUL and surrogates, so the log line itself stays valid
        self.lost.append(f"{what}={text if len(text) <= 40 else text[:37] + '...'}")

    def report(self, pid: str) -> None:
        """The product is done: warn about what it lost (rate limited), and start afresh."""
        if self.lost:
            self.log.report(pid, self.lost.copy())
            self.lost.clear()


# -- text limits (docs/architecture.md, "Text limits") ----------------------------------------------
# The length limits of the text a product carries (docs/architecture.md, "Text limits").
#
# PostgreSQL's text columns take a gigabyte, but a btree index entry at most ~2,700 bytes: a name
# sent 10 kB long made its brand's or canonical product's key (unique indexes of
# migrations/016_canonical_brands_products.sql) too long to index, and the database refused the row
# on every crawl. So each text is bounded here, at normalization, to a length whose keys always fit
# (in characters; a character is at most 4 bytes in UTF-8): the row is stored with the text cut
# short, the product's loss is logged rate limited (the values lost, above) and counted
# (`Losses.truncated`, the normalize pipeline's stat `cannaspider/text_truncated`).
#
# Worst case of a canonical product's key, 'b<brand id>|<category>|<name key>|<size key>':
# 21 + 4×LABEL + 4×NAME_KEY + SIZE_KEY + 3 = 21 + 400 + 1,600 + 200 + 3 = 2,224 bytes; of a brand's,
# 'n:' + 4×NAME_KEY = 1,602 bytes ('d:' + an id: 2 + 4×ID = 402).

NAME = 500  # a product's name as sent and cleaned (real ones: under 150)
NAME_KEY = 400  # a normalized name (a brand's, a product's): NFKC can lengthen a name
BRAND_NAME = 200
LABEL = 100  # category, subcategory, strain type, status, an option's name
ID = 100  # brandId, enterpriseProductId (a UUID: 36)
SIZE_KEY = 200  # ASCII: '1g,3.5g,7g'
DESCRIPTION = 5000  # a brand's description (not indexed: bounded so one brand cannot bloat every row)


def bounded(losses: Losses, value: str, limit: int, what: str) -> str:
    """`value`, cut to `limit` characters when longer (recorded as degraded and counted)."""
    if len(value) <= limit:
        return value
    losses.truncated += 1
    losses.degrade(what, value)
    return value[:limit]


# -- numbers ----------------------------------------------------------------------------------------
# Numbers their columns hold (migrations/001 and 002): money numeric(12, 2), potency numeric(12, 3),
# counts integer; nested JSON values get the limits of their top-level counterparts, should anyone
# cast them. Infinities, NaN and values beyond the column become None, recorded
# (the values lost, above); garbage (bools, text that is no number) becomes None silently.
#
# Money is a float rounded half-up to the cent, potency a float rounded half-up to 3 places, both on
# the decimal text as written (the JSON number 2.675 and the string "2.675" both give 2.68): the API
# sends JSON numbers, PostgreSQL stores numeric, and floats go to the writers' JSON encoder (orjson,
# in C) with no per-value Python call, where Decimals cost half a microsecond each. The common
# shapes (a float already in range and to its places) take the shortest path.

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


def number(losses: Losses, value: object, places: int, what: str, strip: str = "") -> float | None:
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
            return decimal(losses, Decimal(repr(value)), places, what, value)  # repr: the text as written
        losses.degrade(what, value)  # inf, NaN, beyond the column
        return None
    if type(value) is int:
        if -LARGEST[places] <= value <= LARGEST[places]:
            return float(value)
        losses.degrade(what, value)
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
    return decimal(losses, number, places, what, value)


def decimal(losses: Losses, number: Decimal, places: int, what: str, value: object) -> float | None:
    if not number.is_finite() or number.adjusted() >= 12:  # NaN, Infinity, far beyond any column
        losses.degrade(what, value)
        return None
    rounded = number.quantize(QUANTUM[places], rounding=ROUND_HALF_UP)
    if abs(rounded) > LARGEST_DECIMAL[places]:
        losses.degrade(what, value)
        return None
    return float(rounded)


def money(losses: Losses, value: object, what: str = "price") -> float | None:
    """A price: None for garbage and negatives, else a float to the cent (half-up, as written)."""
    amount = number(losses, value, 2, what, "$")
    return None if amount is None or amount < 0 else amount


def integer(losses: Losses, value: object, what: str) -> int | None:
    """A count that fits an integer column: 4, 4.0, "4" → 4; garbage → None; beyond → None, warned."""
    if type(value) is int:
        if INT_MIN <= value <= INT_MAX:
            return value
        losses.degrade(what, value)
        return None
    if value is None or isinstance(value, bool) or not isinstance(value, (float, str)):
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    if INT_MIN <= number < INT_MAX + 1:
        return int(number)
    losses.degrade(what, value)  # inf, NaN, beyond the column
    return None


# -- strings ----------------------------------------------------------------------------------------
# Strings PostgreSQL takes: no NUL (neither text nor jsonb takes one), no lone surrogate (a valid
# JSON escape, not UTF-8: the JSON encoder refuses it; replaced by U+FFFD), and for display text no
# HTML tags or entities and collapsed whitespace. A repaired string is recorded (the values lost, above).
#
# The usual string is plain ASCII without NUL: callers check that inline and call `repair` only for
# the others (this runs for every string of every product).

TAG = re.compile(r"<[^>]*>")
SURROGATE = re.compile("[\ud800-\udfff]")


def repair(losses: Losses, value: str, what: str) -> str:
    """`value` without NUL and with lone surrogates replaced by U+FFFD (for strings that are not
    plain ASCII without NUL: callers check that first, inline)."""
    fixed = value.replace("\x00", "") if "\x00" in value else value
    if not fixed.isascii():
        try:
            fixed.encode("utf-8")
        except UnicodeEncodeError:
            fixed = SURROGATE.sub("\ufffd", fixed)
    if fixed != value:
        losses.degrade(what, value)
    return fixed


def storable(losses: Losses, value: str, what: str) -> str:
    return value if value.isascii() and "\x00" not in value else repair(losses, value, what)


def clean_text(losses: Losses, value: object, what: str = "text") -> str | None:
    """Text without HTML tags and entities, whitespace collapsed, storable; None when empty."""
    if not isinstance(value, str):
        return None
    if not value.isascii() or "\x00" in value:
        value = repair(losses, value, what)
    if "<" in value or "&" in value:  # (as clean(), inline: this runs for most products)
        value = html.unescape(TAG.sub(" ", value))
    return " ".join(value.split()) or None


def clean(value: str) -> str | None:
    """clean_text() of a string already made storable."""
    if "<" in value or "&" in value:
        value = html.unescape(TAG.sub(" ", value))  # entities of NUL or surrogates become U+FFFD
    return " ".join(value.split()) or None


# -- timestamps -------------------------------------------------------------------------------------
# Timestamps of a payload (epoch milliseconds or ISO 8601) as aware datetimes, within a sane window.

# createdAt/updatedAt outside [2000-01-01, a year after this process started] are not real: Dutchie
# started in 2017 and no online menu item is older than 2000, so an epoch that small is a
# placeholder (0, 12) or seconds sent for milliseconds (which read as January 1970), and a date
# years ahead is garbage. Both degrade to None instead of a wrong date.
EARLIEST = datetime(2000, 1, 1, tzinfo=UTC)
LATEST = datetime.now(UTC) + timedelta(days=366)
EARLIEST_MS = int(EARLIEST.timestamp()) * 1000
LATEST_MS = int(LATEST.timestamp()) * 1000


def timestamp(losses: Losses, value: object, what: str = "timestamp") -> datetime | None:
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
            losses.degrade(what, value)
            return None
        try:
            ms = int(text)
        except ValueError:  # beyond int()'s digit limit
            losses.degrade(what, value)
            return None
    elif type(value) is int or type(value) is float:
        ms = value
    else:  # None, bools, lists, objects
        return None
    if EARLIEST_MS <= ms <= LATEST_MS:
        return datetime.fromtimestamp(ms / 1000, UTC)  # tz positional: twice as fast as tz=UTC
    losses.degrade(what, value)
    return None


# -- fetchable URLs ---------------------------------------------------------------------------------
# Image and logo URLs we may fetch: http(s) only (docs/images.md).

# Only http(s) URLs are fetched (through the store's proxy: docs/images.md). Any other scheme in a
# payload (file:, ftp:, s3:, data:, …) would have Scrapy read a local file and publish it, dial
# around the proxy, or sign an S3 request with the node's AWS keys: it is dropped here, counted
# (`Losses.refused_urls`; the normalize pipeline makes it the stat cannaspider/image_urls_refused) and never
# logged with anything but the count.

HTTP_SCHEMES = ("https://", "http://")


def fetchable(losses: Losses, url: str) -> bool:
    if url.startswith(HTTP_SCHEMES) or url[:8].lower().startswith(HTTP_SCHEMES):
        return True
    losses.refused_urls += 1
    return False


# -- a payload's containers -------------------------------------------------------------------------
# A payload's containers as what they should be: anything else reads as empty.


def as_list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def as_dict(value: object) -> dict[Any, Any]:
    return value if isinstance(value, dict) else {}
