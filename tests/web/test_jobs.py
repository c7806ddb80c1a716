"""GET /api/jobs and /dashboard/jobs over real crawl_jobs rows (migration 044): every node's jobs,
the failed ones with their exit code and reason, each node's summary, and a bad filter a 422 with
the reason."""

from __future__ import annotations

import json

import pytest

from tests.httpclient import http

pytestmark = pytest.mark.integration  # the HTTP service (tests/tiers.py)


def job(sql, host, code, *, job_id=None, error=None, minutes_ago=1, spider="product_resync"):
    sql(
        "INSERT INTO crawl_jobs (job, spider, host, pid, arguments, started_at, finished_at, exit_code, finish_reason,"
        " error, log_file) VALUES (%s, %s, %s, 4242, %s, now() - %s * interval '1 minute' - interval '5 s',"
        " now() - %s * interval '1 minute', %s, %s, %s, %s)",
        (
            job_id,
            spider,
            host,
            json.dumps({"state": "AZ"}),
            minutes_ago,
            minutes_ago,
            code,
            None if code == 2 else "finished",
            error,
            f"/var/lib/scrapyd/logs/{job_id}.log" if job_id else None,
        ),
    )


@pytest.fixture
def jobs_sql(sql):
    job(sql, "node-a", 0, job_id="a1", minutes_ago=30)
    job(sql, "node-a", 2, job_id="a2", error="product_resync: follow must be 1 or 0, got 'maybe'", minutes_ago=20)
    job(sql, "node-b", 3, job_id="b1", error="1 unit(s) of work incomplete (the crawl ended: finished)")
    job(sql, "node-b", 0, spider="analytics_refresh", minutes_ago=10)  # a cron crawl: no Scrapyd job
    return sql


def test_every_nodes_jobs_with_why_the_failed_ones_failed(api, jobs_sql):
    reply = http("GET", f"{api.base}/api/jobs")
    assert reply.status == 200, reply.text
    body = reply.json()
    assert [(j["job"], j["host"], j["exit_code"], j["status"]) for j in body["jobs"]] == [
        ("b1", "node-b", 3, "failed"),
        (None, "node-b", 0, "succeeded"),
        ("a2", "node-a", 2, "failed"),
        ("a1", "node-a", 0, "succeeded"),
    ]
    failed = body["jobs"][2]
    assert failed["error"] == "product_resync: follow must be 1 or 0, got 'maybe'"
    assert failed["meaning"] == "bad arguments or no usable database" and failed["finish_reason"] is None
    assert failed["arguments"] == {"state": "AZ"} and failed["log_file"] == "/var/lib/scrapyd/logs/a2.log"
    assert [(n["host"], n["jobs"], n["failed"], n["last_exit_code"]) for n in body["nodes"]] == [
        ("node-a", 2, 1, 2),
        ("node-b", 2, 1, 3),
    ]
    # the filters
    only = http("GET", f"{api.base}/api/jobs?status=failed&host=node-a").json()["jobs"]
    assert [j["job"] for j in only] == ["a2"]
    assert [j["job"] for j in http("GET", f"{api.base}/api/jobs?exit_code=3").json()["jobs"]] == ["b1"]
    assert [j["job"] for j in http("GET", f"{api.base}/api/jobs?job=a1").json()["jobs"]] == ["a1"]
    assert len(http("GET", f"{api.base}/api/jobs?limit=1").json()["jobs"]) == 1
    # the page: the same jobs, the failed ones with their exit code and reason
    page = http("GET", f"{api.base}/dashboard/jobs?status=failed")
    assert page.status == 200
    assert 'data-job="a2" data-status="failed" data-exit="2"' in page.text
    assert "follow must be 1 or 0, got &#39;maybe&#39;" in page.text
    assert 'data-job="a1"' not in page.text
    assert 'data-host="node-b"' in page.text


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("status=crashed", "status"),
        ("exit_code=256", "exit_code"),
        ("exit_code=-1", "exit_code"),
        ("limit=0", "limit"),
        ("since=yesterday", "since"),
        ("until=2026-13-01", "until"),
    ],
)
def test_a_bad_filter_is_a_422_with_the_reason(api, query, field):
    for path in ("/api/jobs", "/dashboard/jobs"):
        reply = http("GET", f"{api.base}{path}?{query}")
        assert reply.status == 422, (path, reply.text)
        [error] = reply.json()["detail"]
        assert error["loc"] == ["query", field] and error["msg"], error


def test_jobs_are_in_the_openapi_description(api):
    schema = http("GET", f"{api.base}/openapi.json").json()
    params = {p["name"] for p in schema["paths"]["/api/jobs"]["get"]["parameters"]}
    assert params == {"host", "spider", "status", "exit_code", "job", "since", "until", "limit"}
    assert "422" in schema["paths"]["/api/jobs"]["get"]["responses"]
