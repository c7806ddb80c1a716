"""A keyword's semantic profile in one locale: the words and phrases its ranking pages share,
weighted by TF-IDF over the SERP, with their coverage and the profile's completeness.

The formula (docs/onpage.md, "Semantic profile"), over the N competitors of the locale whose
corpus exists (`ok` pages) and whose language is the locale's (a page in another language is
listed, flagged `otherLanguage`, and left out of the weights; a page whose language is unknown
counts), each page d read as its title plus its main text:

    n(t, d)  occurrences of term t (terms.py: a word, a 2- or 3-word phrase) in d
    L(d)     number of tokens of d (stop words included)
    tf(t, d) = n(t, d) / L(d)
    df(t)    number of pages that use t in their title, a heading or their main text
    idf(t)   = ln((1 + N) / (1 + df(t))) + 1
    weight(t) = idf(t) × (1/N) × Σ_d tf(t, d)       (the mean TF-IDF of t over the SERP)

A term is kept when at least min(PROFILE_MIN_PAGES, N) pages use it (a term of one page is not
shared), and the PROFILE_MAX_TERMS heaviest are listed, heaviest first (ties: more pages, then
alphabetical). Weights are rounded to 6 decimals. Each page is read with the stop words and the
lemmas of its own language, falling back to the locale's: a term is its lemmas (`huiles` counts
as `huile`), shown as its most frequent surface form over the SERP.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from cannaspider.firecrawl import terms

FORMULA = "tfidf-serp: weight = idf × mean(tf); tf = n/L over title + main text; idf = ln((1+N)/(1+df)) + 1"
RETRY_THROUGH_PROXY = "to retry through a proxy"
MAX_FORMS = 5  # surface forms listed per term, most frequent first


@dataclass
class ProfilePage:
    """A corpus as the profile reads it."""

    url: str
    lang: str | None
    title: str | None
    text: str
    headings: list[str] = field(default_factory=list)


@dataclass
class Reading:
    counts: Counter[str]  # n(t, d) over title + main text, t a term's lemmas
    length: int  # L(d)
    in_title: set[str]
    in_headings: set[str]
    in_body: set[str]
    forms: dict[str, Counter[str]]  # t → its surface forms in title + main text → occurrences

    @property
    def used(self) -> set[str]:
        return self.in_title | self.in_headings | self.in_body


def read(page: ProfilePage, locale_lang: str | None, *, lemmas: bool = True) -> Reading:
    """A page as the profile counts it: its own language's stop words and lemmas, else the locale's."""
    lang = page.lang if terms.stop_words_for(page.lang) else locale_lang
    stops = terms.stop_words_for(lang)
    lemma = terms.lemmatizer_for(lang) if lemmas else terms.as_is
    forms: dict[str, Counter[str]] = {}
    title, title_len = terms.count_terms(page.title or "", stops, lemma, forms)
    body, body_len = terms.count_terms(page.text, stops, lemma, forms)
    in_headings = terms.terms_in(page.headings, stops, lemma)
    return Reading(title + body, title_len + body_len, set(title), in_headings, set(body), forms)


def other_language(page_lang: str | None, locale_lang: str | None) -> bool:
    """The page is known to be in another language than the locale's (`fr-CA` is French)."""
    page = terms.language_code(page_lang)
    return bool(page and locale_lang and page != locale_lang)


def surface_forms(forms: Counter[str] | None) -> list[str]:
    """A term's surface forms, most frequent first (ties: alphabetical): the first is shown."""
    return [f for f, _ in sorted((forms or {}).items(), key=lambda f: (-f[1], f[0]))]


