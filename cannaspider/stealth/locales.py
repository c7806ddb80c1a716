"""Where a store is, for the identities that crawl it: its state and time zone (StoreLocales, read
from `dispensaries` once per store and crawl), which its identity's Accept-Language fits
(cannaspider/stealth/identity.py), and the IANA zone its browser context's `timezone_id` is
(store_timezone).
"""

from __future__ import annotations

from zoneinfo import ZoneInfo

from scrapy.crawler import Crawler

from cannaspider.db.crawl_database import CrawlDatabase

Locale = tuple[str | None, str | None]  # (state, IANA time zone)


class StoreLocales:
    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.known: dict[int, Locale] = {}

    async def of(self, key: object) -> Locale:
        """The locale of a session key (stealth/routing.py); the spider's state for a key that
        is no store, or when the database cannot say."""
        spider_state = getattr(self.crawler.spider, "state", None)
        fallback: Locale = (spider_state if isinstance(spider_state, str) else None, None)
        if not (isinstance(key, tuple) and key[0] == "dispensary" and isinstance(key[1], int)):
            return fallback
        dispensary_id: int = key[1]
        if dispensary_id not in self.known:
            try:
                db = await CrawlDatabase.for_crawler(self.crawler).open()
                async with db.connection() as conn:
                    row = await (
                        await conn.execute("SELECT state, timezone FROM dispensaries WHERE id = %s", (dispensary_id,))
                    ).fetchone()
                self.known[dispensary_id] = (row[0], row[1]) if row else fallback
            except Exception:  # noqa: BLE001 - Accept-Language then follows the spider's state
                return fallback
        return self.known[dispensary_id]


# The IANA time zone of a store, for its browser context's `timezone_id` (docs/stealth.md,
# "Browser pages"): the store's own zone when Dutchie gives a valid one, else its state's, else
# DEFAULT_TIMEZONE. A page whose clock says New York while its proxy and Accept-Language say
# Arizona is a mismatch a fingerprinting script reads at once (`Intl.DateTimeFormat()`).
#
# A state that spans zones has the zone where most of its people live (the zone a resident's device
# most often reports): Florida, Indiana, Kentucky and Michigan Eastern; Tennessee, Texas, Kansas,
# Nebraska and the Dakotas Central; Idaho Mountain (Boise); Oregon Pacific; Alaska Anchorage's.
# Arizona is America/Phoenix (no daylight saving time), as the seed's session has it.

DEFAULT_TIMEZONE = "America/New_York"  # neither the store nor its state says: the most common US zone

_EASTERN = "CT DE DC FL GA KY ME MD MA NH NJ NY NC OH PA RI SC VT VA WV".split()
_CENTRAL = "AL AR IL IA KS LA MN MS MO NE ND OK SD TN TX WI".split()
_MOUNTAIN = "CO MT NM UT WY".split()
_PACIFIC = "CA NV OR WA".split()

STATE_TIMEZONES: dict[str, str] = {
    **dict.fromkeys(_EASTERN, "America/New_York"),
    **dict.fromkeys(_CENTRAL, "America/Chicago"),
    **dict.fromkeys(_MOUNTAIN, "America/Denver"),
    **dict.fromkeys(_PACIFIC, "America/Los_Angeles"),
    "AZ": "America/Phoenix",
    "AK": "America/Anchorage",
    "HI": "Pacific/Honolulu",
    "ID": "America/Boise",
    "IN": "America/Indiana/Indianapolis",
    "MI": "America/Detroit",
    # territories
    "PR": "America/Puerto_Rico",
    "VI": "America/St_Thomas",
    "GU": "Pacific/Guam",
    "MP": "Pacific/Saipan",
    "AS": "Pacific/Pago_Pago",
}


def valid_timezone(name: str | None) -> str | None:
    """`name` when it is a real IANA zone (Playwright refuses a context otherwise)."""
    if name:
        try:
            ZoneInfo(name)
            return name
        except (ValueError, KeyError, OSError):
            pass
    return None


def state_timezone(state: str | None) -> str | None:
    """The zone of a US state or territory by its two-letter code (any case); None when unknown."""
    return STATE_TIMEZONES.get((state or "").strip().upper())


def store_timezone(state: str | None, timezone: str | None) -> str:
    """The store's own zone when valid, else its state's, else DEFAULT_TIMEZONE."""
    return valid_timezone(timezone) or state_timezone(state) or DEFAULT_TIMEZONE
