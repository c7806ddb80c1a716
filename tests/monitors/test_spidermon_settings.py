"""SPIDERMON_* settings the project's crawl health does not act on are refused at start (docs/health.md,
"Spidermon's settings"): one `error:` line naming them, exit 2, never silently ignored."""

from __future__ import annotations

import pytest

from cannaspider.commands.crawl import EXIT_SETUP
from cannaspider.monitors.extension import CrawlHealth
from cannaspider.monitors.spidermon_settings import HONOURED, UnsupportedSpidermonSetting
from tests.helpers import project_crawler, run_scrapy, scrapy_environment
from tests.monitors.conftest import ProductSpider


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

    return SimpleNamespace(graphql="http://127.0.0.1:9/graphql")
