"""The Images check (cannaspider/monitors/images.py): one slow image is a warning line, not a failed
crawl; a share of failed images above HEALTH_MAX_IMAGE_FAILURE_SHARE is."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from tests.helpers import add_store
from tests.monitors.conftest import failed, run_health


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


def test_one_image_slower_than_its_timeout_leaves_a_healthy_crawl(crawl, db, sandbox, scrapy_env):
    """It fired a crawl-health alert: Scrapy's retry middleware logged its give-up at ERROR, and
    the Errors check allows none."""
    store = min(sandbox.stores("AZ"), key=lambda s: s["product_count"])
    d = add_store(db, store)
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
