"""The team's own page per keyword and locale (migrations/045_own_pages_progress.sql): set by the
keywords file (`ownPage`) or the API, crawled with the locale's competitors, compared with them
(gap.py). This module is its storage: the statements the import (sync), the API and the job
(async) run, and the gap's answer as GET /api/keywords/{id}/gap serves it.

A URL set again unchanged keeps its crawl and gap; a new URL starts without them (the old page's
results say nothing about the new one), and so does a page whose crawl has not run yet: its gap
says `not_crawled` rather than being empty.
"""

from __future__ import annotations

import json
from typing import Any

from psycopg import AsyncConnection

# Set (or change) the URL: its crawl fields and gap are kept only when the URL is the same.
SET_OWN_PAGE = """
INSERT INTO keyword_own_pages AS w (keyword_id, locale, url)
VALUES (%(keyword_id)s, %(locale)s, %(url)s)
ON CONFLICT (keyword_id, locale) DO UPDATE
   SET url = EXCLUDED.url, set_at = now(), crawl = NULL, gap = NULL
 WHERE w.url IS DISTINCT FROM EXCLUDED.url
RETURNING url
"""
DELETE_OWN_PAGE = "DELETE FROM keyword_own_pages WHERE keyword_id = %(keyword_id)s AND locale = %(locale)s"
GET_OWN_PAGE = """
SELECT url, set_at, crawl, gap FROM keyword_own_pages WHERE keyword_id = %(keyword_id)s AND locale = %(locale)s
"""
OWN_PAGES_OF = "SELECT locale, url FROM keyword_own_pages WHERE keyword_id = %s ORDER BY locale"

# The crawl's fields, written only if the URL is still the one crawled (a PUT during the crawl wins)
SAVE_CRAWL = """
UPDATE keyword_own_pages SET crawl = %(crawl)s::jsonb, gap = NULL
 WHERE keyword_id = %(keyword_id)s AND locale = %(locale)s AND url = %(url)s
"""
SAVE_GAP = """
UPDATE keyword_own_pages SET gap = %(gap)s::jsonb
 WHERE keyword_id = %(keyword_id)s AND locale = %(locale)s AND url = %(url)s
"""

# Our page's corpus id in a locale, kept by persistence.DROP_UNREFERENCED like a competitor's
OWN_CORPUS_ID = """
SELECT (w.crawl ->> 'corpusId')::bigint FROM keyword_own_pages w
 WHERE w.keyword_id = %(keyword_id)s AND w.locale = %(locale)s AND jsonb_typeof(w.crawl -> 'corpusId') = 'number'
"""

# Our page as the profile's refresh reads it: its URL, crawl fields and corpus (null: none)
OWN_STATE = """
SELECT jsonb_build_object(
           'url', w.url, 'crawl', w.crawl,
           'corpus', (SELECT jsonb_build_object('url', o.url, 'lang', o.lang, 'title', o.title, 'text', o.main_text,
                                                'headings', o.headings, 'words', o.words)
                        FROM onpage_corpora o
                       WHERE o.keyword_id = w.keyword_id AND o.locale = w.locale
                         AND jsonb_typeof(w.crawl -> 'corpusId') = 'number'
                         AND o.id = (w.crawl ->> 'corpusId')::bigint))
  FROM keyword_own_pages w WHERE w.keyword_id = k.id AND w.locale = %(locale)s
"""

NOT_CRAWLED = "our page has not been crawled since it was set: crawl_onpage crawls it with the competitors"


async def set_url(conn: AsyncConnection, keyword_id: int, locale: str, url: str) -> bool:
    """Set our page's URL in a locale; True when it changed (its crawl and gap reset)."""
    cur = await conn.execute(SET_OWN_PAGE, {"keyword_id": keyword_id, "locale": locale, "url": url})
    return cur.rowcount == 1


async def delete(conn: AsyncConnection, keyword_id: int, locale: str) -> bool:
    cur = await conn.execute(DELETE_OWN_PAGE, {"keyword_id": keyword_id, "locale": locale})
    return cur.rowcount == 1


async def get(conn: AsyncConnection, keyword_id: int, locale: str) -> dict[str, Any] | None:
    """{url, setAt, crawl, gap} of our page in a locale, or None."""
    row = await (await conn.execute(GET_OWN_PAGE, {"keyword_id": keyword_id, "locale": locale})).fetchone()
    if row is None:
        return None
    url, set_at, crawl, gap = row
    return {"url": url, "setAt": set_at.isoformat(), "crawl": crawl, "gap": gap}


async def of_keyword(conn: AsyncConnection, keyword_id: int) -> dict[str, str]:
    """{locale: our page's URL} of a keyword."""
    return {locale: url for locale, url in await (await conn.execute(OWN_PAGES_OF, (keyword_id,))).fetchall()}


async def save_crawl(conn: AsyncConnection, keyword_id: int, locale: str, url: str, crawl: dict[str, Any]) -> bool:
    """Our page's crawl fields (its gap cleared, recomputed with the profile); False when its URL
    changed during the crawl."""
    cur = await conn.execute(
        SAVE_CRAWL, {"keyword_id": keyword_id, "locale": locale, "url": url, "crawl": json.dumps(crawl)}
    )
    return cur.rowcount == 1


async def save_gap(conn: AsyncConnection, keyword_id: int, locale: str, url: str, gap: dict[str, Any]) -> None:
    await conn.execute(
        SAVE_GAP,
        {"keyword_id": keyword_id, "locale": locale, "url": url, "gap": json.dumps(gap, ensure_ascii=False)},
    )


def answer(keyword_id: int, keyword: str, locale: str, own: dict[str, Any]) -> dict[str, Any]:
    """GET /api/keywords/{id}/gap's answer from our page's row (get())."""
    gap = own["gap"]
    if gap is None:
        crawl = own["crawl"] or {}
        gap = {
            "available": False,
            "reason": NOT_CRAWLED,
            "ownPage": {
                "url": own["url"],
                "status": crawl.get("crawlStatus") or "not_crawled",
                "httpStatus": crawl.get("crawlHttpStatus"),
                "crawledAt": crawl.get("crawledAt"),
                "error": crawl.get("crawlError"),
                "lang": None,
                "otherLanguage": False,
            },
        }
    return {"keywordId": keyword_id, "keyword": keyword, "locale": locale, "setAt": own["setAt"], **gap}
