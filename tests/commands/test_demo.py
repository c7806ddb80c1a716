"""The main job, end to end: `scrapy demo` against its own sandbox and a fresh database."""

from __future__ import annotations

import asyncio
import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import psycopg
import pytest

from cannaspider.web import market_queries
from sandbox import month
from sandbox.catalog import Catalog
from sandbox.commands.demo import demo_catalog
from tests.helpers import run_scrapy, with_dbname
from tests.web.conftest import Service
from tests.web.test_dashboard import browser, recording_page, shot  # noqa: F401 - the browser fixture

pytestmark = pytest.mark.integration  # spawns (tests/tiers.py)


@dataclass(frozen=True)
class DemoRun:
    url: str  # the demo's database, as the demo left it
    data: Path  # its CANNASPIDER_DATA_DIR
    out: str  # what it printed


@pytest.fixture(scope="module")
def demo(admin_url, db_prefix, tmp_path_factory) -> Iterator[DemoRun]:
    """One 30-day demo for the module's tests: what it prints and stores, and the pages on its data."""
    # the demo's own database (`--database`) on DATABASE_URL's server, left over from an earlier run
    name = f"{db_prefix}_demo"
    url = with_dbname(admin_url, name)
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE left_by_an_earlier_run (id int)")
    data = tmp_path_factory.mktemp("demo") / "data"
    env = {**os.environ, "DATABASE_URL": admin_url, "CANNASPIDER_DATA_DIR": str(data)}
    env.pop("DUTCHIE_GRAPHQL_URL", None)
    result = run_scrapy("demo", "--state", "NV", "--database", name, env=env, timeout=1800)
    assert result.returncode == 0, result.stderr[-3000:]
    yield DemoRun(url, data, result.stdout)
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_demo_crawls_a_month_and_leaves_a_feed_a_market_and_a_summary(demo):
    url, out, tmp_data = demo.url, demo.out, demo.data
    assert "$ scrapy crawl store_discovery -a state=NV -a platform=jane" in out
    steps = ("store_discovery", "entry_point_discovery", "product_discovery", "product_resync", "analytics_refresh")
    for step in steps:
        assert f"$ scrapy crawl {step}" in out
    assert out.count("$ scrapy crawl product_resync") == month.DAYS - 1
    figures = {
        k: int(v) for k, v in re.findall(r"^\s+(stores|products|in stock|out of stock)\s+(\d+)", out, re.MULTILINE)
    }
    stores = 8 + 4  # Dutchie's 8 stores, Jane's 4
    assert figures["stores"] == stores and figures["products"] > 500
    per_platform = {
        p: tuple(map(int, row))
        for p, *row in re.findall(r"^\s+(dutchie|jane)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)$", out, re.M)
    }
    assert per_platform["dutchie"][0] == 8 and per_platform["jane"][0] == 4
    assert all(oos > 0 and complete == n * month.DAYS for n, _, _, oos, complete in per_platform.values())
    assert [sum(column) for column in zip(*per_platform.values(), strict=True)][1:4] == [
        figures["products"],
        figures["in stock"],
        figures["out of stock"],
    ]
    assert figures["out of stock"] > 0 and figures["in stock"] + figures["out of stock"] == figures["products"]
    feed = tmp_data / "demo" / "products.json"
    items = json.loads(feed.read_text())
    assert len(items) == figures["in stock"]  # the last day's feed: what is on the menus now
    assert sorted(p.name for p in tmp_data.iterdir() if p.name == "feeds") == []  # no daily feeds
    stored = re.search(r"^\s+images\s+(\d+) of (\d+) stored as webp", out, re.MULTILINE)
    assert stored and 0 < int(stored[1]) == int(stored[2]), out[-2000:]
    assert len(list((tmp_data / "images" / "products").rglob("*.webp"))) == int(stored[1])

    with psycopg.connect(url) as conn:
        statuses = dict(conn.execute("SELECT status, count(*) FROM crawl_runs GROUP BY 1").fetchall())
        proxies = conn.execute("SELECT count(*) FROM proxies").fetchone()[0]
        # 30 UTC days, a day apart, the last today: every store crawled once a day, completely
        days = conn.execute(
            "SELECT (started_at AT TIME ZONE 'UTC')::date, count(*), count(DISTINCT dispensary_id)"
            " FROM crawl_runs WHERE status = 'complete' GROUP BY 1 ORDER BY 1"
        ).fetchall()
        today = conn.execute("SELECT (now() AT TIME ZONE 'UTC')::date").fetchone()[0]
        events = dict(conn.execute("SELECT type, count(*) FROM product_events GROUP BY 1").fetchall())
        event_days = dict(
            conn.execute(
                "SELECT type, count(DISTINCT (occurred_at AT TIME ZONE 'UTC')::date) FROM product_events GROUP BY 1"
            ).fetchall()
        )
        spread = _brand_stores(conn, month.SPREADING_BRAND)
        retreat = _brand_stores(conn, month.RETREATING_BRAND)
        collapsing = Catalog(demo_catalog("NV")).stores[month.COLLAPSING_STORE]
        (store_id,) = conn.execute(
            "SELECT id FROM dispensaries WHERE platform = 'dutchie' AND platform_dispensary_id = %s", (collapsing.id,)
        ).fetchone()
        runs = conn.execute(
            "SELECT (started_at AT TIME ZONE 'UTC')::date, suspect, suspect_streak, products_seen FROM crawl_runs"
            " WHERE dispensary_id = %s ORDER BY started_at",
            (store_id,),
        ).fetchall()
        marked = conn.execute(
            "SELECT (occurred_at AT TIME ZONE 'UTC')::date FROM product_events WHERE dispensary_id = %s"
            " AND type = 'out_of_stock'",
            (store_id,),
        ).fetchall()
    assert statuses == {"complete": stores * month.DAYS}
    assert len(days) == month.DAYS and days[-1][0] == today
    assert [d for d, _, _ in days] == [today - timedelta(days=month.DAYS - n) for n in range(1, month.DAYS + 1)]
    assert all(runs_of_day == stores_of_day == stores for _, runs_of_day, stores_of_day in days)
    # menus that move: events of each kind, and on most days
    kinds = ("listed", "price_changed", "special_started", "special_ended", "out_of_stock", "back_in_stock")
    assert all(events.get(kind, 0) > 0 for kind in kinds), events
    assert event_days["price_changed"] >= month.DAYS - 2 and event_days["special_started"] >= month.DAYS - 2
    assert event_days["out_of_stock"] >= 10 and event_days["back_in_stock"] >= 10
    # the printed events are the database's
    printed = dict(re.findall(r"(\w+) (\d+)", re.search(r"^\s+events\s+(.*)$", out, re.M)[1]))
    assert {k: int(v) for k, v in printed.items()} == {kind: events[kind] for kind in kinds}
    # a brand that spreads to more stores, one that retreats (not day by day: the collapsing
    # store's two days count among the crawled stores, with an eighth of its menu)
    assert spread[0] * 2 < spread[-1] and spread[-1] >= stores - 1 and len(spread) == month.DAYS, spread
    assert retreat[0] > retreat[-1] * 1.5 and len(retreat) == month.DAYS, retreat
    # the collapse: two suspect crawls in a row (the OOS guard's streak), the menu back the day after,
    # and none of its products marked out of stock for it
    first = days[0][0]
    suspect = [(d, streak) for d, is_suspect, streak, _ in runs if is_suspect]
    collapse_days = [first + timedelta(days=n - 1) for n in month.COLLAPSE_DAYS]
    assert suspect == [(collapse_days[0], 1), (collapse_days[1], 2)]
    seen = {d: products for d, _, _, products in runs}
    after = collapse_days[-1] + timedelta(days=1)
    assert seen[after] > 2 * seen[collapse_days[0]]
    window = {collapse_days[0] + timedelta(days=n) for n in range(-1, len(collapse_days) + 2)}
    assert not [d for (d,) in marked if d in window], marked
    assert re.search(r"^\s+collapse\s+.*2 suspect crawls.*, 0 products marked out of stock by it$", out, re.M)

    # the market as the dashboard shows it: a 4-week change, movers, a chart over the month
    async def market() -> tuple[dict, list]:
        async with await psycopg.AsyncConnection.connect(url) as aconn:
            m = await market_queries.market(aconn, state="NV", day=None, compare_days=28, city="", limit=50, movers=10)
            assert m is not None
            history = await market_queries.category_history(aconn, state="NV", day=m["day"], days=28)
            return m, history

    m, history = asyncio.run(market())
    assert m["day"] == today and m["compared_with"] == today - timedelta(days=28)
    changed = {b["name"].lower(): b["change"] for b in m["brands"] if b["change"] is not None}
    assert len(changed) >= 10 and changed[month.SPREADING_BRAND.lower()] > 0, changed
    assert m["brand_movers"]["gains"] and m["brand_movers"]["losses"]
    assert m["price_movers"]["drops"] and m["price_movers"]["rises"]
    assert len({row["day"] for row in history}) >= 28
    printed_change = re.search(r"^\s+4-week change\s+(\d+) brands", out, re.M)
    assert printed_change and int(printed_change[1]) == len(changed)

    with psycopg.connect(url) as conn:  # created anew: nothing of the earlier run is left
        assert conn.execute("SELECT to_regclass('left_by_an_earlier_run')").fetchone() == (None,)
    assert proxies == 0  # its sandbox's proxy is gone with it: no dead row for later crawls or `scrapy check`


