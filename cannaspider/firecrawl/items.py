"""Typed items of the on-page crawl. Feeds export CompetitorPage: one per competitor crawled (and our own page)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Heading:
    level: int  # 1..6
    text: str


@dataclass
class Hreflang:
    lang: str
    href: str


@dataclass
class OnpageFields:
    """What an SEO analyst reads on a page (onpage.parse)."""

    title: str | None = None
    meta_description: str | None = None
    canonical: str | None = None
    robots: str | None = None
    lang: str | None = None
    hreflang: list[Hreflang] = field(default_factory=list)
    open_graph: dict[str, str] = field(default_factory=dict)  # "og:title" → content (first one wins)
    headings: list[Heading] = field(default_factory=list)  # h1–h6 in document order
    word_count: int = 0  # words of the main text (main, article, else body without nav/header/footer)
    json_ld_types: list[str] = field(default_factory=list)  # @type values, @graph included, in order
    json_ld_invalid: int = 0  # ld+json blocks that are not JSON
    # schema.org types of all its structured data (JSON-LD, microdata, RDFa), nested ones included
    schema_types: list[str] = field(default_factory=list)
    # items per syntax: jsonLd, microdata, rdfa, openGraph, dublinCore (structured.py); ok pages
    structured_data: dict[str, int] = field(default_factory=dict)
    image_count: int = 0
    images_with_alt: int = 0  # with a non-empty alt
    alt_coverage: float | None = None  # images_with_alt / image_count; None without images
    internal_links: int = 0
    external_links: int = 0

    def to_json(self) -> dict[str, Any]:
        """The camelCase object stored in keywords.serp[locale].competitors[i].onpage."""
        return {
            "title": self.title,
            "metaDescription": self.meta_description,
            "canonical": self.canonical,
            "robots": self.robots,
            "lang": self.lang,
            "hreflang": [{"lang": h.lang, "href": h.href} for h in self.hreflang],
            "openGraph": dict(self.open_graph),
            "headings": [{"level": h.level, "text": h.text} for h in self.headings],
            "wordCount": self.word_count,
            "jsonLdTypes": list(self.json_ld_types),
            "jsonLdInvalid": self.json_ld_invalid,
            "schemaTypes": list(self.schema_types),
            "structuredData": dict(self.structured_data),
            "images": {"count": self.image_count, "withAlt": self.images_with_alt, "altCoverage": self.alt_coverage},
            "links": {"internal": self.internal_links, "external": self.external_links},
        }


@dataclass
class Anchor:
    text: str
    href: str  # absolute


@dataclass
class PageCorpus:
    """What a page that answered `ok` says (corpus.extract), stored in onpage_corpora."""

    url: str
    lang: str | None  # ISO 639-1: <html lang>, else Firecrawl's metadata.language, else guessed from the text
    title: str | None
    text: str  # the main text (trafilatura), one block a line, at most ONPAGE_CORPUS_MAX_CHARS
    headings: list[Heading] = field(default_factory=list)  # h1–h6 in document order
    alt_texts: list[str] = field(default_factory=list)  # non-empty alts of the body's images, once each
    anchors: list[Anchor] = field(default_factory=list)  # the body's links to web pages, once per (text, href)
    json_ld: list[object] = field(default_factory=list)  # the decoded ld+json blocks themselves
    json_ld_invalid: int = 0
    words: int = 0  # tokens of the main text (terms.tokens)
    html_chars: int = 0  # size of the rendered HTML Firecrawl returned
    truncated: bool = False  # something was cut to the ONPAGE_* limits

    def to_json(self) -> dict[str, Any]:
        return {
            "url": self.url,
            "lang": self.lang,
            "title": self.title,
            "text": self.text,
            "headings": [{"level": h.level, "text": h.text} for h in self.headings],
            "altTexts": list(self.alt_texts),
            "anchors": [{"text": a.text, "href": a.href} for a in self.anchors],
            "jsonLd": list(self.json_ld),
            "jsonLdInvalid": self.json_ld_invalid,
            "words": self.words,
            "htmlChars": self.html_chars,
            "truncated": self.truncated,
        }


@dataclass
class CompetitorPage:
    """One competitor of one keyword's SERP in one locale, as this crawl saw it."""

    keyword_id: int
    keyword: str
    locale: str
    url: str
    position: int | None
    status: str  # ok | blocked | timeout | empty | fetch_error
    http_status: int | None
    crawled_at: str  # ISO 8601, UTC
    error: str | None = None  # why it is not ok (Firecrawl's code, a challenge vendor, an HTTP reason)
    warning: str | None = None  # what was left out of a page read anyway (a JSON-LD block nested too deep)
    onpage: OnpageFields | None = None  # parsed fields (ok and empty pages)
    corpus_id: int | None = None  # its row in onpage_corpora (ok pages)
    own_page: bool = False  # the team's own page of the locale (crawled with the competitors, compared in the gap)
