"""The dashboard's pages, rendered on the server from templates/ (Jinja2): an overview, the stores, a
store's products (filterable) and latest events, a product's history chart and events, the crawl
health, every node's crawl jobs (jobs.py), and the market pages (a state's morning page: its day's
figures and events, price per gram by category over time, brand availability ranked with its 4-week
change, the brand and price movers; the same figures as GET /api/market). Every page is plain HTML
with its CSS inline in base.html, light on a phone, and one small script of ours, static/tables.js
(served here, nothing fetched from anywhere else): it makes every table sortable by a column and
downloadable as CSV. Times show their time zone (UTC), in a <time> element that carries the instant.
The JSON behind each page is the documented API in dashboard_api.py (jobs.py for the jobs page)."""

from __future__ import annotations

from datetime import UTC, date, datetime
from functools import lru_cache
from importlib import resources
from typing import Any

from fastapi import APIRouter, Depends, HTTPException, Query, Request
from fastapi import Path as PathParam
from fastapi.responses import HTMLResponse, Response
from fastapi.templating import Jinja2Templates
from jinja2 import Environment, PackageLoader, select_autoescape
from markupsafe import Markup, escape

from cannaspider.web import dashboard_api as api
from cannaspider.web import dashboard_queries as q
from cannaspider.web import jobs
from cannaspider.web import market_queries as market_q
from cannaspider.web.chart import EVENT_LABELS, line_chart, price_chart
from cannaspider.web.events import product_timeline, store_events
from cannaspider.web.models import NO_NUL

router = APIRouter(prefix="/dashboard", include_in_schema=False)
# a package loader, not a folder path: it also reads the templates out of a zipped egg (Scrapyd)
templates = Jinja2Templates(
    env=Environment(loader=PackageLoader("cannaspider.web", "templates"), autoescape=select_autoescape())
)


def _ago(value: datetime | None) -> Markup | str:
    """How long ago, in a <time> that carries the instant (the tables sort by it) and shows it in
    UTC on hover."""
    if value is None:
        return "never"
    seconds = (datetime.now(UTC) - value).total_seconds()
    text = "just now"
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            text = f"{int(seconds // size)} {unit} ago"
            break
    utc = value.astimezone(UTC)
    return Markup('<time datetime="{}" title="{}">{}</time>').format(
        utc.isoformat(), utc.strftime("%Y-%m-%d %H:%M UTC"), text
    )


def _when(value: datetime | None, fmt: str = "%b %d %H:%M") -> Markup | str:
    """A time with its time zone ('Dec 06 14:00 UTC'): every time is stored and shown in UTC."""
    if value is None:
        return ""
    utc = value.astimezone(UTC)
    return Markup('<time datetime="{}">{} UTC</time>').format(utc.isoformat(), utc.strftime(fmt))


def _change_pct(event: dict[str, Any]) -> float | None:
    """A price event's change in percent of the price before (None for other events)."""
    old, new = event.get("price_rec_old"), event.get("price_rec")
    if event.get("type") != "price_changed" or old is None or new is None or not old:
        return None
    return float((new - old) / old * 100)


@lru_cache(maxsize=1)
def _tables_js() -> bytes:
    return (resources.files("cannaspider.web") / "static" / "tables.js").read_bytes()


def _money(value: float | None) -> str:
    return "–" if value is None else f"${value:,.2f}"


def _bdi(value: object) -> Markup | str:
    """User or payload text (a store's, a product's, a brand's name; a page's URL; an error) in an
    element of its own direction: a right-to-left override inside it reorders itself, never the
    page around it (docs/dashboard.md). Nothing for None or ''. A string, what nearly every call
    gets, is escaped directly: Markup.format's formatter cost four times as much, a quarter of
    rendering a brand's page of 500 store products (benchmarks/analyst.py)."""
    if value is None or value == "":
        return ""
    if type(value) is str:
        return Markup(f"<bdi>{escape(value)}</bdi>")
    return Markup("<bdi>{}</bdi>").format(value)


def _fsi(value: object) -> str:
    """The same isolation where no element may go (<title>, <option>): Unicode's first-strong
    isolate around the text (escaped by autoescape like any string)."""
    return "" if value is None else f"\u2068{value}\u2069"


