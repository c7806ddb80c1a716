"""The crawl-health checks (cannaspider/monitors/checks.py) over a crawl's stats and its crawl_runs:
each threshold is a setting, each failure says why, a report is written for every crawl and an
alert (ERROR line + webhook) only when a check failed.

The store crawls: a store whose product count fell by more than HEALTH_MAX_PRODUCT_DROP against
its previous complete crawl fails the crawl's health; incomplete earlier runs and other processes'
runs don't count. Every crawl the OOS guard flagged suspect fails it too, each one of a collapse,
and every crawl that found a store's menu empty; many stores going empty at once fail the fleet's
check. Images: one slow image is a warning line, not a failed crawl; a share of failed images
above HEALTH_MAX_IMAGE_FAILURE_SHARE is.
"""

from __future__ import annotations

import json
import logging
import os
import socket
from pathlib import Path

import pytest

from tests.helpers import add_store as add_sandbox_store
from tests.monitors.conftest import failed, run_health
from tests.tasks.conftest import add_store

# -- the suite over the stats ------------------------------------------------------------------------
# The crawl-health suite over a crawl's stats: each threshold is a setting, each failure says why,
# a report is written for every crawl and an alert (ERROR line + webhook) only when a check failed.


def test_a_healthy_crawl_passes_and_still_leaves_a_report(tmp_path, db, caplog):
    stats = {"cannaspider/stores_complete": 10, "item_scraped_count": 400}
    with caplog.at_level(logging.ERROR):
        report = run_health(stats, tmp_path, db)
    assert report["ok"] and report["spider"] == "product_resync" and report["finish_reason"] == "finished"
    assert failed(report) == {}
    assert report["figures"]["cannaspider/stores_complete"] == 10
    assert not [r for r in caplog.records if r.name.startswith("cannaspider")]


@pytest.mark.parametrize(
    ("stats", "settings", "check", "says"),
    [
        ({"finish_reason": "closespider_timeout"}, {}, "test_finish_reason", "finish reason 'closespider_timeout'"),
        ({"finish_reason": "database_unavailable"}, {}, "test_finish_reason", "finish reason 'database_unavailable'"),
        ({"cannaspider/fatal_error": "db gone"}, {}, "test_finish_reason", "fatal error: db gone"),
        ({"log_count/ERROR": 3}, {}, "test_errors", "3 errors logged (HEALTH_MAX_ERRORS = 0)"),
        # a CRITICAL line (Scrapy counts it apart, log_count/CRITICAL) is an error too
        ({"log_count/CRITICAL": 1}, {}, "test_errors", "1 errors logged, 1 of them CRITICAL (HEALTH_MAX_ERRORS = 0)"),
        (
            {"log_count/ERROR": 2, "log_count/CRITICAL": 1},
            {"HEALTH_MAX_ERRORS": 2},
            "test_errors",
            "3 errors logged, 1 of them CRITICAL (HEALTH_MAX_ERRORS = 2)",
        ),
        (
            {"cannaspider/stores_complete": 8, "cannaspider/stores_incomplete": 2},
            {},
            "test_incomplete_share",
            "2 of 10 store crawls incomplete (20%",
        ),
        (
            {"cannaspider/graphql_failure/blocked": 11},
            {},
            "test_blocks_per_proxy",
            "blocked more than 10 times (HEALTH_MAX_BLOCKS_PER_PROXY): direct: 11",
        ),
        (
            {"cannaspider/proxy/7/blocked": 3, "cannaspider/proxy/9/blocked": 1},
            {"HEALTH_MAX_BLOCKS_PER_PROXY": 2},
            "test_blocks_per_proxy",
            "(HEALTH_MAX_BLOCKS_PER_PROXY): 7: 3",
        ),
        (
            {"cannaspider/stale_hash_fallbacks": 4},
            {},
            "test_stale_hash_fallbacks",
            "4 requests fell back to the full query",
        ),
        (
            {
                "cannaspider/validation/items": 10,
                "cannaspider/validation/items_invalid": 1,
                "cannaspider/validation/errors/price_rec": 1,
            },
            {},
            "test_items_valid",
            "1 of 10 products break the item schema (fields: price_rec",
        ),
    ],
)
def test_each_check_fails_with_its_reason(tmp_path, db, caplog, stats, settings, check, says):
    with caplog.at_level(logging.DEBUG):
        report = run_health(stats, tmp_path, db, **settings)
    assert not report["ok"]
    assert list(failed(report)) == [check]
    assert says in failed(report)[check]
    alert = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR and r.name.startswith("cannaspider")]
    assert len(alert) == 1 and says in alert[0] and "report:" in alert[0]
    assert "Traceback" not in caplog.text  # a failed check is not a crash


