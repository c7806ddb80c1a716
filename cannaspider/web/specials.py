"""The specials running now (docs/analytics.md, "Specials"): the deals the menus run, one per store
and deal, with what they cover and since when, and per category the list price against the
discounted price. Over HTTP and as a dashboard page:

GET /api/specials?state=&store=&brand=&category=&limit=&covers=
GET /dashboard/specials (the same filters)

A deal is what a product's `specials` (store_products.specials, as the normalizers keep them:
name, type, discount, percent_discount, bundle_price, required_quantity, Jane's id) names; the
products of one store naming the same deal are that deal's products. A product on special whose
menu names no deal (`special` flag or a special price alone) is in an unnamed deal of its store.
"Now" is the products' current rows: in stock, on special, in a store whose menu is not empty
(dispensaries.menu_empty_since NULL: a menu gone dark says nothing of what runs). The deals are
read from them at each request, in store order from a partial index, the page's only; the
figures over every deal of the market or a state (products, stores, per category) come from the
view the analytics refresh keeps (specials_category_now: grouping the market's 100,000 products
on special per request took hundreds of ms), a store's or a brand's from the rows.

Since when: a product's special began at the crawl that saw it start (its latest `special_started`
event, docs/analytics.md "Events"), or, on special since it was first listed, when it was first
seen; a deal's is its earliest product's. Computed for the deals of the page only, after the
LIMIT: the market's 100,000 products on special are grouped, not looked up one by one.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.responses import HTMLResponse
from psycopg import AsyncConnection
from pydantic import BaseModel, Field

from cannaspider.web.dashboard import templates
from cannaspider.web.dashboard_queries import _all, planned
from cannaspider.web.events import unprocessable
from cannaspider.web.models import NO_NUL, refused_with

MAX_ID = 2**63 - 1

# the products on special now, filtered; a product with no deal named takes part in one unnamed deal
ON_SPECIAL = """
on_special AS (
    SELECT sp.id, sp.dispensary_id, coalesce(d.state, '') AS state, sp.category, sp.price_rec, sp.price_rec_special,
           sp.unit_price, sp.unit_price_special, sp.unit_price_basis,
           CASE WHEN jsonb_typeof(sp.specials) = 'array' AND sp.specials <> '[]' THEN sp.specials
                ELSE '[{}]'::jsonb END AS specials
      FROM store_products sp JOIN dispensaries d ON d.id = sp.dispensary_id
     WHERE sp.is_on_special AND sp.stock_status = 'in_stock' AND d.menu_empty_since IS NULL
       AND (%(state)s::text IS NULL OR d.state = %(state)s)
       AND (%(store)s::bigint IS NULL OR sp.dispensary_id = %(store)s)
       AND (%(brand)s::bigint IS NULL OR sp.canonical_brand_id = %(brand)s)
       AND (%(category)s::text IS NULL OR sp.category = %(category)s))
"""

# one row per store and deal, in store order, the page's deals only; then their store, since when
# and the products they cover (the first `covers` by name), looked up for those deals alone
DEALS = f"""
WITH {ON_SPECIAL},
deals AS (
    SELECT o.dispensary_id, s->>'name' AS name, s->>'type' AS type, s->>'discount' AS discount,
           s->>'percent_discount' AS percent_discount, s->>'bundle_price' AS bundle_price,
           s->>'required_quantity' AS required_quantity, s->>'id' AS special_id,
           count(*) AS products, array_agg(o.id) AS ids
      FROM on_special o CROSS JOIN LATERAL jsonb_array_elements(o.specials) s
     GROUP BY 1, 2, 3, 4, 5, 6, 7, 8
     ORDER BY 1, 2 NULLS LAST, 3, 4, 8
     LIMIT %(limit)s)
