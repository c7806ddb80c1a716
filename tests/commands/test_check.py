"""`scrapy check` as a Scrapy user types it, in the development environment: the command starts
its own sandbox (sandbox/commands/check.py), every contract passes, and the proxies table ends as
it began: no health written (a dead proxy left by an interrupted demo stays untouched), the
check's own proxy removed."""

from __future__ import annotations

import os

import pytest

from tests.helpers import run_scrapy

pytestmark = pytest.mark.integration  # spawns (tests/tiers.py)


def test_scrapy_check_starts_its_sandbox_and_passes_writing_no_proxy_health(db, sql, tmp_path):
    # a proxy nothing listens on (an earlier demo's sandbox, gone), as a killed demo leaves it
    sql("INSERT INTO proxies (host, port, username, password, protocol) VALUES ('127.0.0.1', 9, 'u', 'p', 'http')")
    before = sql("SELECT * FROM proxies")
    env = {k: v for k, v in os.environ.items() if k not in {"DUTCHIE_GRAPHQL_URL", "SCRAPY_CHECK"}}
    env.update(DATABASE_URL=db, CANNASPIDER_DATA_DIR=str(tmp_path / "data"))
    result = run_scrapy("check", env=env, timeout=300)
    assert result.returncode == 0, result.stderr[-4000:]
    assert result.stderr.rstrip().endswith("OK")
    assert "Ran 15 contracts" in result.stderr  # 5 callbacks, 3 contracts each
    assert sql("SELECT * FROM proxies") == before
