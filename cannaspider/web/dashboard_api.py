"""The dashboard's JSON API (the pages in dashboard.py render the same data):

GET /api/stores                                               stores, last crawl, status, last error, menu empty since
GET /api/stores/{id}                                          one store, with its menu's emptied/returned events
GET /api/stores/{id}/products?brand=&category=&stock=         a store's products, filtered
GET /api/stores/{id}/products/{provider_product_id}/history   a product's snapshots, events and out-of-stock
                                                              intervals, oldest first
GET /api/health                                               overview figures and the monitors' last results
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi import Path as PathParam
from pydantic import ValidationError

from cannaspider.web import dashboard_queries as q
from cannaspider.web import health_reports
from cannaspider.web.dashboard_models import (
    CrawlHealthOut,
    HealthOut,
    HistoryOut,
    OverviewOut,
    StoreDetailOut,
    StoreOut,
    StoreProductsOut,
)
from cannaspider.web.events import product_timeline
from cannaspider.web.models import NO_NUL, refused_with

router = APIRouter(prefix="/api", tags=["dashboard"])


def reports_dir(request: Request) -> Path:
    return Path(request.app.state.reports_dir)


async def overview_figures(request: Request) -> dict[str, Any]:
    async with request.app.state.pool.connection() as conn:
        figures = await q.overview(conn)
    return {**figures, "blocks_24h": health_reports.blocks_since(reports_dir(request))}


def crawl_reports(request: Request) -> list[CrawlHealthOut]:
    out = []
    for report in health_reports.latest(reports_dir(request)):
        try:
            out.append(CrawlHealthOut.model_validate(report))
        except ValidationError:  # a report of another version: the page shows the others
            continue
    return out


@router.get("/stores", response_model=list[StoreOut])
async def list_stores(
    request: Request,
    state: str | None = Query(None, min_length=2, max_length=2, pattern=NO_NUL, description="two-letter state code"),
    limit: int = Query(500, ge=1, le=5000),
) -> list[dict[str, Any]]:
    async with request.app.state.pool.connection() as conn:
        return await q.stores(conn, state=state.upper() if state else None, limit=limit)


@router.get("/stores/{store_id}", response_model=StoreDetailOut, responses=refused_with(404))
async def store_detail(store_id: int, request: Request) -> dict[str, Any]:
    async with request.app.state.pool.connection() as conn:
        found = await q.stores(conn, store_id=store_id, limit=1)
        if not found:
            raise HTTPException(404, f"store {store_id} does not exist")
        return {**found[0], "menu_events": await q.menu_events(conn, store_id)}


@router.get("/stores/{store_id}/products", response_model=StoreProductsOut, responses=refused_with(404))
async def store_products(
    store_id: int,
    request: Request,
    brand: str | None = Query(None, pattern=NO_NUL),
    category: str | None = Query(None, pattern=NO_NUL),
    stock: q.StockFilter | None = Query(None, description="in_stock, oos, or missing (missed by 1-2 crawls)"),
    limit: int = Query(1000, ge=1, le=10000),
) -> dict[str, Any]:
    async with request.app.state.pool.connection() as conn:
        if await q.store(conn, store_id) is None:
            raise HTTPException(404, f"store {store_id} does not exist")
        brands, categories = await q.facets(conn, store_id)
        rows = await q.products(
            conn, store_id, brand=brand or None, category=category or None, stock=stock, limit=limit
        )
    return {"store": store_id, "brands": brands, "categories": categories, "products": rows}


@router.get(
    "/stores/{store_id}/products/{provider_product_id}/history", response_model=HistoryOut, responses=refused_with(404)
)
async def product_history(
    store_id: int,
    request: Request,
    provider_product_id: str = PathParam(pattern=NO_NUL),
    limit: int = Query(2000, ge=1, le=20000),
) -> dict[str, Any]:
    async with request.app.state.pool.connection() as conn:
        found = await q.product(conn, store_id, provider_product_id)
        if found is None:
            raise HTTPException(404, f"store {store_id} has no product {provider_product_id!r}")
        snapshots = await q.history(conn, store_id, provider_product_id, limit=limit)
        timeline = await product_timeline(conn, store_id, provider_product_id)
    return {
        "store": store_id,
        "provider_product_id": provider_product_id,
        "name": found["name"],
        "snapshots": snapshots,
        **timeline,
    }


@router.get("/health", response_model=HealthOut)
async def health(request: Request) -> HealthOut:
    return HealthOut(
        overview=OverviewOut(**await overview_figures(request)),
        crawls=crawl_reports(request),
    )