templates.env.filters["bdi"] = _bdi
templates.env.filters["fsi"] = _fsi
templates.env.filters["ago"] = _ago
templates.env.filters["when"] = _when
templates.env.filters["change_pct"] = _change_pct
templates.env.filters["money"] = _money
templates.env.filters["zip"] = lambda a, b: zip(a, b, strict=True)
templates.env.filters["event_label"] = lambda kind: EVENT_LABELS.get(kind, kind)


@router.get("/tables.js")
async def tables_js() -> Response:
    """The tables' script (sort, CSV), from the package (also out of a zipped egg)."""
    return Response(_tables_js(), media_type="text/javascript", headers={"cache-control": "max-age=3600"})


@router.get("", response_class=HTMLResponse)
@router.get("/", response_class=HTMLResponse, include_in_schema=False)
async def overview_page(request: Request) -> HTMLResponse:
    figures = await api.overview_figures(request)
    reports = await api.crawl_reports(request)
    return templates.TemplateResponse(request, "overview.html", {"o": figures, "reports": reports, "nav": "overview"})


@router.get("/stores", response_class=HTMLResponse)
async def stores_page(request: Request, state: str | None = Query(None, max_length=2, pattern=NO_NUL)) -> HTMLResponse:
    async with request.app.state.pool.connection() as conn:
        rows = await q.stores(conn, state=state.upper() if state else None)
    return templates.TemplateResponse(request, "stores.html", {"stores": rows, "state": state, "nav": "stores"})


@router.get("/stores/{store_id}", response_class=HTMLResponse)
async def store_page(
    store_id: int,
    request: Request,
    brand_id: str | None = Query(None, pattern="^[0-9]{0,18}$"),  # '' (the form's "all"): no filter
    brand: str | None = Query(None, pattern=NO_NUL),  # a name in any spelling (a link from before)
    category: str | None = Query(None, pattern=NO_NUL),
    stock: str | None = None,  # anything but in_stock, oos, missing: no filter
) -> HTMLResponse:
    stock_filter = stock if stock in ("in_stock", "oos", "missing") else None
    async with request.app.state.pool.connection() as conn:
        store = await q.store(conn, store_id)
        if store is None:
            raise HTTPException(404, f"store {store_id} does not exist")
        brands, categories = await q.facets(conn, store_id)
        brand_ids = await api.brand_filter(conn, int(brand_id) if brand_id else None, brand)
        rows = await q.products(
            conn,
            store_id,
            brand_ids=brand_ids,
            category=category or None,
            stock=stock_filter,  # type: ignore[arg-type]
        )
        events = await store_events(conn, store_id)
        menu_events = await q.menu_events(conn, store_id)
    context = {
        "store": store,
        "menu_events": menu_events,
        "products": rows,
        "events": events,
        "brands": brands,
        "categories": categories,
        "f": {"brand_ids": brand_ids or [], "category": category or "", "stock": stock_filter or ""},
        "nav": "stores",
    }
    return templates.TemplateResponse(request, "store.html", context)


@router.get("/stores/{store_id}/products/{provider_product_id}", response_class=HTMLResponse)
async def product_page(
    store_id: int, request: Request, provider_product_id: str = PathParam(pattern=NO_NUL)
) -> HTMLResponse:
    async with request.app.state.pool.connection() as conn:
        store = await q.store(conn, store_id)
        found = await q.product(conn, store_id, provider_product_id) if store else None
        if store is None or found is None:
            raise HTTPException(404, f"store {store_id} has no product {provider_product_id!r}")
        snapshots = await q.history(conn, store_id, provider_product_id)
        timeline = await product_timeline(conn, store_id, provider_product_id)
    context = {
        "store": store,
        "product": found,
        "snapshots": snapshots,
        "events": timeline["events"],
        "oos_intervals": timeline["oos_intervals"],
        "chart": price_chart(snapshots, timeline["events"], timeline["oos_intervals"]),
        "nav": "stores",
    }
    return templates.TemplateResponse(request, "product.html", context)