SELECT g.dispensary_id, d.name AS store, d.city, coalesce(d.state, '') AS state, d.platform,
       g.name, g.type, g.discount::float8 AS discount, g.percent_discount::boolean AS percent_discount,
       g.bundle_price::float8 AS bundle_price, g.required_quantity::float8::int AS required_quantity, g.special_id,
       g.products, p.since, p.brand_ids, p.categories, p.covers
  FROM deals g JOIN dispensaries d ON d.id = g.dispensary_id
 CROSS JOIN LATERAL (
       SELECT min(coalesce((SELECT max(e.occurred_at) FROM product_events e
                             WHERE e.store_product_id = sp.id AND e.type = 'special_started'),
                           sp.first_seen_at)) AS since,
              array_agg(DISTINCT sp.canonical_brand_id) FILTER (WHERE sp.canonical_brand_id IS NOT NULL) AS brand_ids,
              array_agg(DISTINCT sp.category) FILTER (WHERE sp.category IS NOT NULL) AS categories,
              (array_agg(jsonb_build_object(
                  'provider_product_id', sp.provider_product_id, 'name', coalesce(sp.name, sp.name_raw),
                  'brand_id', sp.canonical_brand_id, 'category', sp.category,
                  'price_rec', sp.price_rec::float8, 'price_rec_special', sp.price_rec_special::float8,
                  'unit_price', sp.unit_price::float8, 'unit_price_special', sp.unit_price_special::float8,
                  'unit_price_basis', sp.unit_price_basis)
                  ORDER BY coalesce(sp.name, sp.name_raw), sp.provider_product_id))[1:%(covers)s] AS covers
         FROM store_products sp WHERE sp.id = ANY(g.ids)) p
 ORDER BY g.dispensary_id, g.name NULLS LAST, g.type, g.discount, g.special_id
"""
BRAND_NAMES = "SELECT id, coalesce(display_name, name) FROM brands WHERE id = ANY(%s)"

# per category, over every product of the filters on special: list against discounted price, and
# the same per unit where the category has one basis (a price per gram of flower, per unit of a
# tincture: never one median over both)
CATEGORIES = f"""
WITH {ON_SPECIAL}
SELECT coalesce(category, '') AS category, count(*) AS products, count(DISTINCT dispensary_id) AS stores,
       (percentile_cont(0.5) WITHIN GROUP (ORDER BY price_rec))::float8 AS list_price,
       (percentile_cont(0.5) WITHIN GROUP (ORDER BY price_rec_special))::float8 AS special_price,
       (percentile_cont(0.5) WITHIN GROUP (ORDER BY 1 - price_rec_special / price_rec)
            FILTER (WHERE price_rec > 0))::float8 AS discount,
       CASE WHEN count(DISTINCT unit_price_basis) = 1 THEN min(unit_price_basis) END AS unit_price_basis,
       CASE WHEN count(DISTINCT unit_price_basis) = 1
            THEN (percentile_cont(0.5) WITHIN GROUP (ORDER BY unit_price))::float8 END AS list_unit_price,
       CASE WHEN count(DISTINCT unit_price_basis) = 1
            THEN (percentile_cont(0.5) WITHIN GROUP (ORDER BY unit_price_special))::float8 END AS special_unit_price
  FROM on_special GROUP BY 1 ORDER BY 1
"""

TOTALS = f"""
WITH {ON_SPECIAL}
SELECT count(*) AS products, count(DISTINCT dispensary_id) AS stores FROM on_special
"""

# the same two, for the whole market or a state, from the view the analytics refresh keeps
# (specials_category_now, migration 042: state NULL is every state, category NULL every category)
CATEGORIES_NOW = """
SELECT category, products, stores, list_price, special_price, discount, unit_price_basis, list_unit_price,
       special_unit_price
  FROM specials_category_now
 WHERE state IS NOT DISTINCT FROM %(state)s AND category IS NOT NULL
   AND (%(category)s::text IS NULL OR category = %(category)s)
 ORDER BY category
