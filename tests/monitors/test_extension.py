"""The crawl-health extension (cannaspider/monitors/extension.py).

While a crawl runs: every HEALTH_CHECK_PERIOD_S the suite judges the stretch since the previous
check, with the same report and alert as at close, so a `-a follow=1` drainer tells within minutes
that its store crawls go incomplete.

SPIDERMON_* settings the project's crawl health does not act on are refused at start
(docs/health.md, "Spidermon's settings"): one `error:` line naming them, exit 2, never silently
ignored.
"""

from __future__ import annotations

import asyncio
import json
import logging
from datetime import UTC, datetime
from pathlib import Path

import pytest
from scrapy.utils.test import get_crawler

from cannaspider.commands.crawl import EXIT_SETUP
from cannaspider.monitors.extension import HONOURED, CrawlHealth, UnsupportedSpidermonSetting
from tests.helpers import project_crawler, project_settings, run_scrapy, scrapy_environment
from tests.monitors.conftest import ProductSpider, failed

# -- the periodic check ------------------------------------------------------------------------------
# Crawl health while a crawl runs (monitors/extension.py, window.py): every HEALTH_CHECK_PERIOD_S
# the suite judges the stretch since the previous check, with the same report and alert as at
# close, so a `-a follow=1` drainer tells within minutes that its store crawls go incomplete.


def running(tmp_path: Path, db: str, **settings):
    crawler = get_crawler(
        ProductSpider,
        settings_dict={
            **project_settings(),
            "HEALTH_REPORT_DIR": str(tmp_path / "reports"),
            "DATABASE_URL": db,
            **settings,
        },
    )
    spider = ProductSpider.from_crawler(crawler)
    crawler.stats.set_value("start_time", datetime.now(UTC))
    return crawler, spider, CrawlHealth.from_crawler(crawler)


def reports(tmp_path: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((tmp_path / "reports" / "product_resync").glob("*.json"))]


def test_each_stretch_is_judged_on_its_own_figures_and_an_idle_one_is_not_reported(tmp_path, db, caplog):
    crawler, spider, health = running(tmp_path, db)
    stats = crawler.stats
    stats.set_value("cannaspider/stores_complete", 8)
    stats.set_value("cannaspider/stores_incomplete", 2)
    with caplog.at_level(logging.ERROR):
        assert asyncio.run(health.check_stretch(spider))
    first = reports(tmp_path)[-1]
    assert not first["ok"] and first["finish_reason"] is None
    assert list(failed(first)) == ["test_incomplete_share"]  # still running: no finish reason to judge
    assert "2 of 10 store crawls incomplete" in failed(first)["test_incomplete_share"]
    alert = [r.getMessage() for r in caplog.records if r.name.startswith("cannaspider") and r.levelno == logging.ERROR]
    assert len(alert) == 1 and "2 of 10 store crawls incomplete" in alert[0]
    # the alert's own ERROR line (counted by Scrapy's log counter in a crawl) is not the next stretch's
    stats.inc_value("log_count/ERROR")
    health.window.absorb(stats.get_stats(), ("log_count/ERROR",))

    stats.inc_value("cannaspider/stores_complete", 10)  # the next stretch: 10 complete, none incomplete
    assert asyncio.run(health.check_stretch(spider))
    second = reports(tmp_path)[-1]
    assert second["ok"] and second["figures"]["cannaspider/stores_complete"] == 10
    assert second["figures"].get("cannaspider/stores_incomplete", 0) == 0
    assert second["started_at"] > first["started_at"]

    assert not asyncio.run(health.check_stretch(spider))  # nothing happened: no report
    assert len(reports(tmp_path)) == 2

    stats.set_value("finish_reason", "finished")
    stats.inc_value("cannaspider/stores_incomplete", 5)
    health.spider_closed(spider)  # at close: the last stretch, as always reported
    last = reports(tmp_path)[-1]
    assert len(reports(tmp_path)) == 3 and not last["ok"] and last["finish_reason"] == "finished"
    assert "5 of 5 store crawls incomplete" in failed(last)["test_incomplete_share"]


