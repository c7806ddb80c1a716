"""The IANA time zone of a store, for its browser context's `timezone_id` (docs/stealth.md,
"Browser pages"): the store's own zone when Dutchie gives a valid one, else its state's, else
DEFAULT_TIMEZONE. A page whose clock says New York while its proxy and Accept-Language say
Arizona is a mismatch a fingerprinting script reads at once (`Intl.DateTimeFormat()`).

A state that spans zones has the zone where most of its people live (the zone a resident's device
most often reports): Florida, Indiana, Kentucky and Michigan Eastern; Tennessee, Texas, Kansas,
Nebraska and the Dakotas Central; Idaho Mountain (Boise); Oregon Pacific; Alaska Anchorage's.
Arizona is America/Phoenix (no daylight saving time), as the seed's session has it.
"""

from __future__ import annotations

from zoneinfo import ZoneInfo

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