"""
TOTALS_NOW = """
SELECT coalesce(max(products), 0) AS products, coalesce(max(stores), 0) AS stores,
       (SELECT max(started_at) FROM analytics_refreshes WHERE view_name = 'specials_category_now') AS as_of
  FROM specials_category_now
 WHERE state IS NOT DISTINCT FROM %(state)s AND category IS NOT DISTINCT FROM %(category)s
"""

STATES = "SELECT DISTINCT state FROM dispensaries WHERE state IS NOT NULL ORDER BY 1"
STORE_EXISTS = "SELECT 1 FROM dispensaries WHERE id = %s"
BRAND_EXISTS = "SELECT 1 FROM brands WHERE id = %s AND canonical_brand_id IS NULL"


class DealProductOut(BaseModel):
    provider_product_id: str
    name: str | None
    brand_id: int | None = Field(description="its canonical brand (GET /api/brands/{id})")
    brand: str | None
    category: str | None
    price_rec: float | None = Field(description="the list price (the lowest option's)")
    price_rec_special: float | None = Field(description="the discounted price of the same option")
    unit_price: float | None
    unit_price_special: float | None
    unit_price_basis: str | None = Field(description="'g', '100mg_thc' or 'unit'")


class DealOut(BaseModel):
    dispensary_id: int
    store: str
    city: str | None
    state: str
    platform: str
    name: str | None = Field(description="the deal's name as the menu gives it; null: a special price, no deal named")
    type: str | None = Field(description="the menu's type ('sale', 'bogo', …)")
    discount: float | None = Field(description="the amount off: percent when percent_discount, else dollars")
    percent_discount: bool | None
    bundle_price: float | None = Field(description="a bundle's price (Dutchie's itemsForAPrice)")
    required_quantity: int | None
    special_id: str | None = Field(description="the platform's id of the deal, when it sends one (Jane)")
    products: int = Field(description="the store's products in stock that take part in it")
    since: datetime | None = Field(description="when its earliest product's special began (see docs)")
    brand_ids: list[int] = Field(description="the canonical brands of its products")
    brand_names: list[str | None]
    categories: list[str]
    covers: list[DealProductOut] = Field(description="its products, by name, at most `covers` of them")


class SpecialCategoryOut(BaseModel):
    category: str
    products: int
    stores: int
    list_price: float | None = Field(description="median list price of its products on special")
    special_price: float | None = Field(description="median discounted price")
    discount: float | None = Field(description="median share off (0 to 1)")
    unit_price_basis: str | None = Field(description="null when the category mixes bases")
    list_unit_price: float | None
    special_unit_price: float | None


class SpecialsOut(BaseModel):
    products: int = Field(description="products on special under the filters (as of categories_as_of)")
    stores: int
    categories_as_of: datetime | None = Field(
        description="products, stores and categories of the market or a state are as of this analytics refresh"
        " (specials_category_now); null: computed now (a store or brand asked for)"
    )
    deals: list[DealOut] = Field(description="by store, then deal name; at most `limit`")
    categories: list[SpecialCategoryOut]


PARAMETERS = ("brand", "category", "covers", "limit", "state", "store")


async def specials(
    conn: AsyncConnection,
    *,
    state: str | None = None,
    store: int | None = None,
    brand: int | None = None,
    category: str | None = None,
    limit: int = 100,
    covers: int = 10,
) -> dict[str, Any]:
    params = {"state": state, "store": store, "brand": brand, "category": category, "limit": limit, "covers": covers}
    if store is None and brand is None:  # the market or a state: its figures from the refreshed view
        totals = (await _all(conn, TOTALS_NOW, params))[0]
        categories = await _all(conn, CATEGORIES_NOW, params)
    else:  # a store's or a brand's few: from the rows, now
        totals = {**(await planned(conn, TOTALS, params))[0], "as_of": None}
        categories = await planned(conn, CATEGORIES, params)
    deals = await planned(conn, DEALS, params)
    ids = sorted({b for deal in deals for b in deal["brand_ids"] or ()})
    names: dict[int, str | None] = dict(await (await conn.execute(BRAND_NAMES, (ids,))).fetchall()) if ids else {}
    for deal in deals:
        deal["brand_ids"] = sorted(deal["brand_ids"] or (), key=lambda b: (names.get(b) or "", b))
        deal["brand_names"] = [names.get(b) for b in deal["brand_ids"]]
        deal["categories"] = deal["categories"] or []
        for product in deal["covers"] or ():
            product["brand"] = names.get(product["brand_id"])
        deal["covers"] = deal["covers"] or []
    return {
        "products": totals["products"],
        "stores": totals["stores"],
        "categories_as_of": totals["as_of"],
        "deals": deals,
        "categories": categories,
    }


async def checked_filters(conn: AsyncConnection, store: int | None, brand: int | None) -> None:
    """A well-formed store or brand id that names nothing is a 404 saying which (not an empty
    answer: a typo); a malformed one is FastAPI's 422."""
    if store is not None and not await _all(conn, STORE_EXISTS, (store,)):
        raise HTTPException(404, f"no store {store}")
    if brand is not None and not await _all(conn, BRAND_EXISTS, (brand,)):
        raise HTTPException(404, f"no canonical brand {brand} (GET /api/brands?q=)")