@pytest.mark.parametrize(
    ("stats", "settings"),
    [
        ({"log_count/ERROR": 3}, {"HEALTH_MAX_ERRORS": 3}),
        ({"cannaspider/stores_complete": 8, "cannaspider/stores_incomplete": 2}, {"HEALTH_MAX_INCOMPLETE_SHARE": 0.2}),
        ({"cannaspider/stale_hash_fallbacks": 4}, {"HEALTH_MAX_STALE_HASH_FALLBACKS": 5}),
        ({"finish_reason": "closespider_timeout"}, {"HEALTH_OK_FINISH_REASONS": ["finished", "closespider_timeout"]}),
        (
            {"cannaspider/validation/items": 10, "cannaspider/validation/items_invalid": 1},
            {"HEALTH_MAX_INVALID_ITEM_SHARE": 0.1},
        ),
    ],
)
def test_thresholds_are_settings(tmp_path, db, stats, settings):
    assert run_health(stats, tmp_path, db, **settings)["ok"]


@pytest.mark.integration
def test_the_operators_stop_is_healthy_and_posts_nothing(tmp_path, db, webhook, caplog):
    """SIGTERM/SIGINT or Scrapyd's cancel.json ends a crawl with Scrapy's `shutdown`: asked for, not an alert."""
    with caplog.at_level(logging.ERROR):
        report = run_health({"finish_reason": "shutdown"}, tmp_path, db, ALERT_WEBHOOK_URL=webhook.url)
    assert report["ok"] and report["finish_reason"] == "shutdown" and failed(report) == {}
    assert webhook.bodies == []
    assert not [r for r in caplog.records if r.name.startswith("cannaspider")]


def test_the_operators_stop_still_has_its_work_judged(tmp_path, db):
    report = run_health({"finish_reason": "shutdown", "log_count/ERROR": 1}, tmp_path, db)
    assert list(failed(report)) == ["test_errors"]


# -- the store crawls --------------------------------------------------------------------------------
# A store whose product count fell by more than HEALTH_MAX_PRODUCT_DROP against its previous
# complete crawl fails the crawl's health; incomplete earlier runs and other processes' runs don't count.
# Every crawl the OOS guard flagged suspect fails it too, each one of a collapse, and every crawl that
# found a store's menu empty; many stores going empty at once fail the fleet's check.


def add_run(
    sql, store: int, seen: int, *, status="complete", ago_min: int, mine=True, suspect=None, empty=False, ended=False
) -> int:
    """A crawl run started `ago_min` minutes ago (negative: after the crawl's start), finished a second later if
    `ended` (else as the runs of the crawl being checked look to it: by their start)."""
    host, pid = (socket.gethostname(), os.getpid()) if mine else ("elsewhere", 1)
    return sql(
        "INSERT INTO crawl_runs (dispensary_id, role, status, started_at, finished_at, products_seen, host, pid, "
        "suspect, suspect_reason, empty) VALUES (%s, 'product_resync', %s, now() - make_interval(mins => %s), "
        "CASE WHEN %s THEN now() - make_interval(mins => %s, secs => -1) END, %s, %s, %s, %s, %s, %s) RETURNING id",
        (store, status, ago_min, ended, ago_min, seen, host, pid, suspect is not None, suspect, empty),
    )[0][0]


def test_a_store_losing_more_than_30_percent_fails(tmp_path, db, sql):
    fell, steady, new = add_store(sql, "Fell"), add_store(sql, "Steady"), add_store(sql, "New")
    add_run(sql, fell, 100, ago_min=300)
    add_run(sql, fell, 20, status="incomplete", ago_min=200)  # not a complete crawl: not the reference
    add_run(sql, steady, 100, ago_min=300)
    for store, seen in ((fell, 69), (steady, 70), (new, 5)):
        add_run(sql, store, seen, ago_min=-1)  # this crawl's runs (started after start_time)
    report = run_health({"cannaspider/stores_complete": 3}, tmp_path, db)
    assert failed(report) == {
        "test_product_count_drop": "product count fell by more than 30% against the last complete crawl: "
        f"Fell (#{fell}): 69 products, 100 before"
    }


