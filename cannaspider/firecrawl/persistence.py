"""The on-page crawl's persistence: crawl results merged into keywords.serp[locale].competitors
(merge_locale, SQL-side), and corpora and semantic profiles in the database
(migrations/015_onpage_corpora.sql).

A locale's crawl ends with one transaction (job.py): its `ok` pages' corpora upserted by
(keyword, locale, URL), their ids merged into the competitors as `corpusId` (merge_locale), the rows
of that keyword and locale that no competitor points to any more deleted (a page now blocked,
or no longer in the snapshot), and the locale's profile recomputed from the corpora its
competitors point to. Other locales' rows and profiles are never read or written.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from psycopg import AsyncConnection

from cannaspider.firecrawl import gap, own_pages, profile
from cannaspider.firecrawl.items import PageCorpus

# The keyword's row locked first (the merge that follows updates it anyway): a keyword deleted
# during the crawl gets no corpus (rather than a foreign-key error failing the locale).
UPSERT_CORPORA = """
WITH k AS (SELECT id FROM keywords WHERE id = %(keyword_id)s FOR UPDATE)
INSERT INTO onpage_corpora AS o (keyword_id, locale, url, crawled_at, lang, title, main_text, headings, alt_texts,
                                 anchors, json_ld, json_ld_invalid, words, html_chars, truncated)
SELECT k.id, %(locale)s, r.url, r."crawledAt", r.lang, r.title, r.text, r.headings, r."altTexts",
       r.anchors, r."jsonLd", r."jsonLdInvalid", r.words, r."htmlChars", r.truncated
  FROM k, jsonb_to_recordset(%(rows)s::jsonb) AS r(url text, "crawledAt" timestamptz, lang text, title text, text text,
       headings jsonb, "altTexts" jsonb, anchors jsonb, "jsonLd" jsonb, "jsonLdInvalid" int, words int,
       "htmlChars" int, truncated boolean)
ON CONFLICT (keyword_id, locale, url) DO UPDATE SET
       crawled_at = EXCLUDED.crawled_at, lang = EXCLUDED.lang, title = EXCLUDED.title,
       main_text = EXCLUDED.main_text, headings = EXCLUDED.headings, alt_texts = EXCLUDED.alt_texts,
       anchors = EXCLUDED.anchors, json_ld = EXCLUDED.json_ld, json_ld_invalid = EXCLUDED.json_ld_invalid,
       words = EXCLUDED.words, html_chars = EXCLUDED.html_chars, truncated = EXCLUDED.truncated
RETURNING o.url, o.id
"""

# the competitors' corpusIds, read from the row as it is now (after the merge)
REFERENCED = """
SELECT (c.value ->> 'corpusId')::bigint
  FROM keywords k, jsonb_array_elements(
           CASE WHEN jsonb_typeof(k.serp -> %(locale)s -> 'competitors') = 'array'
                THEN k.serp -> %(locale)s -> 'competitors' ELSE '[]'::jsonb END) AS c(value)
 WHERE k.id = %(keyword_id)s AND jsonb_typeof(c.value) = 'object'
   AND c.value ->> 'crawlStatus' = 'ok' AND jsonb_typeof(c.value -> 'corpusId') = 'number'
"""

# our page's corpus (own_pages.py) is kept too
DROP_UNREFERENCED = f"""
DELETE FROM onpage_corpora
 WHERE keyword_id = %(keyword_id)s AND locale = %(locale)s AND id <> ALL (ARRAY({REFERENCED})::bigint[])
   AND id IS DISTINCT FROM ({own_pages.OWN_CORPUS_ID})
"""

LOCALE_STATE = f"""
SELECT k.keyword, k.serp -> %(locale)s -> 'competitors',
       (SELECT coalesce(jsonb_agg(jsonb_build_object('url', o.url, 'lang', o.lang, 'title', o.title,
                                                     'text', o.main_text, 'headings', o.headings,
                                                     'words', o.words)), '[]')
          FROM onpage_corpora o
         WHERE o.keyword_id = k.id AND o.locale = %(locale)s AND o.id = ANY (ARRAY({REFERENCED})::bigint[])),
       ({own_pages.OWN_STATE})
  FROM keywords k WHERE k.id = %(keyword_id)s
