"""The keywords file (docs/onpage.md, "Keywords file"): read, validate, import.

A JSON array of SERP snapshots, one per keyword and locale:

    [{"keyword": "cbd oil", "locale": "en-US",
      "competitors": [{"url": "https://example.com/cbd", "position": 1, "title": "…"}]}]

Everything is validated before anything is written, and the import is one transaction. It is
idempotent by keyword (case and spacing aside) + locale: importing a snapshot again replaces that
locale's snapshot and nothing else, and competitors whose URL is still there keep their crawl
fields (the crawl results of a URL stay true whichever snapshot lists it).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psycopg

from cannaspider.firecrawl import own_pages
from cannaspider.firecrawl.classify import STATUSES
from cannaspider.firecrawl.persistence import CRAWL_FIELDS

# a language, then a region (both groups: no names, so that the JSON Schema of GET /api/…/profile's
# locale, which states this pattern, reads in every regex dialect)
LOCALE_PATTERN = r"^([A-Za-z]{2,3})(?:[-_]([A-Za-z]{2}|[0-9]{3}))?$"
LOCALE = re.compile(LOCALE_PATTERN)
MAX_KEYWORD_LENGTH = 500
MAX_PROBLEMS_SHOWN = 1


class KeywordsFileError(ValueError):
    """The file cannot be imported. str() is one line."""


@dataclass(frozen=True)
class Snapshot:
    keyword: str
    locale: str
    value: dict[str, Any]  # what goes into keywords.serp[locale]: competitors and any other field given
    # `ownPage`: the team's own URL in this locale (keyword_own_pages); None with own_page_given
    # removes it, and a file without the field leaves the one set (by the API) alone
    own_page: str | None = None
    own_page_given: bool = False


def normalize_keyword(text: str) -> str:
    return " ".join(text.split())


def normalize_locale(text: str) -> str | None:
    m = LOCALE.match(text.strip())
    if not m:
        return None
    lang, region = m.group(1).lower(), m.group(2)
    return f"{lang}-{region.upper()}" if region else lang


def url_problem(url: object) -> str | None:
    if not isinstance(url, str) or not url.strip():
        return f"must be a non-empty string, got {url!r}"
    try:
        parts = urlsplit(url.strip())
        ok = parts.scheme in ("http", "https") and bool(parts.hostname)
    except ValueError:
        ok = False
    return None if ok else f"must be an absolute http(s) URL, got {url!r}"


def _competitor_problems(i: int, c: object) -> list[str]:
    where = f"competitors[{i}]"
    if not isinstance(c, dict):
        return [f"{where}: must be an object, got {type(c).__name__}"]
    problems = []
    if (p := url_problem(c.get("url"))) is not None:
        problems.append(f"{where}.url: {p}")
    position = c.get("position")
    if position is not None and (not isinstance(position, int) or isinstance(position, bool) or position < 1):
        problems.append(f"{where}.position: must be an integer >= 1, got {position!r}")
    if "title" in c and c["title"] is not None and not isinstance(c["title"], str):
        problems.append(f"{where}.title: must be a string, got {type(c['title']).__name__}")
    if "crawlStatus" in c and c["crawlStatus"] not in STATUSES:
        problems.append(f"{where}.crawlStatus: must be one of {', '.join(STATUSES)}, got {c['crawlStatus']!r}")
    return problems


def validate(data: object) -> tuple[list[Snapshot], list[str]]:
    """The snapshots, and every problem found (an import needs none)."""
    if isinstance(data, dict) and isinstance(data.get("keywords"), list):
        data = data["keywords"]
    if not isinstance(data, list):
        return [], ['the file must hold a JSON array of {"keyword", "locale", "competitors"} objects']
    snapshots: list[Snapshot] = []
    problems: list[str] = []
    seen: dict[tuple[str, str], int] = {}
    for n, entry in enumerate(data, start=1):
        if not isinstance(entry, dict):
            problems.append(f"entry {n}: must be an object, got {type(entry).__name__}")
            continue
        keyword, locale, competitors = entry.get("keyword"), entry.get("locale"), entry.get("competitors")
        label = f"entry {n}" + (f" ({keyword!r})" if isinstance(keyword, str) else "")
        mine: list[str] = []
        if not isinstance(keyword, str) or not normalize_keyword(keyword):
            mine.append(f"keyword: must be a non-empty string, got {keyword!r}")
        elif len(normalize_keyword(keyword)) > MAX_KEYWORD_LENGTH:
            mine.append(f"keyword: longer than {MAX_KEYWORD_LENGTH} characters")
        norm_locale = normalize_locale(locale) if isinstance(locale, str) else None
        if norm_locale is None:
            mine.append(f"locale: must look like 'fr-FR', 'en-US' or 'fr', got {locale!r}")
        if not isinstance(competitors, list):
            mine.append(f"competitors: must be an array, got {type(competitors).__name__}")
        else:
            for i, c in enumerate(competitors):
                mine.extend(_competitor_problems(i, c))
        own = entry.get("ownPage")
        if own is not None and (p := url_problem(own)) is not None:
            mine.append(f"ownPage: {p}")
        if not mine:
            assert isinstance(keyword, str) and norm_locale is not None
            key = (normalize_keyword(keyword).lower(), norm_locale)
            if key in seen:
                mine.append(f"keyword {keyword!r} in locale {norm_locale} is already entry {seen[key]}")
            else:
                seen[key] = n
        if mine:
            problems.extend(f"{label}: {p}" for p in mine)
            continue
        assert isinstance(keyword, str) and norm_locale is not None and isinstance(competitors, list)
        value = {k: v for k, v in entry.items() if k not in ("keyword", "locale", "ownPage")}
        value["competitors"] = [{**c, "url": c["url"].strip()} for c in competitors]
        snapshots.append(
            Snapshot(
                normalize_keyword(keyword),
                norm_locale,
                value,
                own_page=own.strip() if isinstance(own, str) else None,
                own_page_given="ownPage" in entry,
            )
        )
    return snapshots, problems


def load(path: Path) -> list[Snapshot]:
    """Read and validate FILE; KeywordsFileError (one line) when it cannot be imported."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise KeywordsFileError(f"cannot read {path}: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise KeywordsFileError(f"{path} is not UTF-8 text") from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise KeywordsFileError(f"{path} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from exc
    snapshots, problems = validate(data)
    if problems:
        more = len(problems) - MAX_PROBLEMS_SHOWN
        suffix = (
            f" (and {more} more problem{'s' if more > 1 else ''}; nothing imported)"
            if more > 0
            else " (nothing imported)"
        )
        raise KeywordsFileError(f"{path}: " + "; ".join(problems[:MAX_PROBLEMS_SHOWN]) + suffix)
    return snapshots


UPSERT_KEYWORD = """
INSERT INTO keywords (keyword) VALUES (%(keyword)s)
ON CONFLICT ((lower(keyword))) DO UPDATE SET keyword = keywords.keyword
RETURNING id, (xmax = 0) AS inserted
"""
# The new snapshot, its competitors carrying over the crawl fields of the old snapshot's
# competitor with the same URL; written only when it differs (a re-import changes nothing).
REPLACE_SNAPSHOT = """
WITH old AS (
    SELECT id, serp -> %(locale)s -> 'competitors' AS competitors FROM keywords WHERE id = %(id)s FOR UPDATE),
carried AS (
    SELECT n.ord, n.value || coalesce((
               SELECT jsonb_object_agg(f.key, f.value)
                 FROM old,
                      jsonb_array_elements(CASE WHEN jsonb_typeof(old.competitors) = 'array'
                                                THEN old.competitors ELSE '[]'::jsonb END) AS o(value),
                      jsonb_each(CASE WHEN jsonb_typeof(o.value) = 'object' THEN o.value ELSE '{}'::jsonb END) AS f
                WHERE o.value ->> 'url' = n.value ->> 'url' AND f.key = ANY(%(crawl_fields)s::text[])
                  AND NOT n.value ? f.key), '{}'::jsonb) AS value
      FROM jsonb_array_elements(%(snapshot)s::jsonb -> 'competitors') WITH ORDINALITY AS n(value, ord)),
snap AS (
    SELECT jsonb_set(%(snapshot)s::jsonb, '{competitors}',
                     coalesce((SELECT jsonb_agg(value ORDER BY ord) FROM carried), '[]'::jsonb)) AS value)
UPDATE keywords k
   SET serp = jsonb_set(k.serp, ARRAY[%(locale)s], snap.value, true), updated_at = now()
  FROM snap
 WHERE k.id = %(id)s AND k.serp -> %(locale)s IS DISTINCT FROM snap.value
"""


@dataclass
class ImportReport:
    snapshots: int = 0
    keywords_created: int = 0
    snapshots_changed: int = 0
    own_pages_changed: int = 0  # our pages set, changed or removed


def import_snapshots(conn: psycopg.Connection[Any], snapshots: list[Snapshot]) -> ImportReport:
    """Write the snapshots in one transaction (psycopg sync connection, not autocommit)."""
    report = ImportReport(snapshots=len(snapshots))
    with conn.transaction():
        for snap in snapshots:
            row = conn.execute(UPSERT_KEYWORD, {"keyword": snap.keyword}).fetchone()
            assert row is not None  # an upsert … RETURNING returns its row
            keyword_id, inserted = row
            report.keywords_created += int(bool(inserted))
            cur = conn.execute(
                REPLACE_SNAPSHOT,
                {
                    "id": keyword_id,
                    "locale": snap.locale,
                    "snapshot": json.dumps(snap.value),
                    "crawl_fields": list(CRAWL_FIELDS),
                },
            )
            report.snapshots_changed += cur.rowcount
            if snap.own_page_given:
                where = {"keyword_id": keyword_id, "locale": snap.locale}
                if snap.own_page is None:
                    cur = conn.execute(own_pages.DELETE_OWN_PAGE, where)
                else:
                    cur = conn.execute(own_pages.SET_OWN_PAGE, {**where, "url": snap.own_page})
                report.own_pages_changed += cur.rowcount
    return report