def _brand_stores(conn, brand: str) -> list[int]:
    """The stores carrying the brand (any spelling), day by day (the market's daily roll)."""
    rows = conn.execute(
        "SELECT m.day, sum(m.stores) FROM market_brand_daily m JOIN brands b ON b.id = m.canonical_brand_id"
        " WHERE b.normalized_name = lower(%s) GROUP BY 1 ORDER BY 1",
        (brand,),
    ).fetchall()
    return [int(stores) for _, stores in rows]


def test_the_demo_refuses_to_drop_the_database_that_database_url_names(admin_url, tmp_path):
    env = {**os.environ, "DATABASE_URL": admin_url, "CANNASPIDER_DATA_DIR": str(tmp_path / "data")}
    own = psycopg.conninfo.conninfo_to_dict(admin_url)["dbname"]
    result = run_scrapy("demo", "--database", own, env=env, timeout=120)
    assert result.returncode != 0
    assert f"the demo's database ({own}) must not be DATABASE_URL's own" in result.stderr
    with psycopg.connect(admin_url) as conn:  # still there
        assert conn.execute("SELECT 1").fetchone() == (1,)


def test_the_demo_refuses_more_days_than_the_sandbox_month_has(admin_url, tmp_path):
    env = {**os.environ, "DATABASE_URL": admin_url, "CANNASPIDER_DATA_DIR": str(tmp_path / "data")}
    result = run_scrapy("demo", "--days", str(month.DAYS + 1), "--database", "never_created", env=env, timeout=120)
    assert result.returncode == 2
    assert f"--days must be 1 to {month.DAYS}" in result.stderr


