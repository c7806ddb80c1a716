"""Our page per locale (PUT/DELETE/GET /api/keywords/{id}/own-page), its gap (GET …/gap and the
dashboard's page) and the on-page job's progress (GET …/progress), over the test database and the
HTTP service on loopback. The gap stored here is gap.compute's (what crawl_onpage stores); the
crawl that computes it is tests/firecrawl/test_own_page.py's."""

from __future__ import annotations

import json

import psycopg
import pytest

from cannaspider.firecrawl import gap, profile
from tests.firecrawl.test_gap import COMPETITORS, OK, OURS, SETTINGS, A, B
from tests.httpclient import http
from tests.web.conftest import TOKEN

pytestmark = pytest.mark.integration  # spawns (tests/tiers.py)

AUTH = {"Authorization": f"Bearer {TOKEN}"}
OUR_URL = "https://ours.example/"


@pytest.fixture
def keyword(db) -> int:
    with psycopg.connect(db, autocommit=True) as conn:
        return conn.execute(
            "INSERT INTO keywords (keyword, serp) VALUES ('huile cbd', %s::jsonb) RETURNING id",
            (json.dumps({"fr-FR": {"competitors": COMPETITORS}, "en-US": {"competitors": []}}),),
        ).fetchone()[0]


def put_own(api, k: int, url: str, locale: str = "fr-FR", headers=AUTH):
    return http("PUT", f"{api.base}/api/keywords/{k}/own-page?locale={locale}", {"url": url}, headers=headers)


def store_gap(db: str, k: int, crawl: dict, computed_gap: dict) -> None:
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute(
            "UPDATE keyword_own_pages SET crawl = %s::jsonb, gap = %s::jsonb WHERE keyword_id = %s",
            (json.dumps(crawl), json.dumps({"computedAt": "2026-12-06T20:00:00+00:00", **computed_gap}), k),
        )


def test_our_page_is_set_kept_changed_and_removed(api, keyword, sql):
    k = keyword
    reply = put_own(api, k, OUR_URL, locale="fr-fr")
    assert reply.status == 200, reply.text
    assert reply.json()["url"] == OUR_URL and reply.json()["locale"] == "fr-FR" and reply.json()["crawl"] is None
    sql('UPDATE keyword_own_pages SET crawl = \'{"crawlStatus": "ok"}\', gap = \'{"available": true}\'')
    # the same URL again keeps its crawl; another one starts without it
    assert put_own(api, k, OUR_URL).json()["crawl"] == {"crawlStatus": "ok"}
    assert put_own(api, k, "https://ours.example/v2").json()["crawl"] is None
    assert sql("SELECT url, crawl, gap FROM keyword_own_pages") == [("https://ours.example/v2", None, None)]
    got = http("GET", f"{api.base}/api/keywords/{k}/own-page?locale=fr-FR").json()
    assert got["url"] == "https://ours.example/v2"
    assert http("DELETE", f"{api.base}/api/keywords/{k}/own-page?locale=fr-FR", headers=AUTH).status == 204
    assert sql("SELECT count(*) FROM keyword_own_pages") == [(0,)]
    again = http("DELETE", f"{api.base}/api/keywords/{k}/own-page?locale=fr-FR", headers=AUTH)
    assert again.status == 404 and "has no own page in fr-FR" in again.json()["detail"]


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "detail"),
    [
        ("PUT", "/api/keywords/{k}/own-page?locale=fr_FR_x", {"url": OUR_URL}, 422, "locale must look like 'fr-FR'"),
        ("PUT", "/api/keywords/{k}/own-page?locale=fr-FR", {"url": "ftp://x.example/"}, 422, "pattern"),
        ("PUT", "/api/keywords/{k}/own-page?locale=de-DE", {"url": OUR_URL}, 404, "has no SERP in locale de-DE"),
        ("PUT", "/api/keywords/999999/own-page?locale=fr-FR", {"url": OUR_URL}, 404, "keyword 999999 does not exist"),
        ("GET", "/api/keywords/{k}/gap?locale=xx-", None, 422, "locale must look like 'fr-FR'"),
        ("GET", "/api/keywords/{k}/gap?locale=fr-FR", None, 404, "has no own page in fr-FR: PUT /api/keywords/"),
        ("GET", "/api/keywords/{k}/gap?locale=de-DE", None, 404, "has no SERP in locale de-DE"),
        ("GET", "/api/keywords/999999/progress", None, 404, "keyword 999999 does not exist"),
    ],
)
def test_bad_requests_say_why(api, keyword, method, path, body, status, detail):
    reply = http(method, api.base + path.format(k=keyword), body, headers=AUTH)
    said = reply.json()["detail"]
    if status == 422:  # the documented shape of every 422: a list of {loc, msg, type}
        said = said[0]["msg"]
    assert reply.status == status and detail in said, reply.text


def test_writes_need_the_token(api, keyword):
    assert put_own(api, keyword, OUR_URL, headers={}).status == 401
    assert http("DELETE", f"{api.base}/api/keywords/{keyword}/own-page?locale=fr-FR").status == 401


def test_a_page_of_ours_not_crawled_yet_says_so(api, keyword):
    put_own(api, keyword, OUR_URL)
    body = http("GET", f"{api.base}/api/keywords/{keyword}/gap?locale=fr-FR").json()
    assert body["available"] is False and "not been crawled" in body["reason"]
    assert body["ownPage"] == {
        "url": OUR_URL,
        "status": "not_crawled",
        "httpStatus": None,
        "crawledAt": None,
        "error": None,
        "lang": None,
        "otherLanguage": False,
    }


