"""What happened to a page → crawlStatus (the table in docs/firecrawl.md), and bot-challenge
pages recognised from the rendered HTML (Firecrawl does not expose response headers).

Challenge markers are the ones a vendor puts on its interstitial, not the tags it also loads on
pages it lets through (Cloudflare's /cdn-cgi/ scripts, DataDome's tags.js), so a protected page
that rendered normally stays `ok`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from parsel import Selector

from cannaspider.firecrawl import corpus, onpage, structured
from cannaspider.firecrawl.items import OnpageFields, PageCorpus

if TYPE_CHECKING:  # the parser processes import this module: not the client, the database and Scrapy
    from cannaspider.firecrawl.batch import PageOutcome

OK, BLOCKED, TIMEOUT, EMPTY, FETCH_ERROR = "ok", "blocked", "timeout", "empty", "fetch_error"
STATUSES = (OK, BLOCKED, TIMEOUT, EMPTY, FETCH_ERROR)
BLOCKING_HTTP = frozenset({401, 403, 429})

# vendor → XPath expressions, any of which marks its challenge or block page
CHALLENGES: dict[str, tuple[str, ...]] = {
    "cloudflare": (
        "//*[@id='challenge-running' or @id='cf-challenge-running' or @id='challenge-form'"
        " or @id='challenge-stage' or @id='cf-error-details']",
        "//*[contains(concat(' ',normalize-space(@class),' '),' cf-browser-verification ')]",
        "//body//text()[contains(.,'cf-browser-verification')]",
        "//title[normalize-space()='Just a moment...' or normalize-space()='Attention Required! | Cloudflare']",
        "//script[contains(.,'_cf_chl_opt')]",
        "//form[contains(@action,'__cf_chl')]",
    ),
    "incapsula": (
        "//iframe[contains(@src,'_Incapsula_Resource')]",
        "//script[contains(@src,'_Incapsula_Resource')]",
        "//body//text()[contains(.,'Incapsula incident ID')]",
    ),
    "akamai": (
        "//title[normalize-space()='Access Denied'][//body//text()[contains(.,'Reference #')]]",
        "//body//text()[contains(.,'errors.edgesuite.net')]",
        "//*[@id='sec-if-cpt-container' or @id='sec-container']",
    ),
    "datadome": (
        "//iframe[contains(@src,'captcha-delivery.com')]",
        "//script[contains(@src,'ct.captcha-delivery.com')]",
        "//script[contains(.,'var dd={') and contains(.,'captcha-delivery')]",
    ),
    "perimeterx": (
        "//*[@id='px-captcha' or @id='px-captcha-wrapper']",
        "//script[contains(.,'_pxAppId') and contains(.,'captcha')]",
        "//body//text()[contains(.,'Press & Hold')]",
    ),
}


def detect_challenge(sel: Selector) -> str | None:
    """The vendor whose challenge/block page this is, or None."""
    for vendor, xpaths in CHALLENGES.items():
        if any(sel.xpath(x) for x in xpaths):
            return vendor
    return None


@dataclass
class Verdict:
    status: str
    http_status: int | None
    error: str | None = None
    onpage: OnpageFields | None = None
    corpus: PageCorpus | None = None  # ok pages only
    warning: str | None = None  # what was left out of a page read anyway (a JSON-LD block too deep)


@dataclass(frozen=True)
class Document:
    """A rendered page as the parser reads it, its HTML already cut to the limits: what the
    parser processes are sent (parser_pool.py), so it holds plain values only."""

    url: str
    http_status: int | None
    http_error: object  # metadata.error: the target's reason phrase
    language: object  # metadata.language
    html: str
    html_chars: int  # the rendered HTML's size before the cut
    html_truncated: bool


ERROR_STATUS = {"SCRAPE_TIMEOUT": TIMEOUT}  # anything else Firecrawl reports is a fetch_error


def prepare(page: PageOutcome, limits: corpus.CorpusLimits) -> Verdict | Document:
    """The verdict of a page that has no document (nothing to parse), else its document, its
    HTML cut to `limits.max_html_chars` characters (a 20 MB page is cut, docs/onpage.md)."""
    if page.invalid:
        return Verdict(FETCH_ERROR, None, "Firecrawl refused the URL as invalid")
    if page.doc is None:
        if page.error is not None:
            # an empty 200 lands here too (SCRAPE_ALL_ENGINES_FAILED): the server cannot tell it
            # from an unreachable host, so it is a fetch_error, not `empty`; Firecrawl's JSON may
            # escape a NUL or a lone surrogate, which crawlError's jsonb refuses
            reason = onpage.storable_text(f"{page.error.code}: {page.error.error}")
            return Verdict(ERROR_STATUS.get(page.error.code, FETCH_ERROR), None, reason)
        if page.budget_exhausted:
            return Verdict(TIMEOUT, None, "no result within the batch budget")
        return Verdict(FETCH_ERROR, None, "Firecrawl reported neither a result nor an error")
    meta: dict[str, Any] = page.doc["metadata"] if isinstance(page.doc.get("metadata"), dict) else {}
    raw_status = meta.get("statusCode")
    reason_phrase = meta.get("error")
    raw_html: str = page.doc["rawHtml"] if isinstance(page.doc.get("rawHtml"), str) else ""
    html, html_cut = corpus.cut_html(raw_html, limits)
    return Document(
        url=page.url,
        http_status=raw_status if isinstance(raw_status, int) else None,
        http_error=onpage.storable_text(reason_phrase) if isinstance(reason_phrase, str) else reason_phrase,
        language=meta.get("language"),
        html=html,
        html_chars=len(raw_html),
        html_truncated=html_cut,
    )


def read(doc: Document, *, min_words: int, limits: corpus.CorpusLimits) -> Verdict:
    """A rendered page's verdict, from its HTML parsed once; an `ok` page's corpus with it."""
    http = doc.http_status
    sel = onpage.selector(doc.html)
    vendor = detect_challenge(sel) if doc.html.strip() else None
    if http in BLOCKING_HTTP or vendor:
        reason = f"{vendor} challenge page" if vendor else f"HTTP {http} {doc.http_error or ''}".strip()
        if vendor and http in BLOCKING_HTTP:
            reason += f" (HTTP {http})"
        return Verdict(BLOCKED, http, reason)
    if http is not None and http >= 400:
        return Verdict(FETCH_ERROR, http, f"HTTP {http} {doc.http_error or ''}".strip())
    ld = onpage.read_json_ld(sel)
    fields = onpage.parse(doc.html, doc.url, sel, ld)
    if fields.word_count < min_words:
        return Verdict(EMPTY, http, "no usable text on the rendered page", fields, warning=ld.warning)
    data = structured.read(sel, doc.html, doc.url)
    fields.schema_types = structured.schema_types(ld.blocks, data)
    fields.structured_data = {
        "jsonLd": len(ld.blocks),
        "microdata": len(data.microdata),
        "rdfa": len(data.rdfa),
        "openGraph": len(data.opengraph),
        "dublinCore": len(data.dublincore),
    }
    text = corpus.extract(
        sel,
        doc.url,
        fields,
        firecrawl_language=doc.language,
        html_chars=doc.html_chars,
        html_truncated=doc.html_truncated,
        limits=limits,
        ld=ld,
    )
    warning = "; ".join(w for w in (ld.warning, data.warning) if w) or None
    return Verdict(OK, http, None, fields, text, warning)


def classify(page: PageOutcome, *, min_words: int, limits: corpus.CorpusLimits) -> Verdict:
    """The page's verdict, read in this process (the job reads documents in its parser
    processes instead: parser_pool.py)."""
    prepared = prepare(page, limits)
    return prepared if isinstance(prepared, Verdict) else read(prepared, min_words=min_words, limits=limits)
