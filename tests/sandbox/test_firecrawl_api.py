"""The Firecrawl-like v2 API, checked against responses captured from a real self-hosted
instance (tests/fixtures/firecrawl-v2; docs/firecrawl.md explains them)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.helpers import holds_for
from tests.httpclient import http

pytestmark = pytest.mark.integration  # spawns (tests/tiers.py)

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "firecrawl-v2"


def fixture(name: str) -> dict:
    return json.loads((FIXTURES / name).read_text())


def shape(value):
    """The structure of a JSON value: keys and types, not contents."""
    if isinstance(value, dict):
        return {k: shape(v) for k, v in value.items()}
    if isinstance(value, list):
        return [shape(value[0])] if value else []
    return type(value).__name__


def body(urls, **extra):
    return {
        "urls": urls,
        "formats": ["rawHtml"],
        "onlyMainContent": False,
        "maxAge": 0,
        "timeout": 30000,
        "proxy": "basic",
        "ignoreInvalidURLs": True,
        **extra,
    }


def start(sandbox, urls, **extra):
    reply = http("POST", sandbox.urls.firecrawl + "/v2/batch/scrape", body(urls, **extra))
    assert reply.status == 200, reply.text
    return reply.json()


def wait_done(sandbox, job_id, timeout=20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = http("GET", f"{sandbox.urls.firecrawl}/v2/batch/scrape/{job_id}").json()
        if status["status"] != "scraping":
            return status
        time.sleep(0.1)
    raise AssertionError("batch did not finish")


def page(sandbox, name):
    return f"{sandbox.urls.base}/competitors/{name}"


def test_post_answers_like_the_real_server(sandbox):
    reply = start(sandbox, [page(sandbox, "page-a.html"), page(sandbox, "page-b.html")])
    assert shape(reply) == shape(fixture("01_post_batch_scrape.json"))
    assert reply["url"].startswith("https://")  # the real server says https even on plain http


def test_completed_batch_matches_the_capture_and_renders_javascript(sandbox):
    job = start(sandbox, [page(sandbox, "page-a.html"), page(sandbox, "page-b.html")])
    done = wait_done(sandbox, job["id"])
    real = fixture("03_get_completed.json")
    assert shape(done)["data"][0]["metadata"].keys() >= {
        "scrapeId",
        "sourceURL",
        "url",
        "statusCode",
        "contentType",
        "proxyUsed",
        "creditsUsed",
    }
    assert set(done) == set(real)  # no `next` once completed
    assert (done["status"], done["completed"], done["total"]) == ("completed", 2, 2)
    docs = {d["metadata"]["sourceURL"]: d for d in done["data"]}
    assert '<p id="js">rendered-by-js</p>' in docs[page(sandbox, "page-b.html")]["rawHtml"].split("</main>")[1]
    assert docs[page(sandbox, "page-a.html")]["metadata"]["title"] == "Competitor A - Best Widgets 2025"


def test_in_progress_has_next_that_ignores_skip(sandbox):
    http("POST", sandbox.urls.base + "/_sandbox/slow", {"seconds": 2})
    job = start(sandbox, [page(sandbox, "page-a.html"), page(sandbox, "slow.html")])
    time.sleep(0.5)
    status = http("GET", f"{sandbox.urls.firecrawl}/v2/batch/scrape/{job['id']}").json()
    assert status["status"] == "scraping" and "?skip=" in status["next"]
    assert set(status) == set(fixture("23_get_in_progress_with_next.json"))
    again = http("GET", f"{sandbox.urls.firecrawl}/v2/batch/scrape/{job['id']}?skip=1").json()
    assert [d["metadata"]["sourceURL"] for d in again["data"]] == [d["metadata"]["sourceURL"] for d in status["data"]]
    assert wait_done(sandbox, job["id"])["completed"] == 2


def test_proxy_basic_keeps_403_and_429_and_drops_the_empty_page_from_total(sandbox):
    urls = [page(sandbox, n) for n in ("page-a.html", "blocked.html", "ratelimited.html", "empty.html")]
    done = wait_done(sandbox, start(sandbox, urls)["id"])
    assert (done["completed"], done["total"]) == (3, 3)  # 4 submitted, the empty one failed and left total
    by_url = {d["metadata"]["sourceURL"]: d["metadata"] for d in done["data"]}
    assert by_url[urls[1]]["statusCode"] == 403 and by_url[urls[1]]["error"] == "Forbidden"
    assert by_url[urls[2]]["statusCode"] == 429 and by_url[urls[2]]["error"] == "Too Many Requests"
    assert urls[3] not in by_url


def test_errors_endpoint_lists_the_failed_pages_like_the_capture(sandbox):
    urls = [page(sandbox, "page-a.html"), page(sandbox, "empty.html")]
    job = start(sandbox, urls)
    wait_done(sandbox, job["id"])
    errors = http("GET", f"{sandbox.urls.firecrawl}/v2/crawl/{job['id']}/errors").json()
    assert shape(errors) == shape(fixture("06_errors_empty_page_proxy_basic.json"))
    assert [(e["url"], e["code"]) for e in errors["errors"]] == [(urls[1], "SCRAPE_ALL_ENGINES_FAILED")]
    assert http("GET", f"{sandbox.urls.firecrawl}/v2/batch/scrape/{job['id']}/errors").status == 404


def test_proxy_auto_loses_the_403_page_entirely(sandbox):
    urls = [page(sandbox, "page-a.html"), page(sandbox, "blocked.html")]
    reply = http(
        "POST", sandbox.urls.firecrawl + "/v2/batch/scrape", {"urls": urls, "formats": ["rawHtml"], "timeout": 30000}
    )
    done = wait_done(sandbox, reply.json()["id"])
    real = fixture("07_get_completed_403_proxy_auto.json")
    assert (done["completed"], done["total"]) == (real["completed"], real["total"]) == (1, 1)
    errors = http("GET", f"{sandbox.urls.firecrawl}/v2/crawl/{reply.json()['id']}/errors").json()["errors"]
    assert [e["code"] for e in errors] == ["SCRAPE_ALL_ENGINES_FAILED"]


def test_404_target_is_a_doc_even_with_proxy_auto(sandbox):
    reply = http(
        "POST",
        sandbox.urls.firecrawl + "/v2/batch/scrape",
        {"urls": [page(sandbox, "missing.html")], "formats": ["rawHtml"]},
    )
    done = wait_done(sandbox, reply.json()["id"])
    assert done["data"][0]["metadata"]["statusCode"] == 404
    assert done["data"][0]["metadata"]["error"] == "Not Found"


def test_unreachable_targets_fail_and_leave_total(sandbox):
    urls = [page(sandbox, "page-a.html"), "http://127.0.0.1:9/refused.html", "http://unresolvable.invalid/x.html"]
    job = start(sandbox, urls)
    done = wait_done(sandbox, job["id"])
    assert (done["completed"], done["total"]) == (1, 1)
    errors = http("GET", f"{sandbox.urls.firecrawl}/v2/crawl/{job['id']}/errors").json()["errors"]
    assert shape(errors[0]) == shape(fixture("10_errors_unreachable.json")["errors"][0])
    assert {e["code"] for e in errors} == {"SCRAPE_ALL_ENGINES_FAILED"}


def test_page_slower_than_timeout_is_scrape_timeout(sandbox):
    http("POST", sandbox.urls.base + "/_sandbox/slow", {"seconds": 3})
    job = start(sandbox, [page(sandbox, "page-a.html"), page(sandbox, "slow.html")], timeout=1000)
    done = wait_done(sandbox, job["id"])
    assert (done["completed"], done["total"]) == (1, 1)
    errors = http("GET", f"{sandbox.urls.firecrawl}/v2/crawl/{job['id']}/errors").json()["errors"]
    assert [(e["code"], e["error"]) for e in errors] == [("SCRAPE_TIMEOUT", "Scrape timed out")]


def test_invalid_urls_reject_the_batch_unless_ignored(sandbox):
    urls = [f"{sandbox.urls.base}/competitors/blocked", page(sandbox, "page-a.html")]
    strict = http(
        "POST", sandbox.urls.firecrawl + "/v2/batch/scrape", {"urls": urls, "formats": ["rawHtml"], "timeout": 30000}
    )
    assert strict.status == 400
    assert strict.json() == {**fixture("15_post_400_invalid_url.json")}
    lenient = start(
        sandbox,
        ["http://localhost:8765/page-a.html", "not a url", "ftp://example.com/x.html", page(sandbox, "page-a.html")],
    )
    assert lenient["invalidURLs"] == fixture("16_post_ignore_invalid_urls_true.json")["invalidURLs"]


@pytest.mark.parametrize(
    "extra, capture",
    [
        ({"waitForTimeout": 5}, "17_post_400_unknown_key.json"),
        ({"timeout": 30000, "waitFor": 20000}, "18_post_400_waitfor.json"),
    ],
)
def test_strict_schema_400s_match_the_capture(sandbox, extra, capture):
    reply = http(
        "POST",
        sandbox.urls.firecrawl + "/v2/batch/scrape",
        {"urls": [page(sandbox, "page-a.html")], "formats": ["rawHtml"], **extra},
    )
    assert reply.status == 400
    assert reply.json() == fixture(capture)


def test_cancel_then_status_cancelled(sandbox):
    http("POST", sandbox.urls.base + "/_sandbox/slow", {"seconds": 1.5})
    job = start(sandbox, [page(sandbox, "page-a.html"), page(sandbox, "slow.html")])
    cancel = http("DELETE", f"{sandbox.urls.firecrawl}/v2/batch/scrape/{job['id']}")
    assert cancel.json() == fixture("19_delete_cancel.json")
    status = http("GET", f"{sandbox.urls.firecrawl}/v2/batch/scrape/{job['id']}").json()
    assert status["status"] == "cancelled"
    # past the slow page's 1.5 s: a cancelled job stays cancelled, its pages never land
    holds_for(
        2.0,
        lambda: http("GET", f"{sandbox.urls.firecrawl}/v2/batch/scrape/{job['id']}").json()["status"] == "cancelled",
        "the job cancelled",
    )


def test_unknown_job_and_unknown_route(sandbox):
    reply = http("GET", f"{sandbox.urls.firecrawl}/v2/batch/scrape/00000000-0000-4000-8000-000000000000")
    assert reply.status == 404 and reply.json() == fixture("22_get_404_job_not_found.json")
    wrong = http("POST", sandbox.urls.firecrawl + "/v2/batch-scrape", {"urls": []})
    assert wrong.status == 404 and "<html>" in wrong.text  # /v2/batch-scrape, as some docs spell it, does not exist


def test_challenge_pages_are_served_for_classification(sandbox):
    job = start(sandbox, [page(sandbox, "incapsula.html"), page(sandbox, "js-only.html")])
    done = wait_done(sandbox, job["id"])
    html = {d["metadata"]["sourceURL"]: d["rawHtml"] for d in done["data"]}
    assert "Incapsula incident ID" in html[page(sandbox, "incapsula.html")]
    assert "Dispensary Deals Near You" in html[page(sandbox, "js-only.html")].split("</script>")[-1]


def test_api_key_and_redis_down(sandbox):
    fc = sandbox.urls.firecrawl
    try:
        http("POST", fc + "/_sandbox/state", {"api_key": "k-123"})
        assert http("POST", fc + "/v2/batch/scrape", body([page(sandbox, "page-a.html")])).status == 401
        ok = http(
            "POST",
            fc + "/v2/batch/scrape",
            body([page(sandbox, "page-a.html")]),
            headers={"Authorization": "Bearer k-123"},
        )
        assert ok.status == 200
        http("POST", fc + "/_sandbox/state", {"api_key": None, "down": True})
        down = http("POST", fc + "/v2/batch/scrape", body([page(sandbox, "page-a.html")]))
        assert down.status == 500 and down.json()["code"] == "UNKNOWN_ERROR"
    finally:
        http("POST", fc + "/_sandbox/state", {"api_key": None, "down": False})


def test_stalled_calls_answer_late_then_reset_restores_defaults(sandbox):
    fc = sandbox.urls.firecrawl
    try:
        state = http("POST", fc + "/_sandbox/state", {"stall": {"seconds": 1.0, "count": 1}}).json()
        assert state["stall"] == {"seconds": 1.0, "count": 1}
        t0 = time.monotonic()
        first = start(sandbox, [page(sandbox, "page-a.html")])
        assert time.monotonic() - t0 >= 1.0
        # only `count` calls stall: the one stall is spent, the next call goes straight through
        assert http("POST", fc + "/_sandbox/state", {}).json()["stall"] == {"seconds": 1.0, "count": 0}
        start(sandbox, [page(sandbox, "page-a.html")])
        http(
            "POST",
            fc + "/_sandbox/state",
            {"api_key": "k", "down": True, "hostile": True, "stall": {"seconds": 5, "count": 3}},
        )
        reset = http("POST", fc + "/_sandbox/state", {"reset": True}).json()
        assert reset == {
            "api_key_required": False,
            "down": False,
            "hostile": False,
            "queue_delay": 0.0,
            "stall": {"seconds": 0.0, "count": 0},
            "jobs": 0,
            "job_spans": [],
        }
        assert http("GET", f"{fc}/v2/batch/scrape/{first['id']}").status == 404  # jobs forgotten
    finally:
        http("POST", fc + "/_sandbox/state", {"reset": True})