def compute(
    locale: str,
    competitors: list[dict[str, Any]],
    pages: dict[str, ProfilePage],
    *,
    min_pages: int,
    max_terms: int,
    lemmas: bool = True,
) -> dict[str, Any]:
    """The profile. `competitors`: the locale's competitor objects as merged (url, position,
    crawlStatus…); `pages`: the corpora of those that have one, by URL. `lemmas` False counts
    surface forms (benchmarks/onpage_terms.py compares the two)."""
    locale_lang = terms.language_code(locale)
    urls = list(dict.fromkeys(c["url"] for c in competitors if isinstance(c.get("url"), str)))
    by_url = {c["url"]: c for c in reversed(competitors) if isinstance(c.get("url"), str)}
    ranked = [u for u in urls if u in pages]
    readings = {u: read(pages[u], locale_lang, lemmas=lemmas) for u in ranked}
    foreign = {u for u in ranked if other_language(pages[u].lang, locale_lang)}
    weighed = [readings[u] for u in ranked if u not in foreign]
    n_pages = len(weighed)
    df: Counter[str] = Counter()
    tf_sum: dict[str, float] = {}
    title_cov: Counter[str] = Counter()
    headings_cov: Counter[str] = Counter()
    body_cov: Counter[str] = Counter()
    occurrences: Counter[str] = Counter()
    forms: dict[str, Counter[str]] = {}
    for r in weighed:
        for t, met in r.forms.items():
            forms.setdefault(t, Counter()).update(met)
        df.update(r.used)
        title_cov.update(r.in_title)
        headings_cov.update(r.in_headings)
        body_cov.update(r.in_body)
        occurrences.update(r.counts)
        if r.length:
            for t, n in r.counts.items():
                tf_sum[t] = tf_sum.get(t, 0.0) + n / r.length
    threshold = max(1, min(min_pages, n_pages))
    scored = []
    for t, d in df.items():
        if d < threshold:
            continue
        idf = math.log((1 + n_pages) / (1 + d)) + 1
        weight = round(idf * tf_sum.get(t, 0.0) / n_pages, 6)
        scored.append((weight, d, t))
    scored.sort(key=lambda s: (-s[0], -s[1], s[2]))
    schema_pages: dict[str, list[str]] = {}
    for u in ranked:  # every page read, whatever its language: its markup is not in a language
        onpage = by_url[u].get("onpage")
        found = onpage.get("schemaTypes") if isinstance(onpage, dict) else None
        for name in dict.fromkeys(found if isinstance(found, list) else []):
            if isinstance(name, str):
                schema_pages.setdefault(name, []).append(u)
    statuses = Counter(str(by_url[u].get("crawlStatus") or "not_crawled") for u in urls)
    blocked = [
        {"url": u, "httpStatus": by_url[u].get("crawlHttpStatus"), "action": RETRY_THROUGH_PROXY}
        for u in urls
        if by_url[u].get("crawlStatus") == "blocked"
    ]
    missing = [
        {"url": u, "status": by_url[u].get("crawlStatus") or "not_crawled", "error": by_url[u].get("crawlError")}
        for u in urls
        if u not in pages and by_url[u].get("crawlStatus") != "blocked"
    ]
    return {
        "locale": locale,
        "language": locale_lang,
        "formula": FORMULA,
        "completeness": {
            "competitors": len(urls),
            "ok": len(ranked),
            "share": round(len(ranked) / len(urls), 4) if urls else None,
            "weighed": n_pages,
            "otherLanguage": len(foreign),
            "statuses": dict(sorted(statuses.items())),
            "blocked": blocked,
            "missing": missing,
        },
        "pages": [
            {
                "url": u,
                "position": by_url[u].get("position"),
                "lang": pages[u].lang,
                "otherLanguage": u in foreign,
                "tokens": readings[u].length,
                "terms": len(readings[u].used),
            }
            for u in ranked
        ],
        "schemaTypes": [
            {"type": name, "pages": len(used), "positions": [by_url[u].get("position") for u in used]}
            for name, used in sorted(schema_pages.items(), key=lambda kv: (-len(kv[1]), kv[0]))
        ],
        "terms": [
            {
                # the lemmas themselves for a term met in headings only
                "term": shown[0] if shown else t,
                "lemma": t,
                "forms": shown[:MAX_FORMS],
                "words": t.count(" ") + 1,
                "weight": w,
                "pages": d,
                "inTitle": title_cov[t],
                "inHeadings": headings_cov[t],
                "inBody": body_cov[t],
                "occurrences": occurrences[t],
            }
            for w, d, t, shown in ((w, d, t, surface_forms(forms.get(t))) for w, d, t in scored[:max_terms])
        ],
    }