def test_the_checks_run_on_their_period_while_the_spider_runs(tmp_path, db):
    crawler, spider, health = running(tmp_path, db, HEALTH_CHECK_PERIOD_S=0.05)

    async def crawl() -> None:
        health.spider_opened(spider)
        crawler.stats.set_value("cannaspider/stores_incomplete", 3)
        for _ in range(200):
            if reports(tmp_path):
                break
            await asyncio.sleep(0.05)
        crawler.stats.set_value("finish_reason", "finished")
        health.spider_closed(spider)

    asyncio.run(crawl())
    found = reports(tmp_path)
    assert (
        found[0]["finish_reason"] is None
        and "3 of 3 store crawls incomplete" in failed(found[0])["test_incomplete_share"]
    )
    assert found[-1]["finish_reason"] == "finished"


def test_a_period_of_zero_checks_at_close_only(tmp_path, db):
    crawler, spider, health = running(tmp_path, db, HEALTH_CHECK_PERIOD_S=0)

    async def crawl() -> None:
        health.spider_opened(spider)
        crawler.stats.set_value("cannaspider/stores_incomplete", 3)
        await asyncio.sleep(0.2)
        assert reports(tmp_path) == []

    asyncio.run(crawl())


def test_a_stretch_with_only_a_critical_line_is_checked_and_fails(tmp_path, db):
    crawler, spider, health = running(tmp_path, db)
    crawler.stats.inc_value("log_count/CRITICAL")  # Scrapy's log counter, one stat a level
    assert asyncio.run(health.check_stretch(spider))
    report = reports(tmp_path)[-1]
    assert not report["ok"] and report["figures"]["log_count/CRITICAL"] == 1
    assert failed(report) == {"test_errors": "1 errors logged, 1 of them CRITICAL (HEALTH_MAX_ERRORS = 0)"}


# -- the SPIDERMON_* settings ------------------------------------------------------------------------
# SPIDERMON_* settings the project's crawl health does not act on are refused at start (docs/health.md,
# "Spidermon's settings"): one `error:` line naming them, exit 2, never silently ignored.


def test_the_honoured_settings_are_the_projects_own():
    assert set(HONOURED) == {"SPIDERMON_ENABLED", "SPIDERMON_SPIDER_CLOSE_MONITORS"}
    CrawlHealth.from_crawler(project_crawler(ProductSpider))  # the project's own settings start


@pytest.mark.parametrize("enabled", [True, False])
def test_an_unsupported_setting_is_refused_with_or_without_the_suite(enabled):
    with pytest.raises(UnsupportedSpidermonSetting) as raised:  # building the crawler builds its extensions
        CrawlHealth.from_crawler(
            project_crawler(ProductSpider, SPIDERMON_ENABLED=enabled, SPIDERMON_PERIODIC_MONITORS={"x": 60})
        )
    assert "SPIDERMON_PERIODIC_MONITORS → HEALTH_CHECK_PERIOD_S" in str(raised.value)


@pytest.mark.integration
def test_a_crawl_given_one_does_not_start(db, tmp_path):
    env = scrapy_environment(db, _no_sandbox(), tmp_path)
    result = run_scrapy(
        "crawl",
        "product_resync",
        "-s",
        "SPIDERMON_SLACK_SENDER_TOKEN=xoxb-s3cr3t",
        "-s",
        "SPIDERMON_MAX_ERRORS=5",
        env=env,
    )
    assert result.returncode == EXIT_SETUP, result.stderr[-3000:]
    last = result.stderr.strip().splitlines()[-1]
    assert last == (
        "error: SPIDERMON_MAX_ERRORS, SPIDERMON_SLACK_SENDER_TOKEN: not acted on by this project's crawl health "
        "(it honours only SPIDERMON_ENABLED and SPIDERMON_SPIDER_CLOSE_MONITORS; docs/health.md); use instead: "
        "SPIDERMON_MAX_ERRORS → HEALTH_MAX_ERRORS; SPIDERMON_SLACK_SENDER_TOKEN → ALERT_WEBHOOK_URL"
    ), last
    assert "Traceback" not in result.stderr and "xoxb-s3cr3t" not in result.stderr


def _no_sandbox():
    from types import SimpleNamespace

    return SimpleNamespace(graphql="http://127.0.0.1:9/graphql", jane="http://127.0.0.1:9/jane")
