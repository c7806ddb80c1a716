"""Timestamps of a payload (epoch milliseconds or ISO 8601) as aware datetimes, within a sane window."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from cannaspider.storable.degraded import degrade

# createdAt/updatedAt outside [2000-01-01, a year after this process started] are not real: Dutchie
# started in 2017 and no online menu item is older than 2000, so an epoch that small is a
# placeholder (0, 12) or seconds sent for milliseconds (which read as January 1970), and a date
# years ahead is garbage. Both degrade to None instead of a wrong date.
EARLIEST = datetime(2000, 1, 1, tzinfo=UTC)
LATEST = datetime.now(UTC) + timedelta(days=366)
EARLIEST_MS = int(EARLIEST.timestamp()) * 1000
LATEST_MS = int(LATEST.timestamp()) * 1000


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
            degrade(what, value)
            return None
        try:
            ms = int(text)
        except ValueError:  # beyond int()'s digit limit
            degrade(what, value)
            return None
    elif type(value) is int or type(value) is float:
        ms = value
    else:  # None, bools, lists, objects
        return None
    if EARLIEST_MS <= ms <= LATEST_MS:
        return datetime.fromtimestamp(ms / 1000, UTC)  # tz positional: twice as fast as tz=UTC
    degrade(what, value)
    return None
