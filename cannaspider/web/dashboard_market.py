"""The dashboard's market pages (docs/dashboard.md): the states with market analytics, and a
state's morning page: its day's figures and events, price per gram by category over time, brand
availability ranked with its 4-week change, the brand and price movers. The same figures as
GET /api/market (market_queries.market), rendered on the server like the other pages."""

from __future__ import annotations

from datetime import date

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi import Path as PathParam
from fastapi.responses import HTMLResponse

from cannaspider.web import market_queries as q
from cannaspider.web.chart import line_chart
from cannaspider.web.dashboard import templates

router = APIRouter(prefix="/dashboard/market", include_in_schema=False)
HISTORY_DAYS = 28  # the price-per-gram chart's span: the same four weeks as the availability change
BRANDS_SHOWN = 50


@router.get("", response_class=HTMLResponse)
async def market_index(request: Request) -> HTMLResponse:
    async with request.app.state.pool.connection() as conn:
        states = await q.market_states(conn)
    return templates.TemplateResponse(request, "market_index.html", {"states": states, "nav": "market"})


@router.get("/{state}", response_class=HTMLResponse)
async def market_page(
    request: Request,
    state: str = PathParam(pattern="^[A-Za-z]{2}$"),
    day: date | None = Query(None, ge=date(2000, 1, 1), le=date(2999, 12, 31)),  # type: ignore[arg-type]
) -> HTMLResponse:
    async with request.app.state.pool.connection() as conn:
        found = await q.market(
            conn, state=state.upper(), day=day, compare_days=HISTORY_DAYS, city="", limit=BRANDS_SHOWN, movers=10
        )
        if found is None:
            raise HTTPException(404, f"no market analytics for {state.upper()}: not crawled, or not refreshed yet")
        history = await q.category_history(conn, state=state.upper(), day=found["day"], days=HISTORY_DAYS)
    series: dict[str, list[tuple[date, float]]] = {}
    for row in history:
        series.setdefault(row["category"] or "(none)", []).append((row["day"], row["median"]))
    context = {"m": found, "chart": line_chart(series), "nav": "market", "compare_days": HISTORY_DAYS}
    return templates.TemplateResponse(request, "market.html", context)