def test_without_chromium_the_demo_goes_on_with_the_stores_that_need_none(empty_database, admin_url, tmp_path):
    """CHROMIUM_PATH pointing nowhere (apt locked, a non-root user): entry_point_discovery fails only the
    stores whose menu is on their own website, each with its resolution_error, and exits 3 for them
    (not 2); the demo says so and crawls the others."""
    name = psycopg.conninfo.conninfo_to_dict(empty_database)["dbname"]
    missing = tmp_path / "no-chromium"
    env = {
        **os.environ,
        "DATABASE_URL": admin_url,
        "CANNASPIDER_DATA_DIR": str(tmp_path / "data"),
        "CHROMIUM_PATH": str(missing),
    }
    env.pop("DUTCHIE_GRAPHQL_URL", None)
    result = run_scrapy("demo", "--state", "NV", "--database", name, "--days", "2", env=env, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    reason = f"Chromium not found at CHROMIUM_PATH ({missing})"
    note = re.search(
        rf"^\((\d+) store\(s\) whose menu is on their own website not resolved: {re.escape(reason)}; the demo goes on"
        r" with the others\)$",
        result.stdout,
        re.M,
    )
    assert note, result.stdout[-3000:]
    n = int(note[1])
    assert re.search(rf"^\s+stores\s+12 \(\d+ resolved, {n} with a resolution error\)$", result.stdout, re.M)
    with psycopg.connect(empty_database) as conn:
        errors = conn.execute(
            "SELECT resolution_error, count(*) FROM dispensaries WHERE resolution_error IS NOT NULL GROUP BY 1"
        ).fetchall()
        statuses = dict(conn.execute("SELECT status, count(*) FROM crawl_runs GROUP BY 1").fetchall())
    assert errors == [(reason, n)]
    assert statuses == {
        "complete": 12 * 2
    }  # two days  # the stores discovery gave a platform id are crawled all the same


def _money(value: float) -> str:
    return f"${value:,.2f}"


@pytest.fixture
def page(browser, tmp_path):  # noqa: F811 - a desktop's width: every column shown
    with recording_page(browser, tmp_path, viewport={"width": 1280, "height": 900}) as (pg, requests):
        yield pg
    # nothing but the service itself was asked for (no CDN, no font, no script)
    assert requests and all(u.startswith("http://127.0.0.1:") for u in requests), requests


def test_the_demos_new_pages_in_chromium_show_what_its_database_says(demo, page):
    """The analyst's pages (specials, brand search and page, a canonical product across stores, the
    market's states table and 4-week change) in headless Chromium over the month the demo crawled,
    each figure read off the page and checked against SQL on the demo's database; no request leaves
    127.0.0.1."""

    def sql(query: str, params: tuple = ()) -> list[tuple]:
        with psycopg.connect(demo.url, autocommit=True) as conn:
            return conn.execute(query, params).fetchall()

    now = "sp.stock_status = 'in_stock' AND d.menu_empty_since IS NULL AND d.state = 'NV'"
    with Service(demo.url, None) as service:
        # the deals running now in the state, and per category list against special price
        page.goto(service.base + "/dashboard/specials?state=NV")
        figures = {el.get_attribute("data-k"): el.inner_text() for el in page.locator("#figures [data-k]").all()}
        ((products, stores),) = sql(
            "SELECT count(*), count(DISTINCT sp.dispensary_id) FROM store_products sp"
            f" JOIN dispensaries d ON d.id = sp.dispensary_id WHERE sp.is_on_special AND {now}"
        )
        assert products > 0 and (figures["products"], figures["stores"]) == (str(products), str(stores))
        assert page.locator("#deals tbody tr[data-store]").count() > 0
        for category, list_price, special_price in sql(
            "SELECT sp.category, percentile_cont(0.5) WITHIN GROUP (ORDER BY sp.price_rec),"
            " percentile_cont(0.5) WITHIN GROUP (ORDER BY sp.price_rec_special) FROM store_products sp"
            f" JOIN dispensaries d ON d.id = sp.dispensary_id WHERE sp.is_on_special AND {now}"
            " AND sp.category IS NOT NULL GROUP BY 1"
        ):
            row = page.locator(f'#categories tr[data-category="{category}"]')
            assert row.locator('[data-k="list_price"]').inner_text() == _money(list_price), category
            assert row.locator('[data-k="special_price"]').inner_text() == _money(special_price), category
        shot(page, "demo-specials")

        # the brand that spread over the month: found by name, its page as SQL has it
        page.goto(service.base + "/dashboard/brands?q=" + month.SPREADING_BRAND.upper())
        found = page.locator("#brands tbody tr[data-brand]").all()
        ((brand,),) = sql(
            "SELECT DISTINCT sp.canonical_brand_id FROM store_products sp JOIN brands b ON b.id = sp.canonical_brand_id"
            " WHERE b.normalized_name = lower(%s)",
            (month.SPREADING_BRAND,),
        )
        assert str(brand) in [r.get_attribute("data-brand") for r in found]
        page.locator(f'#brands tr[data-brand="{brand}"] a').first.click()
        page.wait_for_url(f"**/dashboard/brands/{brand}")
        ((carried_by, per_g),) = sql(
            "SELECT count(DISTINCT sp.dispensary_id), percentile_cont(0.5) WITHIN GROUP (ORDER BY sp.unit_price)"
            " FILTER (WHERE sp.unit_price_basis = 'g') FROM store_products sp"
            f" JOIN dispensaries d ON d.id = sp.dispensary_id WHERE sp.canonical_brand_id = %s AND {now}",
            (brand,),
        )
        nv = page.locator('#states tbody tr[data-state="NV"]')
        assert nv.locator('[data-k="stores"]').inner_text() == str(carried_by) and carried_by >= 10
        assert nv.locator('[data-k="median_price_per_g"]').inner_text() == (_money(per_g) if per_g else "–")
        ((listed,),) = sql("SELECT count(*) FROM store_products WHERE canonical_brand_id = %s", (brand,))
        assert page.locator("#stores tbody tr[data-product]").count() == listed
        # its availability over the month: a day per row, rising as it spread
        days = page.locator('tr[data-state="NV"][data-day]').all()
        availability = [float(r.locator('[data-k="availability"]').inner_text().rstrip(" %")) for r in days]
        assert len(days) >= 28 and availability[-1] > availability[0], availability
        assert page.locator("svg.chart").count() == 1
        shot(page, "demo-brand")

        # a canonical product sold by the most stores: its last day per size, as the refresh rolled it
        ((product, last_day),) = sql(
            "SELECT canonical_product_id, max(day) FROM product_listed_daily GROUP BY 1"
            " ORDER BY max(stores) DESC, 1 LIMIT 1"
        )
        page.goto(f"{service.base}/dashboard/products/{product}")
        rolled = sql(
            "SELECT size, stores, price_min, price_median, price_max FROM product_size_daily"
            " WHERE canonical_product_id = %s AND day = %s ORDER BY grams NULLS LAST, size",
            (product, last_day),
        )
        shown = page.locator(f'#history tr[data-day="{last_day}"]').all()
        assert [r.get_attribute("data-size") for r in shown] == [size or "" for size, *_ in rolled]
        for row, (_, size_stores, low, median, high) in zip(shown, rolled, strict=True):
            cells = {k: row.locator(f'[data-k="{k}"]').inner_text() for k in ("size_stores", "min", "median", "max")}
            assert cells == {
                "size_stores": str(size_stores),
                "min": _money(low),
                "median": _money(median),
                "max": _money(high),
            }
        listed_days = {r.get_attribute("data-day") for r in page.locator("#history tr[data-day]").all()}
        assert len(listed_days) >= 28
        shot(page, "demo-canonical-product")

        # the market: the states table's $/g of flower, and the 4-week change of the spreading brand
        page.goto(service.base + "/dashboard/market")
        ((market_day, flower_per_g),) = sql(
            "SELECT day, price_per_g_median FROM market_category_daily WHERE state = 'NV' AND city = ''"
            " AND category = 'Flower' ORDER BY day DESC LIMIT 1"
        )
        nv_row = page.locator('#states-table tr[data-state="NV"]')
        assert nv_row.locator('td[data-k="median"]').inner_text() == _money(flower_per_g)
        page.goto(service.base + "/dashboard/market/NV")
        change = page.locator(f'#brands tr[data-brand="{brand}"] [data-k="change"]').inner_text()
        assert change.startswith("+"), change
        shot(page, "demo-market")
