"""A keyword's semantic profile per locale (docs/onpage.md, "Semantic profile"), as JSON and as a
dashboard page:

GET /api/keywords/{id}/profile?locale=fr-FR          the profile the last crawl_onpage computed
GET /dashboard/keywords                              the keywords, their locales, profiles and our pages
GET /dashboard/keywords/{id}/profile?locale=fr-FR    the same profile, as a page

A malformed locale is a 422, an unknown keyword, a locale the keyword has no SERP in, or a
profile not computed yet a 404; each `detail` says which.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, HTTPException, Path, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse
from psycopg import AsyncConnection
from pydantic import BaseModel, Field

from cannaspider.firecrawl import persistence
from cannaspider.firecrawl.keywords_file import LOCALE_PATTERN, normalize_locale
from cannaspider.web.dashboard import templates
from cannaspider.web.models import refused_with

api_router = APIRouter(prefix="/api", tags=["keywords"])
page_router = APIRouter(prefix="/dashboard", include_in_schema=False)

KEYWORDS = """
SELECT k.id, k.keyword, ARRAY(SELECT jsonb_object_keys(k.serp) ORDER BY 1) AS locales,
       coalesce((SELECT jsonb_object_agg(p.locale, jsonb_build_object(
                     'computedAt', p.computed_at, 'ok', p.profile -> 'completeness' -> 'ok',
                     'competitors', p.profile -> 'completeness' -> 'competitors'))
                   FROM keyword_profiles p WHERE p.keyword_id = k.id), '{}') AS profiles,
       coalesce((SELECT jsonb_object_agg(w.locale, jsonb_build_object(
                     'url', w.url, 'status', coalesce(w.crawl ->> 'crawlStatus', 'not_crawled'),
                     'available', coalesce((w.gap -> 'available')::boolean, false)))
                   FROM keyword_own_pages w WHERE w.keyword_id = k.id), '{}') AS own_pages
  FROM keywords k ORDER BY lower(k.keyword), k.id LIMIT %s