def test_runs_of_other_processes_are_not_this_crawls(tmp_path, db, sql):
    store = add_store(sql, "Other")
    add_run(sql, store, 100, ago_min=300)
    add_run(sql, store, 10, ago_min=-1, mine=False)
    assert run_health({"cannaspider/stores_complete": 1}, tmp_path, db)["ok"]
    assert run_health({"cannaspider/stores_complete": 1}, tmp_path / "b", db, HEALTH_MAX_PRODUCT_DROP=0.95)["ok"]


def test_every_suspect_crawl_of_a_collapse_fails_not_only_the_first(tmp_path, db, sql):
    store = add_store(sql, "Collapsed")
    add_run(sql, store, 100, ago_min=600)
    for streak in (1, 2, 3):
        reason = f"saw 40 of the 100 products in stock before this crawl: suspect crawl {streak}"
        run = add_run(sql, store, 40, ago_min=-1, suspect=reason)
        stats = {"cannaspider/stores_complete": 1, "cannaspider/stores_suspect": 1}
        report = run_health(stats, tmp_path / str(streak), db)
        assert failed(report)["test_suspect_crawls"] == (
            f"1 store crawl(s) suspect (a collapsed menu): Collapsed (#{store}): {reason}"
        )
        sql("UPDATE crawl_runs SET started_at = now() - make_interval(mins => %s) WHERE id = %s", (500 - streak, run))
    add_run(sql, store, 40, ago_min=-1)  # the menu that is left, judged against itself: healthy
    assert run_health({"cannaspider/stores_complete": 1}, tmp_path / "after", db)["ok"]


def went_empty(sql, store: int, ago_min: int) -> None:
    sql("UPDATE dispensaries SET menu_empty_since = now() - make_interval(mins => %s) WHERE id = %s", (ago_min, store))


def test_every_empty_menu_crawl_fails_with_since_when_and_not_as_a_product_drop(tmp_path, db, sql):
    dark, steady = add_store(sql, "Dark"), add_store(sql, "Steady")
    for store in (dark, steady):
        add_run(sql, store, 25, ago_min=600)
    add_run(sql, dark, 0, ago_min=300, empty=True)
    went_empty(sql, dark, 300)
    add_run(sql, dark, 0, ago_min=-1, empty=True)  # this crawl's: the state goes on
    add_run(sql, steady, 25, ago_min=-1)
    since = sql("SELECT menu_empty_since FROM dispensaries WHERE id = %s", (dark,))[0][0]
    report = run_health({"cannaspider/stores_complete": 2, "cannaspider/stores_empty": 1}, tmp_path, db)
    assert failed(report) == {
        "test_empty_menus": "1 store(s) with an empty menu (no product, totalCount 0: nothing marked out of stock; "
        f"a broken query, an API change or a menu gone dark): Dark (#{dark}): empty since {since:%Y-%m-%d %H:%M} UTC"
    }  # one store of the fleet: not a fleet-wide emptying; the product count's check leaves it to its own
    assert report["figures"]["cannaspider/stores_empty"] == 1


def test_many_stores_going_empty_at_once_fail_the_fleet_check(tmp_path, db, sql):
    stores = [add_store(sql, f"S{i}") for i in range(6)]
    for store in stores:
        add_run(sql, store, 25, ago_min=600)
    for store in stores[:3]:  # 3 of 6 crawled within the window went empty, 2 by other processes
        add_run(sql, store, 0, ago_min=-1, empty=True, mine=store == stores[0], ended=True)
        went_empty(sql, store, 1)
    for store in stores[3:]:
        add_run(sql, store, 25, ago_min=-1, mine=False, ended=True)
    stats = {"cannaspider/stores_complete": 1, "cannaspider/stores_empty": 1}
    got = failed(run_health(stats, tmp_path, db))
    assert got["test_fleet_emptied"] == (
        "3 of the 6 stores crawled in the last 6 h went empty (HEALTH_MAX_EMPTIED_SHARE = 10%, "
        "HEALTH_FLEET_EMPTIED_MIN_STORES = 3): the shape of an API change or a broken query, not of stores; "
        "their products' stock is left as it was"
    )
    assert set(got) == {"test_empty_menus", "test_fleet_emptied"}
    # a store that went empty before the window, or fewer stores than the least: the store check only
    went_empty(sql, stores[2], 60 * 7)
    assert set(failed(run_health(stats, tmp_path / "b", db))) == {"test_empty_menus"}
    assert set(failed(run_health(stats, tmp_path / "c", db, HEALTH_MAX_EMPTIED_SHARE=0.5))) == {"test_empty_menus"}


