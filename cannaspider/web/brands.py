"""A brand as an analyst asks about it (docs/analytics.md, "Finding a brand"): found by name, then
where it is sold at what price per gram, its availability over time, its share of shelf and its
events. Over HTTP and as dashboard pages:

GET /api/brands?q=                    (market_api.py) brands whose name contains q, any case or accent
GET /api/brands/{id}/stores           every store product of the brand: store, product, size, price, $/g
GET /api/brands/{id}/market           its availability per state and day, its share of shelf per category
                                      on each state's last rolled day, its latest events
GET /dashboard/brands                 search
GET /dashboard/brands/{id}            the brand's page: the same figures

The stores come from the current rows (store_products); availability from the market table the
analytics refresh rolls (market_brand_daily: stores carrying it over the stores crawled, per day);
share of shelf from the view it refreshes (brand_shelf_now, migration 042): its store products in
stock over every brand's, per state and category, both counted over the same stores.
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Any, Literal

from fastapi import APIRouter, HTTPException, Path, Query, Request
from fastapi.responses import HTMLResponse
from psycopg import AsyncConnection
from pydantic import BaseModel, Field

from cannaspider.identity import brand_key_name
from cannaspider.web import market_queries as market_q
from cannaspider.web.chart import line_chart
from cannaspider.web.dashboard import templates
from cannaspider.web.dashboard_queries import _all, planned
from cannaspider.web.models import refused_with

MAX_ID = 2**63 - 1
Basis = Literal["g", "100mg_thc", "unit"]

# the brand's store products of one stock status (in stock, then out of stock: stores()), by state,
# store and product. The stores are walked in that order and each one's products of the brand read
# by the (brand, store) index, so that the first `limit` rows read only their own stores' products:
# sorting the brand's every store product read all of them, one heap page each (13,000 for a large
# brand at 2,000 stores: 460 ms cold for the brand's page, which lists the first 500)
STORES = """
SELECT sp.dispensary_id, d.name AS store, d.city, d.state, d.platform,
       sp.provider_product_id, coalesce(sp.name, sp.name_raw) AS product, sp.canonical_product_id,
       sp.category, cp.size_key, sp.price_rec::float8 AS price_rec, sp.price_rec_special::float8 AS price_rec_special,
       sp.is_on_special, sp.unit_price::float8 AS unit_price, sp.unit_price_basis, sp.stock_status, sp.last_seen_at
  FROM (SELECT id, name, city, coalesce(state, '') AS state, platform FROM dispensaries
         WHERE %(state)s::text IS NULL OR state = %(state)s
         ORDER BY coalesce(state, ''), name, id) d
  JOIN store_products sp ON sp.dispensary_id = d.id
  LEFT JOIN canonical_products cp ON cp.id = sp.canonical_product_id
 WHERE sp.canonical_brand_id = %(b)s AND sp.stock_status = %(stock)s
 ORDER BY d.state, d.name, d.id, coalesce(sp.name, sp.name_raw), sp.provider_product_id
 LIMIT %(limit)s
"""
STOCK_ORDER = ("in_stock", "oos")

AVAILABILITY = """
SELECT state, day, stores, stores_crawled, stores::float8 / nullif(stores_crawled, 0) AS availability
  FROM market_brand_daily
 WHERE canonical_brand_id = %(b)s AND day >= coalesce(%(until)s::date, 'infinity') - %(days)s
   AND day <= coalesce(%(until)s::date, 'infinity')
 ORDER BY state, day
"""

# share of shelf: the brand's store products in stock now per state and category, over every
# brand's (brand_shelf_now, migration 042: as of the last analytics refresh)
SHELF = """
SELECT m.state, m.category, m.products, m.stores, t.products AS category_products, t.stores AS category_stores,
       m.products::float8 / nullif(t.products, 0) AS share
  FROM brand_shelf_now m
  JOIN brand_shelf_now t ON t.brand_id = 0 AND t.state = m.state AND t.category = m.category
 WHERE m.brand_id = %(b)s
 ORDER BY m.state, share DESC, m.category
