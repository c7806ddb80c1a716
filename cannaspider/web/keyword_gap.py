"""Our page against theirs, and the on-page job's progress (docs/onpage.md, "Our page against
theirs" and "Progress"), as JSON and as a dashboard page:

PUT    /api/keywords/{id}/own-page?locale=fr-FR   {"url": "https://…"}: our page in that locale (token)
DELETE /api/keywords/{id}/own-page?locale=fr-FR   no own page there any more (token)
GET    /api/keywords/{id}/own-page?locale=fr-FR   its URL and last crawl fields
GET    /api/keywords/{id}/gap?locale=fr-FR        what the SERP's pages say that ours does not
GET    /api/keywords/{id}/progress                queued / running (pages done of total) / done (totals)
GET    /dashboard/keywords/{id}/gap?locale=fr-FR  the gap, as a page

A malformed locale or URL is a 422; an unknown keyword, a locale the keyword has no SERP in, or no
own page there a 404, each `detail` saying which. A page of ours that is not `ok` (blocked,
empty, timeout…) or not crawled yet answers 200 with `available` false and the `reason`.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, HTTPException, Path, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse
from pydantic import BaseModel, Field

from cannaspider.firecrawl import own_pages, progress
from cannaspider.firecrawl.keywords_file import LOCALE_PATTERN, url_problem
from cannaspider.web.dashboard import templates
from cannaspider.web.guards import require_token
from cannaspider.web.keyword_profile import MAX_ID, SchemaTypeOut, check_keyword_locale, checked_locale
from cannaspider.web.models import refused_with

api_router = APIRouter(prefix="/api", tags=["keywords"])
page_router = APIRouter(prefix="/dashboard", include_in_schema=False)

MAX_URL_CHARS = 2048


def _locale_query() -> Any:
    # the pattern is stated for the schema; checked_locale() judges it, with its own message
    return Query(
        max_length=20, description="the SERP locale, e.g. fr-FR", json_schema_extra={"pattern": LOCALE_PATTERN}
    )


# an absolute http(s) URL, stated so that the schema accepts only what url_problem() does: a host of
# URL characters (no user info, no brackets: urlsplit refuses an unclosed IPv6 one), a port, a path
URL_PATTERN = r"^https?://[A-Za-z0-9._~%-]*[A-Za-z0-9_~%-][A-Za-z0-9._~%-]*(:[0-9]*)?([/?#]\S*)?$"


class OwnPageIn(BaseModel):
    url: str = Field(
        max_length=MAX_URL_CHARS, pattern=URL_PATTERN, description="our page's absolute http(s) URL in that locale"
    )


class OwnPageOut(BaseModel):
    keywordId: int
    locale: str
    url: str
    setAt: str
    crawl: dict[str, Any] | None = Field(
        description="its crawl fields, as a competitor's (crawlStatus, onpage…); null until a crawl after it was set"
    )


class GapPageOut(BaseModel):
    url: str
    status: str = Field(description="ok, blocked, empty, timeout, fetch_error, or not_crawled")
    httpStatus: int | None = None
    crawledAt: str | None = None
    error: str | None = None
    lang: str | None = None
    otherLanguage: bool = Field(False, description="known to be in another language than the locale's")


class GapTermOut(BaseModel):
    term: str
    lemma: str
    serpWeight: float = Field(description="the profile's weight: idf × mean tf over the SERP")
    ourWeight: float = Field(description="idf × tf in our page (the SERP's idf)")
    ratio: float | None = Field(description="ourWeight / serpWeight")
    pages: int = Field(description="SERP pages that use it (df)")
    share: float | None = Field(description="pages / weighed pages")
    inHeadings: int = Field(description="SERP pages that use it in a heading")
    ourOccurrences: int
    inOurTitle: bool
    inOurHeadings: bool
    inOurBody: bool
    used: bool
    status: str = Field(description="missing, under, over or ok")


class HeadingOut(BaseModel):
    level: int
    text: str


class HeadingExampleOut(BaseModel):
    url: str
    position: int | None = None
    level: int
    text: str


class HeadingGapOut(BaseModel):
    term: str
    lemma: str
    pages: int = Field(description="SERP pages that use it in a heading")
    examples: list[HeadingExampleOut]


class HeadingsGapOut(BaseModel):
    ours: list[HeadingOut]
    levels: dict[str, dict[str, float]] = Field(description="ours: h1…h6 counts; serpMedian: the SERP's median")
    missingTerms: list[HeadingGapOut]


class SchemaGapOut(BaseModel):
    ours: list[str]
    missing: list[SchemaTypeOut]
    shared: list[SchemaTypeOut]


class WordPageOut(BaseModel):
    url: str
    position: int | None = None
    words: int


class WordCountOut(BaseModel):
    ours: int
    serp: dict[str, float | None] = Field(description="median, mean, min, max over the weighed pages")
    pages: list[WordPageOut]


class GapOut(BaseModel):
    keywordId: int
    keyword: str
    locale: str
    setAt: str = Field(description="when our page's URL was set")
    computedAt: str | None = Field(None, description="the profile's computation the gap was computed with")
    available: bool = Field(description="false: no gap (our page not ok, not crawled, or no competitor read)")
    reason: str | None = Field(description="why there is no gap")
    ownPage: GapPageOut
    weighed: int | None = Field(None, description="competitor pages compared with (the profile's N)")
    rules: dict[str, float] | None = None
    summary: dict[str, int] | None = None
    missing: list[GapTermOut] = Field([], description="terms most pages use that ours does not, heaviest first")
    underUsed: list[GapTermOut] = Field([], description="terms most pages use that ours uses much less")
    overUsed: list[GapTermOut] = []
    headings: HeadingsGapOut | None = None
    schemaTypes: SchemaGapOut | None = None
    wordCount: WordCountOut | None = None
    terms: list[GapTermOut] = Field([], description="every term of the profile, its weight in the SERP and in ours")


class CountOut(BaseModel):
    done: int
    total: int


class ProgressOut(BaseModel):
    keywordId: int
    state: str = Field(description="idle, queued, running, done, failed, or interrupted (running, silent for 15 min)")
    pages: CountOut | None = Field(description="pages Firecrawl is done with, out of those sent (every locale)")
    locales: CountOut | None
    totals: dict[str, int] | None = Field(description="{crawled, blocked, failed}: final once done")
    error: str | None
    startedAt: str | None
    updatedAt: str | None
    finishedAt: str | None
    task: dict[str, Any] | None = Field(description="the crawl_onpage task waiting or running, {id, status}")
    pollAfterS: float | None = Field(description="while queued or running: when to ask again")


async def _keyword_name(request: Request, keyword_id: int, locale: str) -> str:
    async with request.app.state.pool.connection() as conn:
        await check_keyword_locale(conn, keyword_id, locale)
        row = await (await conn.execute("SELECT keyword FROM keywords WHERE id = %s", (keyword_id,))).fetchone()
    assert row is not None
    keyword: str = row[0]
    return keyword


async def _own_page(request: Request, keyword_id: int, locale: str) -> dict[str, Any]:
    async with request.app.state.pool.connection() as conn:
        await check_keyword_locale(conn, keyword_id, locale)
        own = await own_pages.get(conn, keyword_id, locale)
    if own is None:
        raise HTTPException(
            404,
            f"keyword {keyword_id} has no own page in {locale}: "
            f"PUT /api/keywords/{keyword_id}/own-page?locale={locale} sets it",
        )
    return own


@api_router.put(
    "/keywords/{keyword_id}/own-page",
    response_model=OwnPageOut,
    dependencies=[Depends(require_token)],
    responses=refused_with(400, 401, 403, 404, 413, 503),
)
async def put_own_page(
    request: Request,
    body: OwnPageIn,
    keyword_id: int = Path(ge=1, le=MAX_ID),
    locale: str = _locale_query(),
) -> dict[str, Any]:
    """Our page in a locale: crawled with the competitors by the next `crawl_onpage`, then
    compared with them (GET …/gap). Setting the same URL again keeps its last crawl."""
    wanted = checked_locale(locale)
    if (problem := url_problem(body.url)) is not None:
        raise RequestValidationError([{"loc": ["body", "url"], "msg": problem, "type": "value_error"}])
    async with request.app.state.pool.connection() as conn:
        await check_keyword_locale(conn, keyword_id, wanted)
        await own_pages.set_url(conn, keyword_id, wanted, body.url.strip())
        own = await own_pages.get(conn, keyword_id, wanted)
    assert own is not None
    return {"keywordId": keyword_id, "locale": wanted, **{k: own[k] for k in ("url", "setAt", "crawl")}}


@api_router.delete(
    "/keywords/{keyword_id}/own-page",
    status_code=204,
    dependencies=[Depends(require_token)],
    responses=refused_with(401, 403, 404, 503),
)
async def delete_own_page(
    request: Request, keyword_id: int = Path(ge=1, le=MAX_ID), locale: str = _locale_query()
) -> None:
    """No own page in that locale any more (its gap goes with it)."""
    wanted = checked_locale(locale)
    async with request.app.state.pool.connection() as conn:
        await check_keyword_locale(conn, keyword_id, wanted)
        if not await own_pages.delete(conn, keyword_id, wanted):
            raise HTTPException(404, f"keyword {keyword_id} has no own page in {wanted}")


@api_router.get("/keywords/{keyword_id}/own-page", response_model=OwnPageOut, responses=refused_with(404, 503))
async def get_own_page(
    request: Request, keyword_id: int = Path(ge=1, le=MAX_ID), locale: str = _locale_query()
) -> dict[str, Any]:
    """Our page in a locale and its last crawl fields."""
    wanted = checked_locale(locale)
    own = await _own_page(request, keyword_id, wanted)
    return {"keywordId": keyword_id, "locale": wanted, **{k: own[k] for k in ("url", "setAt", "crawl")}}


async def load_gap(request: Request, keyword_id: int, locale: str) -> dict[str, Any]:
    wanted = checked_locale(locale)
    keyword = await _keyword_name(request, keyword_id, wanted)
    own = await _own_page(request, keyword_id, wanted)
    return own_pages.answer(keyword_id, keyword, wanted, own)


@api_router.get("/keywords/{keyword_id}/gap", response_model=GapOut, responses=refused_with(404, 503))
async def get_gap(
    request: Request, keyword_id: int = Path(ge=1, le=MAX_ID), locale: str = _locale_query()
) -> dict[str, Any]:
    """Our page against the SERP's in one locale, as the last `crawl_onpage` computed it: the
    terms most top pages use that ours lacks or under-uses, the heading terms and schema.org
    types they have and it has not, word counts side by side. A page of ours that is blocked,
    empty or not crawled yet says so (`available` false, `reason`)."""
    return await load_gap(request, keyword_id, locale)


@api_router.get("/keywords/{keyword_id}/progress", response_model=ProgressOut, responses=refused_with(404, 503))
async def get_progress(request: Request, keyword_id: int = Path(ge=1, le=MAX_ID)) -> dict[str, Any]:
    """The keyword's on-page job as it runs, to poll every ~2 s: queued (a task waits), running
    (pages Firecrawl is done with out of those sent, updated as the batches are polled), done or
    failed with its totals {crawled, blocked, failed}; idle when it was never crawled."""
    async with request.app.state.pool.connection() as conn:
        found = await progress.read(conn, keyword_id)
    if found is None:
        raise HTTPException(404, f"keyword {keyword_id} does not exist")
    return found


@page_router.get("/keywords/{keyword_id}/gap", response_class=HTMLResponse)
async def gap_page(
    request: Request, keyword_id: int = Path(ge=1, le=MAX_ID), locale: str = Query(max_length=20)
) -> HTMLResponse:
    found = await load_gap(request, keyword_id, locale)
    return templates.TemplateResponse(request, "gap.html", {"g": found, "nav": "keywords"})
