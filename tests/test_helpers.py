"""tests/helpers.py and tests/conftest.py: in-process crawlers see the environment of the moment,
and the suite passes with DATABASE_URL naming the server (conftest.py's second mode).

Nothing else in a run exercises that mode: the suite normally starts its own embedded server,
so a helper or fixture that read DATABASE_URL from the session's start again (settings.py
applies the environment once, at import) would break every run on another server unseen, as
it once broke 16 tests (issue #28, point 8). test_the_suite_passes_with_database_url_set runs a
few of the tests that rely on it in a pytest of their own, with DATABASE_URL set: a few seconds.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from cannaspider.db.connection import configured_url
from tests.helpers import ROOT, project_crawler

# tests whose fixtures give the database by environment (monkeypatch.setenv), one per file
BY_ENVIRONMENT = (
    "tests/pipelines/test_writers.py::test_each_product_gets_a_snapshot_per_crawl_with_that_crawls_prices",
    "tests/test_feeds.py::test_dispensary_records_are_stored_with_their_raw_object_and_exported_without_it",
)


def test_a_project_crawler_has_the_environment_of_the_moment_as_a_process_started_now(monkeypatch):
    monkeypatch.setenv("DATABASE_URL", "postgresql://first@127.0.0.1:1/a")
    assert project_crawler().settings["DATABASE_URL"] == "postgresql://first@127.0.0.1:1/a"
    monkeypatch.setenv("DATABASE_URL", "postgresql://second@127.0.0.1:1/b")
    crawler = project_crawler()
    assert crawler.settings["DATABASE_URL"] == "postgresql://second@127.0.0.1:1/b"
    assert configured_url(crawler.settings) == "postgresql://second@127.0.0.1:1/b"
    monkeypatch.delenv("DATABASE_URL")
    assert configured_url(project_crawler().settings) is None  # the embedded server's


@pytest.mark.integration
def test_the_suite_passes_with_database_url_set(admin_url, tmp_path):
    env = {**os.environ, "DATABASE_URL": admin_url}
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:xdist", "-p", "no:cacheprovider"]
        + ["--basetemp", str(tmp_path / "inner"), *BY_ENVIRONMENT],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout[-4000:]
    assert f"{len(BY_ENVIRONMENT)} passed" in result.stdout