"""

EVENT_COLUMNS = """e.id, e.occurred_at, e.type, e.dispensary_id, d.name AS store, coalesce(d.state, '') AS state,
       sp.provider_product_id, coalesce(sp.name, sp.name_raw) AS product,
       e.price_rec_old::float8 AS price_rec_old, e.price_rec::float8 AS price_rec"""
# A brand's latest events, two ways by its size. A brand of few store products (SMALL_BRAND at most):
# each product's latest events by their index (some 50 µs a product). A larger one: its events among
# the market's newest EVENTS_WINDOW, by the brand each event keeps (product_events.canonical_brand_id,
# the brand its product had when it was written: migrations/046_brand_figures_now.sql), its own id's
# and those of the brands an alias merged into it, newest first by their (brand, id) index. Before
# it, the market's newest events were read back and each joined to its product until 50 were the
# brand's: a brand with few among them read all 50,000 (100-350 ms at 2,000 stores).
EVENTS_OF_FEW = f"""
SELECT {EVENT_COLUMNS}
  FROM store_products sp
 CROSS JOIN LATERAL (SELECT * FROM product_events x WHERE x.store_product_id = sp.id
                      ORDER BY x.id DESC LIMIT %(limit)s) e
  JOIN dispensaries d ON d.id = e.dispensary_id
 WHERE sp.canonical_brand_id = %(b)s
 ORDER BY e.id DESC
 LIMIT %(limit)s
"""
EVENTS = f"""
SELECT {EVENT_COLUMNS}
  FROM brands b
 CROSS JOIN LATERAL (
       SELECT x.* FROM product_events x
        WHERE x.canonical_brand_id = b.id
          AND x.id > (SELECT coalesce(max(id), 0) FROM product_events) - %(window)s
        ORDER BY x.id DESC
        LIMIT %(limit)s) e
  JOIN store_products sp ON sp.id = e.store_product_id
  JOIN dispensaries d ON d.id = e.dispensary_id
 WHERE b.id = %(b)s OR b.canonical_brand_id = %(b)s
 ORDER BY e.id DESC
 LIMIT %(limit)s
"""
SMALL_BRAND = 300
EVENTS_WINDOW = 50_000
BRAND_SIZE = "SELECT count(*) FROM (SELECT 1 FROM store_products WHERE canonical_brand_id = %s LIMIT %s) x"

EXISTS = "SELECT 1 FROM brands WHERE id = %s AND canonical_brand_id IS NULL"


class BrandStoreProductOut(BaseModel):
    dispensary_id: int
    store: str
    city: str | None
    state: str
    platform: str
    provider_product_id: str
    product: str | None
    canonical_product_id: int | None = Field(description="GET /api/products/{id}: the same product in every store")
    category: str | None
    size_key: str | None = Field(description="its option sizes, smallest first ('1g,3.5g'); '' when not weighed")
    price_rec: float | None
    price_rec_special: float | None
    is_on_special: bool
    unit_price: float | None = Field(description="per unit_price_basis: per gram for a weighed product")
    unit_price_basis: Basis | None
    stock_status: Literal["in_stock", "oos"]
    last_seen_at: datetime


class BrandStoresOut(BaseModel):
    brand_id: int
    products: list[BrandStoreProductOut] = Field(description="in stock first, then by state, store and product")


class AvailabilityOut(BaseModel):
    state: str
    day: date
    stores: int = Field(description="stores carrying it that day")
    stores_crawled: int
    availability: float | None = Field(description="stores / stores_crawled")


class ShelfOut(BaseModel):
    state: str
    category: str
    products: int = Field(description="its store products in stock in the category (stores whose menu is not empty)")
    stores: int
    category_products: int = Field(description="every brand's store products in stock in the category")
    category_stores: int
    share: float | None = Field(description="products / category_products (0 to 1)")


class BrandEventOut(BaseModel):
    id: int
    occurred_at: datetime
    type: str
    dispensary_id: int
    store: str
    state: str
    provider_product_id: str
    product: str | None
    price_rec_old: float | None
    price_rec: float | None


class BrandMarketOut(BaseModel):
    brand_id: int
    availability: list[AvailabilityOut] = Field(description="per state, oldest day first")
    shelf: list[ShelfOut] = Field(description="per state, largest share first; as of the last analytics refresh")
    events: list[BrandEventOut] = Field(
        description=f"its products' latest events, newest first, among the market's newest {EVENTS_WINDOW:,}"
    )


async def _exists(conn: AsyncConnection, brand_id: int) -> None:
    if not await _all(conn, EXISTS, (brand_id,)):
        raise HTTPException(404, f"no canonical brand {brand_id}")


async def stores(
    conn: AsyncConnection, brand_id: int, *, state: str | None, stock: str | None, limit: int
) -> list[dict[str, Any]]:
    """Its store products in stock first, then out of stock (or those of `stock`), up to `limit`:
    the out-of-stock ones are read only when those in stock leave room."""
    rows: list[dict[str, Any]] = []
    for status in STOCK_ORDER:
        if (stock is None or stock == status) and len(rows) < limit:
            params = {"b": brand_id, "state": state, "stock": status, "limit": limit - len(rows)}
            rows += await planned(conn, STORES, params)
    return rows


async def brand_market(
    conn: AsyncConnection, brand_id: int, *, days: int, until: date | None = None, events: int = 50
) -> dict[str, Any]:
    return {
        "brand_id": brand_id,
        "availability": await planned(conn, AVAILABILITY, {"b": brand_id, "days": days, "until": until}),
        "shelf": await planned(conn, SHELF, {"b": brand_id}),
        "events": await brand_events(conn, brand_id, events),
    }


async def brand_events(conn: AsyncConnection, brand_id: int, limit: int) -> list[dict[str, Any]]:
    """Its products' latest events, newest first (EVENTS_OF_FEW or EVENTS, by its size)."""
    row = await (await conn.execute(BRAND_SIZE, (brand_id, SMALL_BRAND + 1))).fetchone()
    query = EVENTS_OF_FEW if row and row[0] <= SMALL_BRAND else EVENTS
    return await planned(conn, query, {"b": brand_id, "limit": limit, "window": EVENTS_WINDOW})


