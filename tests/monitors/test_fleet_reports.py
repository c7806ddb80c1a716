"""Health shared by the fleet (issue 33): a crawl's report is a row of crawl_health_reports beside
its local file, and /api/health shows the newest report of each spider on every node."""

from __future__ import annotations

import json
import socket

import pytest

from tests.helpers import http
from tests.monitors.conftest import run_health
from tests.web.conftest import TOKEN, Service


def test_the_report_is_a_row_as_well_as_a_file(tmp_path, db, sql):
    report = run_health({"cannaspider/graphql_failure/blocked": 4}, tmp_path, db)
    ((spider, host, ok, blocks, stored),) = sql("SELECT spider, host, ok, blocks, report FROM crawl_health_reports")
    assert (spider, host, ok) == ("product_resync", socket.gethostname(), report["ok"])
    assert blocks == sum(report["blocks_per_proxy"].values()) == 4
    assert stored == json.loads(json.dumps(report, default=str))


def test_an_unreachable_database_keeps_the_local_report(tmp_path, caplog):
    report = run_health({}, tmp_path, "postgresql://nobody:pw@127.0.0.1:1/none?connect_timeout=1")
    assert report["spider"] == "product_resync"  # written to its file all the same
    said = [r.getMessage() for r in caplog.records if "not stored in the database" in r.getMessage()]
    assert len(said) == 1 and "pw" not in said[0]


@pytest.mark.integration
def test_api_health_shows_every_nodes_crawls(tmp_path, db, sql):
    run_health({}, tmp_path / "here", db)  # this node: healthy
    other = run_health({"cannaspider/stale_hash_fallbacks": 2}, tmp_path / "there", db)
    # the second crawl ran on another node: its row says so (a node is the host its report names)
    sql("UPDATE crawl_health_reports SET host = 'node-b' WHERE id = (SELECT max(id) FROM crawl_health_reports)")
    with Service(db, TOKEN) as service:
        crawls = http("GET", service.base + "/api/health").json()["crawls"]
        page = http("GET", service.base + "/dashboard/health").text
    by_host = {c["host"]: c for c in crawls}
    assert set(by_host) == {socket.gethostname(), "node-b"}
    assert by_host[socket.gethostname()]["ok"] and not by_host["node-b"]["ok"]
    assert by_host["node-b"]["finished_at"][:19] == other["finished_at"][:19]
    assert "node-b" in page and socket.gethostname() in page
