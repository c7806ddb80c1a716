"""The SQL merge into keywords.serp[locale].competitors[i], on the real database."""

from __future__ import annotations

import asyncio
import json
import threading
import time

import psycopg
import pytest

from cannaspider.firecrawl import persistence
from tests.firecrawl.conftest import add_keyword, serp_of

SERP = {
    "fr-FR": {
        "fetchedAt": "2026-11-01",
        "competitors": [
            {"url": "https://a.example/", "position": 1, "title": "A", "snippet": "s"},
            {"url": "https://b.example/", "position": 2, "title": "B", "crawlStatus": "ok", "onpage": {"wordCount": 9}},
            "not an object",
            {"position": 4, "title": "no url"},
        ],
    },
    "en-US": {"competitors": [{"url": "https://a.example/", "position": 3}]},
}


def apply(db_url: str, keyword_id: int, locale: str, updates: dict) -> bool:
    async def run():
        async with await psycopg.AsyncConnection.connect(db_url, autocommit=True) as conn:
            return await persistence.merge_locale(conn, keyword_id, locale, updates)

    return asyncio.run(run())


def fields(status: str, http: int | None = None, onpage: dict | None = None) -> dict:
    return persistence.crawl_fields(status, http, "2026-11-30T10:00:00Z", None if status == "ok" else "why", onpage)


def test_only_crawl_fields_of_matching_competitors_change_in_that_locale_only(db):
    k = add_keyword(db, "kw", SERP)
    assert apply(
        db,
        k,
        "fr-FR",
        {"https://a.example/": fields("ok", 200, {"wordCount": 3}), "https://b.example/": fields("blocked", 403)},
    )
    serp = serp_of(db, k)
    assert serp["en-US"] == SERP["en-US"]  # same URL in another locale: untouched
    a, b, scalar, no_url = serp["fr-FR"]["competitors"]
    assert a == {
        **SERP["fr-FR"]["competitors"][0],
        "crawlStatus": "ok",
        "crawlHttpStatus": 200,
        "crawledAt": "2026-11-30T10:00:00Z",
        "onpage": {"wordCount": 3},
    }
    # the crawl fields go as a group: the old onpage of a now-blocked page does not linger
    assert b == {
        "url": "https://b.example/",
        "position": 2,
        "title": "B",
        "crawlStatus": "blocked",
        "crawlHttpStatus": 403,
        "crawledAt": "2026-11-30T10:00:00Z",
        "crawlError": "why",
    }
    assert scalar == "not an object" and no_url == {"position": 4, "title": "no url"}
    assert serp["fr-FR"]["fetchedAt"] == "2026-11-01"


def test_missing_locale_or_keyword_merges_nothing(db):
    k = add_keyword(db, "kw", SERP)
    assert not apply(db, k, "de-DE", {"https://a.example/": fields("ok")})
    assert not apply(db, k + 1, "fr-FR", {"https://a.example/": fields("ok")})
    assert serp_of(db, k) == SERP


@pytest.mark.parametrize("other_first", [True, False])
def test_a_concurrent_write_to_another_locale_is_never_lost(db, other_first):
    """Another connection rewrites en-US (read-modify-write of the whole locale, in a transaction
    held open) while the merge runs on fr-FR: both changes survive, whichever commits first."""
    k = add_keyword(db, "kw", SERP)
    new_en = {"competitors": [{"url": "https://c.example/", "position": 1}], "fetchedAt": "2026-11-30"}
    holding = threading.Event()
    release = threading.Event()

    def other_writer():
        with psycopg.connect(db) as conn:
            conn.execute(
                "UPDATE keywords SET serp = jsonb_set(serp, '{en-US}', %s::jsonb) WHERE id = %s",
                (psycopg.types.json.Jsonb(new_en), k),
            )
            holding.set()
            release.wait(10)
            conn.commit()

    if other_first:
        writer = threading.Thread(target=other_writer)
        writer.start()
        holding.wait(10)
        merged: list[bool] = []
        merger = threading.Thread(
            target=lambda: merged.append(apply(db, k, "fr-FR", {"https://a.example/": fields("ok")}))
        )
        merger.start()
        time.sleep(0.5)
        assert merger.is_alive()  # waiting for the row lock, not overwriting
        release.set()
        writer.join(10)
        merger.join(10)
        assert merged == [True]
    else:
        with psycopg.connect(db) as conn:  # our merge holds the row, the other writer waits
            _merge_in(conn, k)
            writer = threading.Thread(target=other_writer)
            writer.start()
            time.sleep(0.5)
            assert not holding.is_set()
            conn.commit()
        release.set()
        writer.join(10)
    serp = serp_of(db, k)
    assert serp["en-US"] == new_en
    assert serp["fr-FR"]["competitors"][0]["crawlStatus"] == "ok"
    assert serp["fr-FR"]["competitors"][1]["onpage"] == {"wordCount": 9}


def _merge_in(sync_conn, keyword_id):
    """The same statement, inside the caller's open transaction."""
    sync_conn.execute(
        persistence.MERGE_LOCALE,
        {
            "keyword_id": keyword_id,
            "locale": "fr-FR",
            "updates": json.dumps({"https://a.example/": fields("ok")}),
            "crawl_fields": list(persistence.CRAWL_FIELDS),
        },
    )


def test_snapshots_without_crawl_fields_stay_valid(db):
    plain = {"en-US": {"competitors": [{"url": "https://a.example/", "position": 1}]}}
    k = add_keyword(db, "plain", plain)
    assert apply(db, k, "en-US", {})
    assert serp_of(db, k) == plain
