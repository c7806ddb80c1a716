"""The events reader's pieces that need no database: cursors bound to their filters, `since`
parsing, and out-of-stock intervals from a product's events (cannaspider/analytics/events.py)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from cannaspider.analytics import events as ev

T = [datetime(2026, 11, d, 10, tzinfo=UTC) for d in range(1, 8)]


def test_a_cursor_reads_back_only_with_its_own_filters():
    az = ev.EventFilter(state="az", types=("listed",))
    cursor = az.cursor(41)
    assert az.position(cursor) == 41 and ev.EventFilter(state="AZ", types=("listed",)).position(cursor) == 41
    for other in (ev.EventFilter(state="CA", types=("listed",)), ev.EventFilter(state="AZ"), ev.EventFilter()):
        with pytest.raises(ev.CursorError, match="other filters"):
            other.position(cursor)
    assert az.position(None) == 0


@pytest.mark.parametrize("cursor", ["", "====", "%%%", "MA", "LTEuYWJj", "OTIyMzM3MjAzNjg1NDc3NTgwOC54"])
def test_a_cursor_that_is_not_ours_is_refused(cursor):
    with pytest.raises(ev.CursorError):
        ev.EventFilter().position(cursor)


def test_since_takes_a_date_or_a_time():
    assert ev.parse_since("2026-11-30") == datetime(2026, 11, 30, tzinfo=UTC)
    assert ev.parse_since("2026-11-30T08:00:00") == datetime(2026, 11, 30, 8, tzinfo=UTC)
    assert ev.parse_since("2026-11-30T08:00:00-07:00") == datetime(2026, 11, 30, 15, tzinfo=UTC)
    for bad in ("30/11/2026", "2026-11-31", "", "2026-11-30T25:00"):
        with pytest.raises(ev.EventQueryError, match="not a date"):
            ev.parse_since(bad)


def intervals(*kinds: str, oos_since=None) -> list[tuple]:
    events = [{"type": kind, "occurred_at": T[i]} for i, kind in enumerate(kinds)]
    return [(i["from"], i["until"]) for i in ev.oos_intervals(events, oos_since)]


def test_out_of_stock_intervals_pair_each_out_with_the_next_return():
    assert intervals("listed", "out_of_stock", "back_in_stock", "out_of_stock") == [(T[1], T[2]), (T[3], None)]
    assert intervals("listed", "price_changed") == []
    # out of stock since before events were written: opened by oos_since, or closed by a return
    assert intervals("listed", oos_since=T[5]) == [(T[5], None)]
    assert intervals("back_in_stock", "out_of_stock", oos_since=T[1]) == [(None, T[0]), (T[1], None)]
