"""GET /api/keywords/{id}/profile and the keyword pages of the dashboard, over the test database
holding a profile computed by profile.compute (what crawl_onpage stores)."""

from __future__ import annotations

import json

import psycopg
import pytest

from cannaspider import settings
from cannaspider.firecrawl.profile import ProfilePage, compute
from tests.httpclient import http

pytestmark = pytest.mark.integration  # spawns (tests/tiers.py)

PAGES = [
    ProfilePage("https://a.example/", "fr", "Huile de CBD", "huile de cbd bio. chanvre", ["Huile de CBD"]),
    ProfilePage("https://b.example/", "fr", "Chanvre", "le chanvre et l'huile de cbd", []),
]
COMPETITORS = [
    {"url": "https://a.example/", "position": 1, "crawlStatus": "ok"},
    {"url": "https://b.example/", "position": 2, "crawlStatus": "ok"},
    {"url": "https://shield.example/", "position": 3, "crawlStatus": "blocked", "crawlHttpStatus": 403},
]


@pytest.fixture
def keyword(db) -> tuple[int, dict]:
    computed = compute(
        "fr-FR",
        COMPETITORS,
        {p.url: p for p in PAGES},
        min_pages=settings.PROFILE_MIN_PAGES,
        max_terms=settings.PROFILE_MAX_TERMS,
    )
    with psycopg.connect(db, autocommit=True) as conn:
        k = conn.execute(
            "INSERT INTO keywords (keyword, serp) VALUES ('huile cbd', %s::jsonb) RETURNING id",
            (json.dumps({"fr-FR": {"competitors": COMPETITORS}, "en-US": {"competitors": []}}),),
        ).fetchone()[0]
        value = {"keywordId": k, "keyword": "huile cbd", "computedAt": "2026-12-01T22:00:00+00:00", **computed}
        conn.execute(
            "INSERT INTO keyword_profiles (keyword_id, locale, profile) VALUES (%s, 'fr-FR', %s::jsonb)",
            (k, json.dumps(value)),
        )
    return k, value


def test_the_profile_as_stored(api, keyword):
    k, value = keyword
    reply = http("GET", f"{api.base}/api/keywords/{k}/profile?locale=fr-FR")
    assert reply.status == 200, reply.text
    body = reply.json()
    assert body == value
    terms = {t["term"]: t for t in body["terms"]}
    assert terms["huile de cbd"]["pages"] == 2 and "le" not in terms
    assert body["completeness"]["blocked"] == [
        {"url": "https://shield.example/", "httpStatus": 403, "action": "to retry through a proxy"}
    ]
    # the locale is normalized as the keywords file's are
    assert http("GET", f"{api.base}/api/keywords/{k}/profile?locale=fr-fr").json() == value


@pytest.mark.parametrize(
    ("path", "status", "detail"),
    [
        ("/api/keywords/{k}/profile?locale=fr_FR_x", 422, "locale must look like 'fr-FR'"),
        ("/api/keywords/{k}/profile?locale=de-DE", 404, "has no SERP in locale de-DE (its locales: en-US, fr-FR)"),
        ("/api/keywords/{k}/profile?locale=en-US", 404, "has no semantic profile in en-US yet"),
        ("/api/keywords/999999/profile?locale=fr-FR", 404, "keyword 999999 does not exist"),
    ],
)
def test_bad_requests_say_why(api, keyword, path, status, detail):
    reply = http("GET", api.base + path.format(k=keyword[0]))
    said = reply.json()["detail"]
    if status == 422:  # the documented shape of every 422: a list of {loc, msg, type}
        said = said[0]["msg"]
    assert reply.status == status and detail in said, reply.text


def test_invalid_id_or_missing_locale_is_a_422(api, keyword):
    assert http("GET", f"{api.base}/api/keywords/0/profile?locale=fr-FR").status == 422
    assert http("GET", f"{api.base}/api/keywords/abc/profile?locale=fr-FR").status == 422
    assert http("GET", f"{api.base}/api/keywords/{2**63}/profile?locale=fr-FR").status == 422  # beyond bigint
    missing = http("GET", f"{api.base}/api/keywords/{keyword[0]}/profile")
    assert missing.status == 422 and "locale" in missing.text


def test_openapi_documents_the_route(api):
    spec = http("GET", f"{api.base}/openapi.json").json()
    op = spec["paths"]["/api/keywords/{keyword_id}/profile"]["get"]
    assert {p["name"] for p in op["parameters"]} == {"keyword_id", "locale"}
    assert "404" in op["responses"] and "ProfileOut" in json.dumps(op["responses"]["200"])
    assert "TermOut" in spec["components"]["schemas"]


def test_dashboard_pages_show_the_profile(api, keyword):
    k, _ = keyword
    listing = http("GET", f"{api.base}/dashboard/keywords")
    assert listing.status == 200
    assert f'href="/dashboard/keywords/{k}/profile?locale=fr-FR"' in listing.text
    assert "(2/3 pages)" in listing.text and 'en-US <span class="muted">(not crawled)' in listing.text
    page = http("GET", f"{api.base}/dashboard/keywords/{k}/profile?locale=fr-FR")
    assert page.status == 200
    assert "Blocked: to retry through a proxy" in page.text and "https://shield.example/" in page.text
    assert '<tr data-term="huile de cbd">' in page.text
    assert http("GET", f"{api.base}/dashboard/keywords/{k}/profile?locale=de-DE").status == 404