"""
KEYWORDS_SHOWN = 500
MAX_ID = 2**63 - 1  # keywords.id is a bigint: a larger id is a 422, not a database error


class BlockedPageOut(BaseModel):
    url: str
    httpStatus: int | None = None
    action: str = Field(description='always "to retry through a proxy"')


class MissingPageOut(BaseModel):
    url: str
    status: str = Field(description="timeout, empty, fetch_error, or not_crawled")
    error: str | None = None


class CompletenessOut(BaseModel):
    competitors: int = Field(description="unique competitor URLs of the locale's SERP snapshot")
    ok: int = Field(description="pages with a corpus (crawlStatus ok)")
    share: float | None = Field(description="ok / competitors")
    # absent from profiles computed before the language rule (a crawl recomputes them)
    weighed: int | None = Field(None, description="ok pages in the locale's language (or unknown): the weights' N")
    otherLanguage: int = Field(0, description="ok pages in another language: listed, not weighed")
    statuses: dict[str, int]
    blocked: list[BlockedPageOut]
    missing: list[MissingPageOut]


class ProfilePageOut(BaseModel):
    url: str
    position: int | None = None
    lang: str | None = None
    otherLanguage: bool = Field(False, description="in another language than the locale's: left out of the weights")
    tokens: int = Field(description="L(d): tokens of its title and main text")
    terms: int = Field(description="distinct terms it uses")


class TermOut(BaseModel):
    term: str = Field(description="its most frequent surface form over the SERP")
    # absent from profiles computed before lemmas (a crawl recomputes them)
    lemma: str | None = Field(None, description="what is counted: its words' lemmas (huiles de CBD → huile de cbd)")
    forms: list[str] = Field([], description="its surface forms met, most frequent first (at most 5)")
    words: int = Field(description="1, 2 or 3")
    weight: float = Field(description="idf × mean tf over the SERP (docs/onpage.md)")
    pages: int = Field(description="competitor pages that use it (df)")
    inTitle: int
    inHeadings: int
    inBody: int
    occurrences: int = Field(description="in titles and main texts, all pages together")


class SchemaTypeOut(BaseModel):
    type: str = Field(description="a schema.org type (Product, Offer, FAQPage…), from JSON-LD, microdata or RDFa")
    pages: int = Field(description="pages of the profile that use it")
    positions: list[int | None] = Field(description="their SERP positions")


class ProfileOut(BaseModel):
    keywordId: int
    keyword: str
    locale: str
    language: str | None
    computedAt: str
    formula: str
    completeness: CompletenessOut
    pages: list[ProfilePageOut]
    # absent from profiles computed before structured data (a crawl recomputes them)
    schemaTypes: list[SchemaTypeOut] = []
    terms: list[TermOut]


def checked_locale(locale: str) -> str:
    """The locale normalized (`fr-fr` → `fr-FR`), or the documented 422."""
    wanted = normalize_locale(locale)
    if wanted is None:
        # the documented 422 shape (a list of errors, as FastAPI's own validation gives)
        msg = f"locale must look like 'fr-FR', 'en-US' or 'fr', got {locale!r}"
        raise RequestValidationError([{"loc": ["query", "locale"], "msg": msg, "type": "value_error"}])
    return wanted


async def check_keyword_locale(conn: AsyncConnection, keyword_id: int, locale: str) -> None:
    """A 404 saying which, when the keyword does not exist or has no SERP in the locale."""
    locales = await persistence.keyword_locales(conn, keyword_id)
    if locales is None:
        raise HTTPException(404, f"keyword {keyword_id} does not exist")
    if locale not in locales:
        known = ", ".join(locales) or "none"
        raise HTTPException(404, f"keyword {keyword_id} has no SERP in locale {locale} (its locales: {known})")


async def load_profile(request: Request, keyword_id: int, locale: str) -> dict[str, Any]:
    """The stored profile, or an HTTPException saying why there is none."""
    wanted = checked_locale(locale)
    async with request.app.state.pool.connection() as conn:
        await check_keyword_locale(conn, keyword_id, wanted)
        found = await persistence.get_profile(conn, keyword_id, wanted)
    if found is None:
        raise HTTPException(
            404, f"keyword {keyword_id} has no semantic profile in {wanted} yet: crawl_onpage computes it"
        )
    return found


@api_router.get(
    "/keywords/{keyword_id}/profile",
    response_model=ProfileOut,
    responses=refused_with(404, 503),
)
async def get_keyword_profile(
    request: Request,
    keyword_id: int = Path(ge=1, le=MAX_ID),
    # the pattern is stated for the schema; load_profile() judges it, with its own message
    locale: str = Query(
        max_length=20, description="the SERP locale, e.g. fr-FR", json_schema_extra={"pattern": LOCALE_PATTERN}
    ),
) -> dict[str, Any]:
    """The semantic profile of a keyword in one locale, as the last `crawl_onpage` computed it:
    shared terms and phrases weighted by TF-IDF over the SERP, their coverage, and completeness."""
    return await load_profile(request, keyword_id, locale)


@page_router.get("/keywords", response_class=HTMLResponse)
async def keywords_page(request: Request) -> HTMLResponse:
    async with request.app.state.pool.connection() as conn:
        rows = await (await conn.execute(KEYWORDS, (KEYWORDS_SHOWN,))).fetchall()
    keywords = [{"id": r[0], "keyword": r[1], "locales": r[2], "profiles": r[3], "own": r[4]} for r in rows]
    return templates.TemplateResponse(request, "keywords.html", {"keywords": keywords, "nav": "keywords"})


@page_router.get("/keywords/{keyword_id}/profile", response_class=HTMLResponse)
async def profile_page(
    request: Request, keyword_id: int = Path(ge=1, le=MAX_ID), locale: str = Query(max_length=20)
) -> HTMLResponse:
    found = await load_profile(request, keyword_id, locale)
    return templates.TemplateResponse(request, "profile.html", {"p": found, "nav": "keywords"})