router = APIRouter(prefix="/api", tags=["specials"])


@router.get("/specials", response_model=SpecialsOut, responses=refused_with(404, 503))
async def get_specials(
    request: Request,
    state: str | None = Query(None, min_length=2, max_length=2, pattern="^[A-Za-z]{2}$"),
    store: int | None = Query(None, ge=1, le=MAX_ID, description="a store's id (GET /api/stores)"),
    brand: int | None = Query(None, ge=1, le=MAX_ID, description="a canonical brand's id (GET /api/brands?q=)"),
    category: str | None = Query(None, min_length=1, max_length=100, pattern=NO_NUL),
    limit: int = Query(100, ge=1, le=1000, description="deals listed"),
    covers: int = Query(10, ge=0, le=100, description="products listed per deal"),
) -> dict[str, Any]:
    unknown = sorted(set(request.query_params) - set(PARAMETERS))
    if unknown:
        raise unprocessable(unknown[0], f"unknown parameter {unknown[0][:40]!r}: use {', '.join(PARAMETERS)}")
    async with request.app.state.pool.connection() as conn:
        await checked_filters(conn, store, brand)
        return await specials(
            conn,
            state=state.upper() if state else None,
            store=store,
            brand=brand,
            category=category,
            limit=limit,
            covers=covers,
        )


page_router = APIRouter(prefix="/dashboard", include_in_schema=False)
# The page lists the first deals in store order, each with its first products; the filters narrow
# it and the API gives up to 1,000. Rendering 200 deals of 20 products took ~70 ms of CPU a request
# at 2,000 stores (benchmarks/analyst.py), most of the page's time; 50 of 10 take a sixth of it.
DEALS_SHOWN = 50
COVERS_SHOWN = 10


@page_router.get("/specials", response_class=HTMLResponse)
async def specials_page(
    request: Request,
    state: str | None = Query(None, pattern="^([A-Za-z]{2})?$"),
    store: int | None = Query(None, ge=1, le=MAX_ID),
    brand: int | None = Query(None, ge=1, le=MAX_ID),
    category: str | None = Query(None, max_length=100, pattern=NO_NUL),
) -> HTMLResponse:
    async with request.app.state.pool.connection() as conn:
        await checked_filters(conn, store, brand)
        found = await specials(
            conn,
            state=state.upper() if state else None,
            store=store,
            brand=brand,
            category=category or None,
            limit=DEALS_SHOWN,
            covers=COVERS_SHOWN,
        )
        states = [r["state"] for r in await _all(conn, STATES, None)]
    context = {
        "s": found,
        "states": states,
        "f": {"state": (state or "").upper(), "store": store, "brand": brand, "category": category or ""},
        "shown": DEALS_SHOWN,
        "nav": "specials",
    }
    return templates.TemplateResponse(request, "specials.html", context)
