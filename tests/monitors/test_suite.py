"""The crawl-health suite over a crawl's stats: each threshold is a setting, each failure says why,
a report is written for every crawl and an alert (ERROR line + webhook) only when a check failed."""

from __future__ import annotations

import logging

import pytest

from tests.monitors.conftest import failed, run_health


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