def test_the_gap_as_stored_and_on_the_dashboard(api, keyword, db):
    put_own(api, keyword, OUR_URL)
    computed = profile.compute("fr-FR", COMPETITORS, {A.url: A, B.url: B}, min_pages=2, max_terms=200)
    serp = [gap.SerpPage(A.url, 1, A, 14, [2, 2]), gap.SerpPage(B.url, 2, B, 13, [2])]
    value = gap.compute(computed, serp, gap.OwnPage(OUR_URL, OK, OURS, 12, [1]), SETTINGS)
    store_gap(db, keyword, OK, value)
    reply = http("GET", f"{api.base}/api/keywords/{keyword}/gap?locale=fr-FR")
    assert reply.status == 200, reply.text
    body = reply.json()
    assert body["keyword"] == "huile cbd" and body["available"] is True
    assert [t["term"] for t in body["missing"]] == ["effets", "posologie"]
    assert body["schemaTypes"]["missing"][0]["type"] == "FAQPage"
    assert body["wordCount"]["ours"] == 12
    page = http("GET", f"{api.base}/dashboard/keywords/{keyword}/gap?locale=fr-FR")
    assert page.status == 200
    assert 'data-gap-term="posologie"' in page.text and 'data-missing-type="FAQPage"' in page.text
    assert 'data-heading-term="posologie"' in page.text
    listing = http("GET", f"{api.base}/dashboard/keywords").text
    assert f'href="/dashboard/keywords/{keyword}/gap?locale=fr-FR"' in listing and "our page: gap" in listing


def test_a_blocked_page_of_ours_says_so_on_the_page_too(api, keyword, db):
    put_own(api, keyword, OUR_URL)
    crawl = {"crawlStatus": "blocked", "crawlHttpStatus": 403, "crawlError": "cloudflare challenge page (HTTP 403)"}
    computed = profile.compute("fr-FR", COMPETITORS, {A.url: A, B.url: B}, min_pages=2, max_terms=200)
    store_gap(db, keyword, crawl, gap.compute(computed, [], gap.OwnPage(OUR_URL, crawl), SETTINGS))
    body = http("GET", f"{api.base}/api/keywords/{keyword}/gap?locale=fr-FR").json()
    assert body["available"] is False and body["reason"].startswith("our page is blocked (HTTP 403)")
    assert body["ownPage"]["status"] == "blocked" and body["missing"] == []
    page = http("GET", f"{api.base}/dashboard/keywords/{keyword}/gap?locale=fr-FR").text
    assert 'data-gap="unavailable"' in page and "our page is blocked (HTTP 403)" in page


def test_progress_idle_queued_running_done(api, keyword, sql):
    url = f"{api.base}/api/keywords/{keyword}/progress"
    assert http("GET", url).json()["state"] == "idle"
    task = http("POST", f"{api.base}/api/tasks", {"role": "crawl_onpage", "keyword_id": keyword}, headers=AUTH)
    assert task.status == 201, task.text
    body = http("GET", url).json()
    assert body["state"] == "queued" and body["task"]["status"] == "pending" and body["pollAfterS"] == 2.0
    sql(
        "INSERT INTO onpage_progress (keyword_id, state, pages_total, pages_done, locales_total, started_at,"
        " updated_at) VALUES (%s, 'running', 5, 2, 1, now(), now())",
        (keyword,),
    )
    body = http("GET", url).json()
    assert body["state"] == "running" and body["pages"] == {"done": 2, "total": 5}
    sql(
        "UPDATE onpage_progress SET state = 'done', pages_done = 5, locales_done = 1, crawled = 3, blocked = 1,"
        " failed = 1, finished_at = now()"
    )
    sql("UPDATE worker_tasks SET status = 'completed'")
    body = http("GET", url).json()
    assert body["state"] == "done" and body["totals"] == {"crawled": 3, "blocked": 1, "failed": 1}
    assert body["pollAfterS"] is None and body["task"] is None and body["finishedAt"]


def test_openapi_describes_the_routes(api):
    spec = http("GET", api.base + "/openapi.json").json()
    paths = spec["paths"]
    assert set(paths["/api/keywords/{keyword_id}/own-page"]) == {"put", "delete", "get"}
    assert paths["/api/keywords/{keyword_id}/own-page"]["put"]["security"] == [{"HTTPBearer": []}]
    assert "422" in paths["/api/keywords/{keyword_id}/gap"]["get"]["responses"]
    assert "/api/keywords/{keyword_id}/progress" in paths


def test_a_running_job_nothing_wrote_for_long_is_interrupted(api, keyword, sql):
    sql(
        "INSERT INTO onpage_progress (keyword_id, state, pages_total, started_at, updated_at)"
        " VALUES (%s, 'running', 5, now() - interval '1 hour', now() - interval '16 minutes')",
        (keyword,),
    )
    body = http("GET", f"{api.base}/api/keywords/{keyword}/progress").json()
    assert body["state"] == "interrupted" and body["pollAfterS"] is None
    # its task retried: queued again
    sql(
        "INSERT INTO worker_tasks (role, payload)"
        " VALUES ('crawl_onpage', jsonb_build_object('keyword_id', %s::bigint))",
        (keyword,),
    )
    assert http("GET", f"{api.base}/api/keywords/{keyword}/progress").json()["state"] == "queued"
