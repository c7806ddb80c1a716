"""store_discovery against the sandbox."""

from __future__ import annotations

from tests.conftest import run_scrapy


def test_discovers_every_store_of_the_state_and_rediscovery_updates(crawl, db, sandbox, sql):
    expected = {s["id"]: s for s in sandbox.stores("AZ")}
    result = crawl("store_discovery", state="AZ")
    assert result.returncode == 0
    rows = sql("SELECT platform_dispensary_id, name, slug, menu_url, state, lat, lng, timezone FROM dispensaries")
    assert {r[0] for r in rows} == set(expected)
    for pid, name, slug, menu_url, state, lat, lng, tz in rows:
        s = expected[pid]
        assert (name, slug, menu_url, state) == (s["name"], s["cName"], s["menu_url"], "AZ")
        assert (round(lat, 6), round(lng, 6)) == (s["lat"], s["lng"])
        assert tz.startswith("America/")
    locations = sql(
        "SELECT platform_dispensary_id, dispensary_id IS NOT NULL, raw->>'cName' FROM dutchie_discovery_locations"
    )
    assert len(locations) == len(expected) and all(linked for _, linked, _ in locations)

    sql("UPDATE dispensaries SET name = 'renamed by hand'")
    assert crawl("store_discovery", state="arizona").returncode == 0  # a state name works too
    assert sql("SELECT count(*) FROM dispensaries")[0][0] == len(expected)  # updated, never duplicated
    assert sql("SELECT count(*) FROM dispensaries WHERE name = 'renamed by hand'")[0][0] == 0
    assert sql("SELECT count(*) FROM dutchie_discovery_locations WHERE last_seen_at > first_seen_at")[0][0] == len(
        expected
    )


def test_city_filter(crawl, db, sandbox, sql):
    city = sandbox.stores("AZ")[0]["city"]
    crawl("store_discovery", state="AZ", city=city)
    cities = {r[0] for r in sql("SELECT city FROM dispensaries")}
    assert cities == {city}


def test_blocked_search_points_are_logged_and_the_rest_continue(crawl, db, sandbox, sql):
    # without retries with another proxy and identity (tests/middlewares/test_stealth.py), a block
    # fails its search point at once
    sandbox.faults({"kind": "block403", "operation": "DispensarySearch", "times": 1})
    result = crawl("store_discovery", "-s", "STEALTH_BLOCK_RETRIES=0", state="AZ")
    assert "failed: ProxyBlocked: blocked: HTTP 403 Cloudflare block page" in result.stderr
    assert "1 search points failed" in result.stderr
    assert sql("SELECT count(*) FROM dispensaries")[0][0] > 0


def test_unknown_state_is_a_clear_error(scrapy_env):
    result = run_scrapy("crawl", "store_discovery", "-a", "state=XX", env=scrapy_env)
    assert result.returncode != 0 and "unknown US state 'XX'" in result.stderr