# -- images ------------------------------------------------------------------------------------------
# The Images check (cannaspider/monitors/checks.py): one slow image is a warning line, not a failed
# crawl; a share of failed images above HEALTH_MAX_IMAGE_FAILURE_SHARE is.


def test_a_share_of_failed_images_above_the_limit_fails_with_their_reasons(tmp_path, db, caplog):
    stats = {
        "cannaspider/images_stored": 88,
        "cannaspider/images_failed/downloadtimeouterror": 8,
        "cannaspider/images_failed/http": 4,
    }
    with caplog.at_level(logging.ERROR):
        report = run_health(stats, tmp_path, db)
    assert failed(report) == {
        "test_image_failures": "12 of 100 images failed (12%; HEALTH_MAX_IMAGE_FAILURE_SHARE = 10%): "
        "downloadtimeouterror: 8, http: 4"
    }
    assert "12 of 100 images failed" in caplog.text  # the alert


@pytest.mark.parametrize(
    ("stats", "settings"),
    [
        ({"cannaspider/images_failed/downloadtimeouterror": 1}, {}),  # one slow image, the only one tried
        ({"cannaspider/images_stored": 5, "cannaspider/images_failed/http": 9}, {}),  # fewer than 10 failed
        ({"cannaspider/images_stored": 90, "cannaspider/images_failed/http": 10}, {}),  # 10 %: at the limit
        (  # skips that are no failure: never fetched, or below the operator's own minimum size
            {
                "cannaspider/images_stored": 10,
                "cannaspider/images_failed/scheme": 50,
                "cannaspider/images_failed/filtered": 20,
                "cannaspider/images_failed/small": 30,
            },
            {},
        ),
        (
            {"cannaspider/images_stored": 60, "cannaspider/images_failed/http": 40},
            {"HEALTH_MAX_IMAGE_FAILURE_SHARE": 0.4},
        ),
    ],
)
def test_a_few_failed_images_pass(tmp_path, db, stats, settings):
    report = run_health(stats, tmp_path, db, **settings)
    assert report["ok"], failed(report)


def test_the_minimum_is_a_setting(tmp_path, db):
    stats = {"cannaspider/images_stored": 3, "cannaspider/images_failed/broken": 1}
    report = run_health(stats, tmp_path, db, HEALTH_MIN_IMAGE_FAILURES=1)
    assert list(failed(report)) == ["test_image_failures"]


@pytest.mark.integration
def test_one_image_slower_than_its_timeout_leaves_a_healthy_crawl(crawl, db, sandbox, scrapy_env):
    """It fired a crawl-health alert: Scrapy's retry middleware logged its give-up at ERROR, and
    the Errors check allows none."""
    store = min(sandbox.stores("AZ"), key=lambda s: s["product_count"])
    d = add_sandbox_store(db, store)
    sandbox.faults({"kind": "slow", "operation": "image", "delay": 3.0, "times": 1})
    result = crawl("product_resync", "-s", "IMAGES_DOWNLOAD_TIMEOUT_S=1", dispensary_id=d)
    assert result.returncode == 0, result.stderr[-3000:]
    # (on a loaded machine another image may time out too: each is its own warning line)
    skipped = [line for line in result.stderr.splitlines() if "[cannaspider.pipelines.images] WARNING" in line]
    assert skipped and all("took longer than 1.0 seconds" in line for line in skipped), result.stderr[-3000:]
    assert " ERROR: " not in result.stderr, result.stderr[-3000:]
    [path] = (Path(scrapy_env["CANNASPIDER_DATA_DIR"]) / "reports" / "product_resync").glob("*.json")
    report = json.loads(path.read_text())
    assert report["ok"], failed(report)
