"""Canonical brands and products over HTTP (docs/analytics.md, "One brand, one product"):

GET /api/brands?state=&limit=    canonical brands by the stores carrying them: stores per state, median price
GET /api/brands/{id}             one brand: its spellings and aliases, per state and per category
GET /api/products/{canonical_id} a canonical product and every store that sells it, with price and stock
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from fastapi import APIRouter, HTTPException, Path, Query, Request
from pydantic import BaseModel, Field

from cannaspider.web import market_queries as q
from cannaspider.web.models import refused_with

router = APIRouter(prefix="/api", tags=["market"])

Basis = Literal["g", "100mg_thc", "unit"]


class BrandSummaryOut(BaseModel):
    id: int
    name: str | None
    stores: int = Field(description="stores with one of its products in stock")
    products: int = Field(description="its canonical products in stock somewhere")
    store_products: int
    median_price: float | None = Field(description="median price_rec of its store products in stock")
    stores_by_state: dict[str, int]


class BrandStateOut(BaseModel):
    state: str
    stores: int
    products: int
    store_products: int
    median_price: float | None
    median_price_per_g: float | None = Field(description="over its weighed products (unit_price_basis 'g')")


class BrandCategoryOut(BaseModel):
    category: str
    products: int
    stores: int
    median_price: float | None
    median_unit_price: float | None
    unit_price_basis: Basis | None = Field(description="the unit of median_unit_price; null when the category mixes")


class BrandOut(BaseModel):
    id: int
    name: str | None
    spellings: list[str] = Field(description="every name its menus sent")
    provider_brand_ids: list[str] = Field(description="Dutchie brandIds resolved to it")
    aliases: list[str] = Field(description="operator aliases (`scrapy brands alias`), normalized")
    states: list[BrandStateOut]
    categories: list[BrandCategoryOut]


class ProductStoreOut(BaseModel):
    dispensary_id: int
    store: str
    city: str | None
    state: str | None
    provider_product_id: str
    name: str
    price_rec: float | None
    price_rec_special: float | None
    is_on_special: bool
    unit_price: float | None
    unit_price_basis: Basis | None
    stock_status: Literal["in_stock", "oos"]
    quantity_available: int | None
    last_seen_at: datetime


class CanonicalProductOut(BaseModel):
    id: int
    name: str | None
    brand_id: int | None
    brand: str | None
    category: str | None
    size_key: str | None = Field(description="its option sizes, smallest first ('1g,3.5g')")
    enterprise_product_id: str | None
    stores: list[ProductStoreOut] = Field(description="in stock first, cheapest first")


MAX_ID = 2**63 - 1  # ids are bigints: a larger one is a 422, not a database error


@router.get("/brands", response_model=list[BrandSummaryOut], responses=refused_with(503))
async def list_brands(
    request: Request,
    state: str | None = Query(None, min_length=2, max_length=2, pattern="^[A-Za-z]{2}$"),
    limit: int = Query(100, ge=1, le=1000),
) -> list[dict[str, Any]]:
    async with request.app.state.pool.connection() as conn:
        rows = await q.brands(conn, state=state.upper() if state else None, limit=limit)
    return [{**r, "stores_by_state": r["stores_by_state"] or {}} for r in rows]


@router.get("/brands/{brand_id}", response_model=BrandOut, responses=refused_with(404, 503))
async def get_brand(request: Request, brand_id: int = Path(ge=1, le=MAX_ID)) -> dict[str, Any]:
    async with request.app.state.pool.connection() as conn:
        found = await q.brand(conn, brand_id)
    if found is None:
        raise HTTPException(404, f"no canonical brand {brand_id}")
    return found


@router.get("/products/{canonical_id}", response_model=CanonicalProductOut, responses=refused_with(404, 503))
async def get_canonical_product(
    request: Request, canonical_id: int = Path(ge=1, le=MAX_ID), limit: int = Query(1000, ge=1, le=10000)
) -> dict[str, Any]:
    async with request.app.state.pool.connection() as conn:
        found = await q.canonical_product(conn, canonical_id, limit=limit)
    if found is None:
        raise HTTPException(404, f"no canonical product {canonical_id}")
    return found