"""

UPSERT_PROFILE = """
INSERT INTO keyword_profiles (keyword_id, locale, computed_at, profile)
VALUES (%(keyword_id)s, %(locale)s, %(computed_at)s, %(profile)s::jsonb)
ON CONFLICT (keyword_id, locale) DO UPDATE SET computed_at = EXCLUDED.computed_at, profile = EXCLUDED.profile
"""


async def save_corpora(
    conn: AsyncConnection, keyword_id: int, locale: str, corpora: dict[str, tuple[PageCorpus, str]]
) -> dict[str, int]:
    """Upsert {url: (corpus, crawledAt)}; {url: corpus id}."""
    if not corpora:
        return {}
    rows = [{**c.to_json(), "url": url, "crawledAt": at} for url, (c, at) in corpora.items()]
    cur = await conn.execute(
        UPSERT_CORPORA, {"keyword_id": keyword_id, "locale": locale, "rows": json.dumps(rows, ensure_ascii=False)}
    )
    return {url: cid for url, cid in await cur.fetchall()}


async def drop_unreferenced(conn: AsyncConnection, keyword_id: int, locale: str) -> int:
    cur = await conn.execute(DROP_UNREFERENCED, {"keyword_id": keyword_id, "locale": locale})
    return cur.rowcount


async def refresh_profile(
    conn: AsyncConnection,
    keyword_id: int,
    locale: str,
    computed_at: datetime,
    *,
    min_pages: int,
    max_terms: int,
    gap_settings: gap.GapSettings | None = None,
) -> dict[str, Any] | None:
    """Recompute and store the locale's profile from the row as it is now, and our page's gap
    when the keyword has one there and it was crawled (`gap_settings`); None (and no profile)
    when the keyword or its locale is gone."""
    row = await (await conn.execute(LOCALE_STATE, {"keyword_id": keyword_id, "locale": locale})).fetchone()
    if row is None or not isinstance(row[1], list):
        await conn.execute("DELETE FROM keyword_profiles WHERE keyword_id = %s AND locale = %s", (keyword_id, locale))
        return None
    keyword, competitors, corpora, own = row
    pages = {c["url"]: _profile_page(c) for c in corpora}
    listed = [c for c in competitors if isinstance(c, dict)]
    computed = profile.compute(locale, listed, pages, min_pages=min_pages, max_terms=max_terms)
    value = {"keywordId": keyword_id, "keyword": keyword, "computedAt": computed_at.isoformat(), **computed}
    if gap_settings is not None and isinstance(own, dict) and isinstance(own.get("crawl"), dict):
        await own_pages.save_gap(
            conn,
            keyword_id,
            locale,
            own["url"],
            {"computedAt": value["computedAt"], **_gap(computed, corpora, pages, own, gap_settings)},
        )
    await conn.execute(
        UPSERT_PROFILE,
        {
            "keyword_id": keyword_id,
            "locale": locale,
            "computed_at": computed_at,
            "profile": json.dumps(value, ensure_ascii=False),
        },
    )
    return value


def _profile_page(corpus: dict[str, Any]) -> profile.ProfilePage:
    return profile.ProfilePage(
        corpus["url"],
        corpus["lang"],
        corpus["title"],
        corpus["text"],
        [h.get("text", "") for h in corpus["headings"] if isinstance(h, dict)],
    )


def _levels(corpus: dict[str, Any]) -> list[int]:
    return [int(h.get("level") or 0) for h in corpus["headings"] if isinstance(h, dict)]


def _gap(
    computed: dict[str, Any],
    corpora: list[dict[str, Any]],
    pages: dict[str, profile.ProfilePage],
    own: dict[str, Any],
    settings: gap.GapSettings,
) -> dict[str, Any]:
    """Our page's gap against the pages the profile weighed."""
    by_url = {c["url"]: c for c in corpora}
    serp = [
        gap.SerpPage(
            p["url"], p["position"], pages[p["url"]], by_url[p["url"]].get("words") or 0, _levels(by_url[p["url"]])
        )
        for p in computed["pages"]
        if not p["otherLanguage"]
    ]
    corpus = own.get("corpus")
    ours = gap.OwnPage(own["url"], own["crawl"])
    if isinstance(corpus, dict):
        ours.page, ours.words, ours.levels = _profile_page(corpus), corpus.get("words") or 0, _levels(corpus)
    return gap.compute(computed, serp, ours, settings)