@router.get("/jobs", response_class=HTMLResponse)
async def jobs_page(request: Request, filters: dict[str, Any] = Depends(jobs.job_filters)) -> HTMLResponse:
    """Every node's crawl jobs, the failed ones with their exit code and reason (GET /api/jobs)."""
    found = await jobs.read(request, filters)
    shown = {key: value for key, value in filters.items() if value is not None and key != "limit"}
    context = {**found, "f": shown, "nav": "jobs"}
    return templates.TemplateResponse(request, "jobs.html", context)


@router.get("/health", response_class=HTMLResponse)
async def health_page(request: Request) -> HTMLResponse:
    return templates.TemplateResponse(
        request, "health.html", {"reports": await api.crawl_reports(request), "nav": "health"}
    )


# The dashboard's market pages (docs/dashboard.md): the states with market analytics, and a
# state's morning page: its day's figures and events, price per gram by category over time, brand
# availability ranked with its 4-week change, the brand and price movers. The same figures as
# GET /api/market (market_queries.market), rendered on the server like the other pages.

market_router = APIRouter(prefix="/dashboard/market", include_in_schema=False)
HISTORY_DAYS = 28  # the price-per-gram chart's span: the same four weeks as the availability change
BRANDS_SHOWN = 50


@market_router.get("", response_class=HTMLResponse)
async def market_index(
    request: Request, category: str = Query("Flower", min_length=1, max_length=100, pattern=NO_NUL)
) -> HTMLResponse:
    async with request.app.state.pool.connection() as conn:
        states = await market_q.market_states(conn)
        table = await market_q.states_table(conn, category=category, day=None)
        categories = await market_q.weighed_categories(conn)
    context = {"states": states, "table": table, "categories": categories or [category], "nav": "market"}
    return templates.TemplateResponse(request, "market_index.html", context)


@market_router.get("/{state}", response_class=HTMLResponse)
async def market_page(
    request: Request,
    state: str = PathParam(pattern="^[A-Za-z]{2}$"),
    day: date | None = Query(None, ge=date(2000, 1, 1), le=date(2999, 12, 31)),  # type: ignore[arg-type]
) -> HTMLResponse:
    async with request.app.state.pool.connection() as conn:
        found = await market_q.market(
            conn, state=state.upper(), day=day, compare_days=HISTORY_DAYS, city="", limit=BRANDS_SHOWN, movers=10
        )
        if found is None:
            raise HTTPException(404, f"no market analytics for {state.upper()}: not crawled, or not refreshed yet")
        history = await market_q.category_history(conn, state=state.upper(), day=found["day"], days=HISTORY_DAYS)
    series: dict[str, list[tuple[date, float]]] = {}
    for row in history:
        series.setdefault(row["category"] or "(none)", []).append((row["day"], row["median"]))
    context = {"m": found, "chart": line_chart(series), "nav": "market", "compare_days": HISTORY_DAYS}
    return templates.TemplateResponse(request, "market.html", context)


# A canonical product across stores (docs/dashboard.md): its sizes now, its days (the stores
# listing it, per size the lowest, median and highest price; the chart draws each size's median),
# and the stores selling it with each size's price. GET /api/products/{id} and its /history.
products_router = APIRouter(prefix="/dashboard/products", include_in_schema=False)
PRODUCT_DAYS = 30  # the history's span on the page


@products_router.get("/{canonical_id}", response_class=HTMLResponse)
async def canonical_product_page(request: Request, canonical_id: int = PathParam(ge=1, le=2**63 - 1)) -> HTMLResponse:
    async with request.app.state.pool.connection() as conn:
        found = await market_q.canonical_product(conn, canonical_id, limit=1000)
        if found is None:
            raise HTTPException(404, f"no canonical product {canonical_id}")
        history = await market_q.product_history(conn, canonical_id, since=None, until=None, days=PRODUCT_DAYS)
    assert history is not None  # the product exists: found above
    series: dict[str, list[tuple[date, float]]] = {}
    for day in history["days"]:
        for size in day["sizes"]:
            if size["price_median"] is not None:
                series.setdefault(size["size"] or "(one size)", []).append((day["day"], size["price_median"]))
    context = {"p": found, "h": history, "chart": line_chart(series), "nav": "market"}
    return templates.TemplateResponse(request, "canonical_product.html", context)
