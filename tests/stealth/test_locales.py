"""The time zone of a store from its state (cannaspider/stealth/locales.py)."""

from __future__ import annotations

from zoneinfo import ZoneInfo

from cannaspider.stealth.locales import DEFAULT_TIMEZONE, STATE_TIMEZONES, state_timezone, store_timezone

STATES = (
    "AL AK AZ AR CA CO CT DE DC FL GA HI ID IL IN IA KS KY LA ME MD MA MI MN MS MO MT NE NV NH NJ NM NY NC ND OH OK "
    "OR PA RI SC SD TN TX UT VT VA WA WV WI WY"
).split()


def test_every_state_dc_and_territory_has_a_real_zone():
    assert set(STATES) | {"PR", "VI", "GU", "MP", "AS"} == set(STATE_TIMEZONES)
    for zone in STATE_TIMEZONES.values():
        ZoneInfo(zone)  # Playwright refuses a context with an unknown zone


def test_states_spanning_zones_get_their_most_populous_one():
    spanning = {s: state_timezone(s) for s in ("FL", "IN", "KY", "MI", "TN", "TX", "KS", "NE", "ND", "SD", "ID", "OR")}
    assert spanning == {
        "FL": "America/New_York",
        "IN": "America/Indiana/Indianapolis",
        "KY": "America/New_York",
        "MI": "America/Detroit",
        "TN": "America/Chicago",
        "TX": "America/Chicago",
        "KS": "America/Chicago",
        "NE": "America/Chicago",
        "ND": "America/Chicago",
        "SD": "America/Chicago",
        "ID": "America/Boise",
        "OR": "America/Los_Angeles",
    }
    assert state_timezone("AZ") == "America/Phoenix" and state_timezone("AK") == "America/Anchorage"


def test_the_store_zone_first_then_the_state_then_the_default():
    assert store_timezone("NY", "America/Phoenix") == "America/Phoenix"
    assert store_timezone(" nv ", "not a zone") == "America/Los_Angeles"
    assert store_timezone("ZZ", None) == store_timezone(None, None) == DEFAULT_TIMEZONE