async def get_profile(conn: AsyncConnection, keyword_id: int, locale: str) -> dict[str, Any] | None:
    row = await (
        await conn.execute(
            "SELECT profile FROM keyword_profiles WHERE keyword_id = %s AND locale = %s", (keyword_id, locale)
        )
    ).fetchone()
    return row[0] if row else None


async def keyword_locales(conn: AsyncConnection, keyword_id: int) -> list[str] | None:
    """The locales of a keyword's SERP (None: no such keyword)."""
    row = await (
        await conn.execute(
            "SELECT ARRAY(SELECT jsonb_object_keys(serp) ORDER BY 1) FROM keywords WHERE id = %s", (keyword_id,)
        )
    ).fetchone()
    return list(row[0]) if row else None


# Writing crawl results into keywords.serp[locale].competitors[i], SQL-side.
#
# One UPDATE per locale: it rebuilds that locale's competitors array from the row's *current*
# value, so a concurrent write to another locale (or to anything else in the row) is never lost:
# PostgreSQL locks the row, and under READ COMMITTED a waiting UPDATE re-reads the committed row
# before computing its new value. Competitors are matched by URL (not by index: the snapshot may
# have been re-imported while the pages were crawling); a competitor keeps every field of its own
# and only the crawl fields are replaced, as a group (a field the new crawl did not produce, like
# `onpage` for a blocked page, is removed rather than left stale). Competitors without crawl fields
# stay valid: every crawl field is optional.

# the fields a crawl owns in a competitor object
# (corpusId: the page's row in onpage_corpora, for `ok` pages; save_corpora, above; crawlWarning: what was
# left out of a page read anyway, cannaspider/firecrawl/onpage.py)
CRAWL_FIELDS = ("crawlStatus", "crawlHttpStatus", "crawledAt", "crawlError", "crawlWarning", "onpage", "corpusId")

MERGE_LOCALE = """
UPDATE keywords AS k
   SET serp = jsonb_set(
           k.serp,
           ARRAY[%(locale)s, 'competitors'],
           (SELECT coalesce(jsonb_agg(
                       CASE WHEN u.fields IS NULL OR jsonb_typeof(c.value) <> 'object' THEN c.value
                            ELSE (c.value - %(crawl_fields)s::text[]) || u.fields END
                       ORDER BY c.ord), '[]'::jsonb)
              FROM jsonb_array_elements(k.serp -> %(locale)s -> 'competitors') WITH ORDINALITY AS c(value, ord)
              LEFT JOIN jsonb_each(%(updates)s::jsonb) AS u(url, fields) ON u.url = c.value ->> 'url')),
       updated_at = now()
 WHERE k.id = %(keyword_id)s AND jsonb_typeof(k.serp -> %(locale)s -> 'competitors') = 'array'
"""


def crawl_fields(
    status: str,
    http_status: int | None,
    crawled_at: str,
    error: str | None,
    onpage: dict[str, Any] | None,
    warning: str | None = None,
) -> dict[str, Any]:
    """A competitor's crawl fields; absent ones are left out (they are all optional)."""
    fields: dict[str, Any] = {"crawlStatus": status, "crawledAt": crawled_at}
    if http_status is not None:
        fields["crawlHttpStatus"] = http_status
    if error:
        fields["crawlError"] = error
    if onpage is not None:
        fields["onpage"] = onpage
    if warning:
        fields["crawlWarning"] = warning
    return fields


async def merge_locale(conn: AsyncConnection, keyword_id: int, locale: str, updates: dict[str, dict[str, Any]]) -> bool:
    """Apply {competitor URL: crawl fields} to one locale, in one statement (committed by the
    caller's connection). False when the keyword or its locale no longer exists."""
    cur = await conn.execute(
        MERGE_LOCALE,
        {
            "keyword_id": keyword_id,
            "locale": locale,
            "updates": json.dumps(updates),
            "crawl_fields": list(CRAWL_FIELDS),
        },
    )
    return cur.rowcount == 1
