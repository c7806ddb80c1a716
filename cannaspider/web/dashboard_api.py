"""The dashboard's JSON API and its response bodies, which make its part of /openapi.json (the pages
in dashboard.py render the same data):

GET /api/stores                                               stores, last crawl, status, last error, menu empty since
GET /api/stores/{id}                                          one store, with its menu's emptied/returned events
GET /api/stores/{id}/products?brand=&category=&stock=         a store's products, filtered
GET /api/stores/{id}/products/{provider_product_id}/history   a product's snapshots, events and out-of-stock
                                                              intervals, oldest first
GET /api/health                                               overview figures and the monitors' last results
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi import Path as PathParam
from pydantic import BaseModel, Field, ValidationError

from cannaspider.web import dashboard_queries as q
from cannaspider.web.events import OosIntervalOut, ProductEventOut, product_timeline
from cannaspider.web.models import NO_NUL, refused_with


class StoreOut(BaseModel):
    id: int
    name: str
    city: str | None
    state: str | None
    platform_dispensary_id: str | None
    crawl_enabled: bool
    last_crawl_at: datetime | None = Field(description="the last *complete* crawl")
    resolution_error: str | None
    last_run_at: datetime | None = Field(description="start of the newest crawl run, whatever its outcome")
    last_run_status: Literal["running", "complete", "incomplete", "failed"] | None
    last_run_error: str | None
    last_run_products: int | None
    products: int
    oos: int
    menu_empty_since: datetime | None = Field(
        description="the start of the first of the store's current run of complete crawls that found its menu empty"
        " (its products keep the stock they had, and the market's figures of now leave the store out); null: its"
        " menu is not empty"
    )


class MenuEventOut(BaseModel):
    occurred_at: datetime = Field(description="the start of the crawl that saw it")
    type: Literal["menu_emptied", "menu_returned"]
    products: int = Field(
        description="menu_emptied: the store's products in stock, left as they were; menu_returned: the products seen"
    )
    crawl_run_id: int


class StoreDetailOut(StoreOut):
    menu_events: list[MenuEventOut] = Field(description="the latest times its menu emptied or returned, newest first")


class ProductOut(BaseModel):
    provider_product_id: str
    name: str
    brand: str | None
    category: str | None
    subcategory: str | None
    price_rec: float | None
    price_rec_special: float | None
    price_med: float | None
    is_on_special: bool
    stock_status: Literal["in_stock", "oos"]
    is_in_stock: bool
    quantity_available: int | None
    consecutive_misses: int = Field(description="complete crawls in a row that did not list it (3: out of stock)")
    last_seen_at: datetime
    canonical_brand_id: int | None = Field(description="its canonical brand (the brand page: /dashboard/brands/{id})")
    oos_since: datetime | None = Field(
        description="out of stock: since its out_of_stock event (null while in stock, or when it went out before "
        "events were written)"
    )


class StoreProductsOut(BaseModel):
    store: int
    brands: list[str] = Field(description="the store's brands (filter choices)")
    categories: list[str]
    products: list[ProductOut]


class SnapshotOut(BaseModel):
    captured_at: datetime
    crawl_run_id: int | None
    price_rec: float | None
    price_rec_special: float | None
    price_med: float | None
    is_on_special: bool
    is_in_stock: bool
    stock_status: str
    quantity_available: int | None


class HistoryOut(BaseModel):
    store: int
    provider_product_id: str
    name: str
    snapshots: list[SnapshotOut] = Field(description="one per crawl that saw the product, oldest first")
    events: list[ProductEventOut] = Field(description="what complete crawls saw change, oldest first")
    oos_intervals: list[OosIntervalOut] = Field(description="when it was out of stock, oldest first")


class MonitorResultOut(BaseModel):
    id: str
    monitor: str
    check: str
    status: Literal["passed", "failed", "error", "skipped"]
    message: str | None


class CrawlHealthOut(BaseModel):
    spider: str
    host: str | None = Field(None, description="the node that ran the crawl")
    ok: bool
    finish_reason: str | None
    started_at: datetime | None
    finished_at: datetime
    figures: dict[str, float]
    blocks_per_proxy: dict[str, int]
    monitors: list[MonitorResultOut]


class OverviewOut(BaseModel):
    stores: int
    stores_crawled_24h: int
    runs_complete_24h: int
    runs_incomplete_24h: int
    runs_failed_24h: int
    products: int
    in_stock: int
    oos: int
    blocks_24h: int = Field(description="blocks counted by the crawls of the last 24 h (their health reports)")
    queue_pending: int
    queue_running: int


class HealthOut(BaseModel):
    overview: OverviewOut
    crawls: list[CrawlHealthOut] = Field(
        description="the newest crawl-health report of each spider on each node (every node's: the database)"
    )


router = APIRouter(prefix="/api", tags=["dashboard"])


async def overview_figures(request: Request) -> dict[str, Any]:
    async with request.app.state.pool.connection() as conn:
        figures = await q.overview(conn)
        blocks = await q.blocks_24h(conn)
    return {**figures, "blocks_24h": blocks}


async def crawl_reports(request: Request) -> list[CrawlHealthOut]:
    async with request.app.state.pool.connection() as conn:
        reports = await q.latest_reports(conn)
    out = []
    for report in reports:
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
        crawls=await crawl_reports(request),
    )
