"""The sandbox's month: how its menus move from day to day over the 30 days `scrapy demo` crawls.

The catalog (catalog.py) evolves by epoch; the month's days are the epochs DAY_EPOCH + 1 …
DAY_EPOCH + DAYS, far above the handful of epochs the tests step through, so that those keep their
own rules (Catalog.present) and the month is another story on the same catalog. POST
/_sandbox/day {"day": d} (control.py) puts both platforms' menus on day d. Everything below is a
function of (seed, store, product, day) through hashes, like the rest of the catalog: two runs of
the demo serve the same menus, and a test can ask this module what the sandbox served.

What moves, as real menus do (the figures are the demo's, docs/analytics.md describes the events):

- **prices**: a quarter of the products are repriced now and then (about one day in ten, to a level
  between -30 % and +20 % of their list price, then back); and on PRICE_WAR_DAY half of the stores
  cut their flower and pre-rolls by 15 % for the rest of the month (the market's price-per-gram
  chart steps down; the day's movers are those cuts);
- **specials** run in five-day windows (a sixth of the products at any time, each window its own
  discount), so they start and end;
- **products sell out and return**: in each ten-day block one product in twelve leaves the menu
  for one to five days (one or two: it was only missed; three or more: out of stock, then back in
  stock), and some products are new in the middle of the month;
- **a brand spreads** (SPREADING_BRAND): at the start a quarter of the stores carry it, and each
  other store takes it on some day of the month; **another retreats** (RETREATING_BRAND), dropped
  by most stores some day (its products sell out for good there);
- **one store collapses and recovers**: the Dutchie store COLLAPSING_STORE of each state serves an
  eighth of its menu on COLLAPSE_DAYS, complete answers that look like a sell-out of the rest, and
  its whole menu the day after. The crawl's OOS guard (docs/architecture.md, "Crawl correctness")
  must mark none of it out of stock: no other product of that store leaves its menu around those
  days, so any out-of-stock event there would be the collapse's.
"""

from __future__ import annotations

from collections.abc import Callable

DAYS = 30  # the demo's month: day 1 is the first product crawl, day DAYS today
DAY_EPOCH = 1000  # day d is the catalog's epoch DAY_EPOCH + d

COLLAPSING_STORE = 1  # the index (in its state) of the Dutchie store that collapses
COLLAPSE_DAYS = (17, 18)  # two suspect crawls: the third day's complete menu ends the streak
COLLAPSE_KEEPS = 8  # it serves one product in eight on those days
QUIET_AROUND_COLLAPSE = 3  # days before and after the collapse when nothing else leaves that store

SPREADING_BRAND = "Sip Elixirs"
RETREATING_BRAND = "High Tide"
PRICE_WAR_DAY = 18
PRICE_WAR_CATEGORIES = ("Flower", "Pre-Rolls")
PRICE_WAR_CUT = 0.85
REPRICE_LEVELS = (0.7, 0.9, 0.95, 1.0, 1.05, 1.1, 1.2)
SPECIAL_WINDOW = 5  # days a special runs
SPECIAL_DISCOUNTS = (10, 15, 20, 25, 30)  # percent

Hash = Callable[..., int]


def epoch_of(day: int) -> int:
    return DAY_EPOCH + day


def day_of(epoch: int) -> int | None:
    """The month's day an epoch is, or None for the tests' epochs."""
    return epoch - DAY_EPOCH if epoch > DAY_EPOCH else None


def adoption_day(h: Hash, seed: int, store_key: str) -> int:
    """The day a store starts to carry SPREADING_BRAND: day 1 for a quarter of the stores."""
    draw = h(seed, "spread", store_key) % 100
    return 1 if draw < 25 else 4 + draw % (DAYS - 6)


def retreat_day(h: Hash, seed: int, store_key: str, collapsing: bool) -> int | None:
    """The day a store drops RETREATING_BRAND (None: it keeps it); never the collapsing store."""
    draw = h(seed, "retreat", store_key) % 100
    return None if collapsing or draw < 25 else 5 + draw % (DAYS - 10)


def sold_out(h: Hash, seed: int, store_key: str, index: int, day: int, collapsing: bool) -> bool:
    """Whether the product has left the menu on `day`: in each ten-day block one product in twelve
    is away for one to five days (never around the collapse, at the collapsing store)."""
    block = (day - 1) // 10
    if h(seed, store_key, index, "soldout", block) % 12:
        return False
    start = 10 * block + 2 + h(seed, store_key, index, "soldout-start", block) % 7
    end = start + h(seed, store_key, index, "soldout-length", block) % 5  # last day away
    if collapsing and start <= COLLAPSE_DAYS[-1] + QUIET_AROUND_COLLAPSE and end >= COLLAPSE_DAYS[0] - 3:
        return False
    return start <= day <= end


def present(h: Hash, seed: int, store_key: str, index: int, day: int, brand: str, collapsing: bool) -> bool:
    """Whether product `index` of the store is on its menu on `day`."""
    if collapsing and day in COLLAPSE_DAYS and index % COLLAPSE_KEEPS:
        return False
    if brand == SPREADING_BRAND and day < adoption_day(h, seed, store_key):
        return False
    if brand == RETREATING_BRAND:
        gone = retreat_day(h, seed, store_key, collapsing)
        if gone is not None and day >= gone:
            return False
    if index % 41 == 7 and day < 3 + h(seed, store_key, index, "new") % (DAYS - 5):
        return False  # new on its menu some day of the month
    return not sold_out(h, seed, store_key, index, day, collapsing)


def price_factor(h: Hash, seed: int, store_key: str, index: int, day: int, category: str, volatile: bool) -> float:
    """The product's price on `day` as a share of its list price."""
    factor = 1.0
    if volatile:
        for d in range(2, day + 1):  # the level of its latest repricing
            if h(seed, store_key, index, "reprice", d) % 10 == 0:
                factor = REPRICE_LEVELS[h(seed, store_key, index, "level", d) % len(REPRICE_LEVELS)]
    if category in PRICE_WAR_CATEGORIES and day >= PRICE_WAR_DAY and h(seed, store_key, "price-war") % 2 == 0:
        factor *= PRICE_WAR_CUT
    return factor


def special_discount(h: Hash, seed: int, store_key: str, index: int, day: int) -> int | None:
    """The percent off of the special the product is on on `day` (None: none): windows of
    SPECIAL_WINDOW days, staggered per product, a sixth of them with a special."""
    window = (day + h(seed, store_key, index, "special-offset") % SPECIAL_WINDOW) // SPECIAL_WINDOW
    if h(seed, store_key, index, "special", window) % 6:
        return None
    return SPECIAL_DISCOUNTS[h(seed, store_key, index, "discount", window) % len(SPECIAL_DISCOUNTS)]
