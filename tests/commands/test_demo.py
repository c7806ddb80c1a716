"""The main job, end to end: `scrapy demo` against its own sandbox and a fresh database."""

from __future__ import annotations

import json
import os
import re

import psycopg
import pytest

from tests.helpers import run_scrapy

pytestmark = pytest.mark.integration  # spawns (tests/tiers.py)


def test_demo_runs_the_whole_chain_and_leaves_a_feed_and_a_summary(empty_database, admin_url, tmp_path):
    # the demo's own database (`--database`) on DATABASE_URL's server, left over from an earlier run
    url = empty_database
    name = psycopg.conninfo.conninfo_to_dict(url)["dbname"]
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE left_by_an_earlier_run (id int)")
    env = {**os.environ, "DATABASE_URL": admin_url, "CANNASPIDER_DATA_DIR": str(tmp_path / "data")}
    env.pop("DUTCHIE_GRAPHQL_URL", None)
    result = run_scrapy("demo", "--state", "NV", "--database", name, env=env, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout
    assert "$ scrapy crawl store_discovery -a state=NV -a platform=jane" in out
    for step in ("store_discovery", "entry_point_discovery", "product_discovery", "product_resync"):
        assert f"$ scrapy crawl {step}" in out
    figures = {
        k: int(v) for k, v in re.findall(r"^\s+(stores|products|in stock|out of stock)\s+(\d+)", out, re.MULTILINE)
    }
    assert figures["stores"] == 8 + 4 and figures["products"] > 1000  # Dutchie's 8 stores, Jane's 4
    per_platform = {
        p: tuple(map(int, row))
        for p, *row in re.findall(r"^\s+(dutchie|jane)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)$", out, re.M)
    }
    assert per_platform["dutchie"][0] == 8 and per_platform["jane"][0] == 4
    assert all(oos > 0 and complete == stores * 4 for stores, _, _, oos, complete in per_platform.values())
    assert [sum(column) for column in zip(*per_platform.values(), strict=True)][1:4] == [
        figures["products"],
        figures["in stock"],
        figures["out of stock"],
    ]
    assert figures["out of stock"] > 0 and figures["in stock"] + figures["out of stock"] == figures["products"]
    feed = tmp_path / "data" / "demo" / "products.json"
    items = json.loads(feed.read_text())
    assert len(items) == figures["in stock"]  # the last resync's feed: what is on the menus now
    stored = re.search(r"^\s+images\s+(\d+) of (\d+) stored as webp", out, re.MULTILINE)
    assert stored and 0 < int(stored[1]) == int(stored[2]), out[-2000:]
    assert len(list((tmp_path / "data" / "images" / "products").rglob("*.webp"))) == int(stored[1])
    with psycopg.connect(url) as conn:
        statuses = dict(conn.execute("SELECT status, count(*) FROM crawl_runs GROUP BY 1").fetchall())
        proxies = conn.execute("SELECT count(*) FROM proxies").fetchone()[0]
    assert statuses == {"complete": (8 + 4) * 4}
    with psycopg.connect(url) as conn:  # created anew: nothing of the earlier run is left
        assert conn.execute("SELECT to_regclass('left_by_an_earlier_run')").fetchone() == (None,)
    assert proxies == 0  # its sandbox's proxy is gone with it: no dead row for later crawls or `scrapy check`


def test_the_demo_refuses_to_drop_the_database_that_database_url_names(admin_url, tmp_path):
    env = {**os.environ, "DATABASE_URL": admin_url, "CANNASPIDER_DATA_DIR": str(tmp_path / "data")}
    own = psycopg.conninfo.conninfo_to_dict(admin_url)["dbname"]
    result = run_scrapy("demo", "--database", own, env=env, timeout=120)
    assert result.returncode != 0
    assert f"the demo's database ({own}) must not be DATABASE_URL's own" in result.stderr
    with psycopg.connect(admin_url) as conn:  # still there
        assert conn.execute("SELECT 1").fetchone() == (1,)


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
    result = run_scrapy("demo", "--state", "NV", "--database", name, "--resyncs", "1", env=env, timeout=600)
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
    assert f"error: {n} unit(s) of work incomplete" in result.stderr  # exit 3, said once: not 2
    assert re.search(rf"^\s+stores\s+12 \(\d+ resolved, {n} with a resolution error\)$", result.stdout, re.M)
    with psycopg.connect(empty_database) as conn:
        errors = conn.execute(
            "SELECT resolution_error, count(*) FROM dispensaries WHERE resolution_error IS NOT NULL GROUP BY 1"
        ).fetchall()
        statuses = dict(conn.execute("SELECT status, count(*) FROM crawl_runs GROUP BY 1").fetchall())
    assert errors == [(reason, n)]
    assert statuses == {"complete": 12 * 2}  # the stores discovery gave a platform id are crawled all the same