router = APIRouter(prefix="/api", tags=["market"])
STATE = Query(None, min_length=2, max_length=2, pattern="^[A-Za-z]{2}$")


@router.get("/brands/{brand_id}/stores", response_model=BrandStoresOut, responses=refused_with(404, 503))
async def get_brand_stores(
    request: Request,
    brand_id: int = Path(ge=1, le=MAX_ID),
    state: str | None = STATE,
    stock: Literal["in_stock", "oos"] | None = Query(None),
    limit: int = Query(500, ge=1, le=10000),
) -> dict[str, Any]:
    async with request.app.state.pool.connection() as conn:
        await _exists(conn, brand_id)
        rows = await stores(conn, brand_id, state=state.upper() if state else None, stock=stock, limit=limit)
    return {"brand_id": brand_id, "products": rows}


@router.get("/brands/{brand_id}/market", response_model=BrandMarketOut, responses=refused_with(404, 503))
async def get_brand_market(
    request: Request,
    brand_id: int = Path(ge=1, le=MAX_ID),
    days: int = Query(
        28,
        ge=1,
        le=366,
        description="availability from this many days before the last rolled day to it (28: the 4-week change's ends)",
    ),
    events: int = Query(50, ge=0, le=500, description="latest events listed"),
) -> dict[str, Any]:
    async with request.app.state.pool.connection() as conn:
        await _exists(conn, brand_id)
        return await brand_market(conn, brand_id, days=days, until=await _last_day(conn), events=events)


async def _last_day(conn: AsyncConnection) -> date | None:
    row = await (await conn.execute("SELECT max(day) FROM market_state_daily")).fetchone()
    return row[0] if row else None


page_router = APIRouter(prefix="/dashboard", include_in_schema=False)
SEARCH_SHOWN = 100
# the page's first store products, in stock first in store order; a state narrows them and
# GET /api/brands/{id}/stores gives them all. Rendering 500 rows was ~30 ms of CPU a request at
# 2,000 stores (benchmarks/analyst.py), most of the page's time and over its 50 ms p95 alone.
STORES_SHOWN = 100


@page_router.get("/brands", response_class=HTMLResponse)
async def brands_page(request: Request, q: str | None = Query(None, max_length=200)) -> HTMLResponse:
    key = brand_key_name(q) if q else None
    async with request.app.state.pool.connection() as conn:
        found = await market_q.brands(conn, state=None, limit=SEARCH_SHOWN, q=key)
    return templates.TemplateResponse(request, "brands.html", {"brands": found, "q": q or "", "nav": "brands"})


@page_router.get("/brands/{brand_id}", response_class=HTMLResponse)
async def brand_page(
    request: Request, brand_id: int = Path(ge=1, le=MAX_ID), state: str | None = Query(None, pattern="^([A-Za-z]{2})?$")
) -> HTMLResponse:
    async with request.app.state.pool.connection() as conn:
        found = await market_q.brand(conn, brand_id)
        if found is None:
            raise HTTPException(404, f"no canonical brand {brand_id}")
        sold = await stores(conn, brand_id, state=state.upper() if state else None, stock=None, limit=STORES_SHOWN)
        market = await brand_market(conn, brand_id, days=28, until=await _last_day(conn))
    series: dict[str, list[tuple[date, float]]] = {}
    for row in market["availability"]:
        if row["availability"] is not None:
            series.setdefault(row["state"] or "(none)", []).append((row["day"], row["availability"] * 100))
    context = {
        "b": found,
        "stores": sold,
        "stores_shown": STORES_SHOWN,
        "m": market,
        "chart": line_chart(series, unit=""),
        "state": (state or "").upper(),
        "nav": "brands",
    }
    return templates.TemplateResponse(request, "brand.html", context)
