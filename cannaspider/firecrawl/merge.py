"""Writing crawl results into keywords.serp[locale].competitors[i], SQL-side.

One UPDATE per locale: it rebuilds that locale's competitors array from the row's *current*
value, so a concurrent write to another locale (or to anything else in the row) is never lost:
PostgreSQL locks the row, and under READ COMMITTED a waiting UPDATE re-reads the committed row
before computing its new value. Competitors are matched by URL (not by index: the snapshot may
have been re-imported while the pages were crawling); a competitor keeps every field of its own
and only the crawl fields are replaced, as a group (a field the new crawl did not produce, like
`onpage` for a blocked page, is removed rather than left stale). Competitors without crawl fields
stay valid: every crawl field is optional.
"""

from __future__ import annotations

import json
from typing import Any

from psycopg import AsyncConnection

# the fields a crawl owns in a competitor object
# (corpusId: the page's row in onpage_corpora, for `ok` pages; store.py; crawlWarning: what was
# left out of a page read anyway, json_ld.py)
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
