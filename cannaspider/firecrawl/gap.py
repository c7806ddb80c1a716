"""Our page against theirs: what the pages that rank for a keyword in a locale say that the team's
own page does not (docs/onpage.md, "Our page against theirs").

The gap is computed with the locale's profile (profile.py), at the end of the locale's crawl, from
the same corpora: the competitors the profile weighed, and our page's corpus read the same way
(profile.read: its own language's stop words and lemmas, else the locale's). For each term the
profile lists (those at least min(PROFILE_MIN_PAGES, N) pages share):

    serpWeight(t) = the profile's weight = idf(t) × mean over the SERP of tf(t, d)
    ourWeight(t)  = idf(t) × tf(t, ours)                  (the SERP's idf: ours is not a page of it)
    ratio(t)      = ourWeight / serpWeight                 (= tf(t, ours) / mean tf(t, d))

and its status: `missing` when our page does not use it at all (title, headings, main text),
`under` when its ratio is below GAP_UNDER_RATIO, `over` when above 1 / GAP_UNDER_RATIO, else `ok`.
"Most top pages" is a share of the weighed pages: df / N >= GAP_MIN_SHARE. Heading terms are the
terms the competitors' headings share (as many pages as the profile asks for a term) that ours lack,
with the headings that carry them; schema.org types those the competitors use and ours does not.
Word counts are the corpora's (tokens of the main text) side by side.

A page of ours that is not `ok` (blocked, empty, timeout, fetch_error) has no gap: `available`
false and `reason` saying why, never an empty gap that would read as "nothing to do".
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any

from cannaspider.firecrawl import profile, terms
from cannaspider.firecrawl.profile import ProfilePage

EXAMPLE_HEADINGS = 3  # competitor headings shown per heading term
LEVELS = range(1, 7)


@dataclass(frozen=True)
class GapSettings:
    min_share: float  # GAP_MIN_SHARE
    under_ratio: float  # GAP_UNDER_RATIO
    max_terms: int  # GAP_MAX_TERMS
    min_pages: int  # PROFILE_MIN_PAGES: a heading term or a schema.org type is shared by this many pages


@dataclass
class SerpPage:
    """A competitor page the profile weighed, as the gap reads it."""

    url: str
    position: int | None
    page: ProfilePage
    words: int
    levels: list[int]  # its headings' levels, in the order of page.headings


@dataclass
class OwnPage:
    """Our page: its crawl fields (as a competitor's) and, when `ok`, its corpus."""

    url: str
    crawl: dict[str, Any]
    page: ProfilePage | None = None
    words: int = 0
    levels: list[int] | None = None


def _status_reason(crawl: dict[str, Any]) -> str:
    status = crawl.get("crawlStatus")
    http = f" (HTTP {crawl['crawlHttpStatus']})" if crawl.get("crawlHttpStatus") else ""
    why = f": {crawl['crawlError']}" if crawl.get("crawlError") else ""
    if status == "blocked":
        return f"our page is blocked{http}{why}: {profile.RETRY_THROUGH_PROXY}"
    if status == "empty":
        return f"our page is empty: no main text to compare{http}{why}"
    if status == "timeout":
        return f"our page timed out{why}"
    return f"our page could not be fetched{http}{why}"


def unavailable(own: OwnPage, reason: str) -> dict[str, Any]:
    return {"available": False, "reason": reason, "ownPage": _own_summary(own, False)}


def _own_summary(own: OwnPage, other: bool) -> dict[str, Any]:
    crawl = own.crawl
    onpage = crawl.get("onpage") if isinstance(crawl.get("onpage"), dict) else {}
    return {
        "url": own.url,
        "status": crawl.get("crawlStatus") or "not_crawled",
        "httpStatus": crawl.get("crawlHttpStatus"),
        "crawledAt": crawl.get("crawledAt"),
        "error": crawl.get("crawlError"),
        "lang": own.page.lang if own.page else (onpage or {}).get("lang"),
        "otherLanguage": other,
    }


def _level_counts(levels: list[int]) -> dict[str, int]:
    return {f"h{n}": sum(1 for lv in levels if lv == n) for n in LEVELS}


def _spread(values: list[int]) -> dict[str, float | int | None]:
    if not values:
        return {"median": None, "mean": None, "min": None, "max": None}
    return {
        "median": statistics.median(values),
        "mean": round(statistics.fmean(values), 1),
        "min": min(values),
        "max": max(values),
    }


def _term_row(t: dict[str, Any], ours: profile.Reading, n_pages: int) -> dict[str, Any]:
    lemma = t.get("lemma") or t["term"]
    idf = math.log((1 + n_pages) / (1 + t["pages"])) + 1
    tf = ours.counts.get(lemma, 0) / ours.length if ours.length else 0.0
    our_weight = round(idf * tf, 6)
    serp_weight = float(t["weight"])
    ratio = round(our_weight / serp_weight, 3) if serp_weight > 0 else None
    return {
        "term": t["term"],
        "lemma": lemma,
        "serpWeight": serp_weight,
        "ourWeight": our_weight,
        "ratio": ratio,
        "pages": t["pages"],
        "share": round(t["pages"] / n_pages, 4) if n_pages else None,
        "inHeadings": t.get("inHeadings", 0),
        "ourOccurrences": ours.counts.get(lemma, 0),
        "inOurTitle": lemma in ours.in_title,
        "inOurHeadings": lemma in ours.in_headings,
        "inOurBody": lemma in ours.in_body,
        "used": lemma in ours.used,
    }


def _status(row: dict[str, Any], under_ratio: float) -> str:
    if not row["used"]:
        return "missing"
    ratio = row["ratio"]
    if ratio is None:
        return "ok"
    if ratio < under_ratio:
        return "under"
    if under_ratio > 0 and ratio > 1 / under_ratio:
        return "over"
    return "ok"


def _heading_gaps(
    listed: list[dict[str, Any]], serp: list[SerpPage], ours: profile.Reading, locale_lang: str | None, cfg: GapSettings
) -> list[dict[str, Any]]:
    """The terms the competitors' headings share and ours lack, with the headings that carry them."""
    threshold = max(1, min(cfg.min_pages, len(serp)))
    wanted = {
        (t.get("lemma") or t["term"]): t
        for t in listed
        if t.get("inHeadings", 0) >= threshold and (t.get("lemma") or t["term"]) not in ours.in_headings
    }
    examples: dict[str, list[dict[str, Any]]] = {lemma: [] for lemma in wanted}
    for sp in serp:
        lang = sp.page.lang if terms.stop_words_for(sp.page.lang) else locale_lang
        stops, lemma_of = terms.stop_words_for(lang), terms.lemmatizer_for(lang)
        for text, level in zip(sp.page.headings, sp.levels, strict=False):
            found = terms.count_terms(text, stops, lemma_of)[0]
            for lemma in wanted.keys() & found.keys():
                if len(examples[lemma]) < EXAMPLE_HEADINGS:
                    examples[lemma].append({"url": sp.url, "position": sp.position, "level": level, "text": text})
    ordered = sorted(wanted.values(), key=lambda t: (-t.get("inHeadings", 0), -t["weight"], t["term"]))
    return [
        {
            "term": t["term"],
            "lemma": t.get("lemma") or t["term"],
            "pages": t.get("inHeadings", 0),
            "examples": examples[t.get("lemma") or t["term"]],
        }
        for t in ordered[: cfg.max_terms]
    ]


def compute(computed: dict[str, Any], serp: list[SerpPage], own: OwnPage, cfg: GapSettings) -> dict[str, Any]:
    """The gap of our page against the locale's profile (`computed`: profile.compute's answer;
    `serp`: the pages it weighed)."""
    crawl_status = own.crawl.get("crawlStatus")
    if crawl_status != "ok" or own.page is None:
        return unavailable(own, _status_reason(own.crawl))
    n_pages = int(computed["completeness"].get("weighed") or 0)
    if n_pages == 0:
        return unavailable(own, "no competitor page to compare with: none of the SERP's pages was read")
    locale_lang = computed.get("language")
    ours = profile.read(own.page, locale_lang)
    other = profile.other_language(own.page.lang, locale_lang)
    listed: list[dict[str, Any]] = computed["terms"]
    rows = [_term_row(t, ours, n_pages) for t in listed]
    for row in rows:
        row["status"] = _status(row, cfg.under_ratio)
    most = [r for r in rows if r["share"] is not None and r["share"] >= cfg.min_share]

    def pick(status: str) -> list[dict[str, Any]]:
        return [r for r in most if r["status"] == status][: cfg.max_terms]  # rows: heaviest first already

    onpage = own.crawl.get("onpage") if isinstance(own.crawl.get("onpage"), dict) else {}
    our_types = [t for t in (onpage or {}).get("schemaTypes") or [] if isinstance(t, str)]
    type_threshold = max(1, min(cfg.min_pages, n_pages))
    their_types = [s for s in computed.get("schemaTypes", []) if s["pages"] >= type_threshold]
    our_levels = own.levels or []
    return {
        "available": True,
        "reason": None,
        "ownPage": _own_summary(own, other),
        "weighed": n_pages,
        "rules": {"minShare": cfg.min_share, "underRatio": cfg.under_ratio},
        "summary": {
            "terms": len(rows),
            "missing": sum(1 for r in most if r["status"] == "missing"),
            "underUsed": sum(1 for r in most if r["status"] == "under"),
            "overUsed": sum(1 for r in most if r["status"] == "over"),
        },
        "missing": pick("missing"),
        "underUsed": pick("under"),
        "overUsed": pick("over"),
        "headings": {
            "ours": [{"level": lv, "text": text} for lv, text in zip(our_levels, own.page.headings, strict=False)],
            "levels": {
                "ours": _level_counts(our_levels),
                "serpMedian": {
                    f"h{n}": statistics.median([sum(1 for lv in sp.levels if lv == n) for sp in serp]) for n in LEVELS
                },
            },
            "missingTerms": _heading_gaps(listed, serp, ours, locale_lang, cfg),
        },
        "schemaTypes": {
            "ours": our_types,
            "missing": [s for s in their_types if s["type"] not in our_types],
            "shared": [s for s in their_types if s["type"] in our_types],
        },
        "wordCount": {
            "ours": own.words,
            "serp": _spread([sp.words for sp in serp]),
            "pages": [{"url": sp.url, "position": sp.position, "words": sp.words} for sp in serp],
        },
        "terms": rows,
    }
