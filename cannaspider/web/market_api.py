"""Canonical brands and products over HTTP (docs/analytics.md, "One brand, one product"):

GET /api/brands?state=&limit=    canonical brands by the stores carrying them: stores per state and per
                                 platform, median price
GET /api/brands?q=cafe           the brands whose name contains q (any case, accent or punctuation)
GET /api/brands/{id}             one brand: its spellings and aliases, per state and per category
GET /api/products/{canonical_id} a canonical product, its sizes (each its own SKU) and every store that sells it
GET /api/products/{canonical_id}/history   per day across stores: the stores listing it, per size its
                                 lowest, median and highest price
GET /api/market?state=AZ         a state's market on a day: brand availability and its change, movers,
                                 price per gram per category and per size, the day's events (docs/analytics.md,
                                 "Market analytics")
GET /api/market/states?category= every state side by side: price per gram and the common sizes' prices
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Any, Literal

from fastapi import APIRouter, HTTPException, Path, Query, Request
from pydantic import BaseModel, Field

from cannaspider.analytics import market
from cannaspider.identity import brand_key_name
from cannaspider.web import market_queries as q
from cannaspider.web.events import unprocessable
from cannaspider.web.models import NO_NUL, refused_with

router = APIRouter(prefix="/api", tags=["market"])

Basis = Literal["g", "100mg_thc", "unit"]
# a figure's stores per platform (docs/analytics.md, "Across platforms"): they add up to its stores
BY_PLATFORM = "its stores per platform ({'dutchie': 8, 'jane': 4}); they add up to the figure's stores"


class BrandSummaryOut(BaseModel):
    id: int
    name: str | None
    stores: int = Field(description="stores with one of its products in stock")
    products: int = Field(description="its canonical products in stock somewhere")
    store_products: int
    median_price: float | None = Field(description="median price_rec of its store products in stock")
    stores_by_state: dict[str, int]
    stores_by_platform: dict[str, int] = Field(
        description="its stores per platform ({'dutchie': 8, 'jane': 4}) on each state's last rolled day"
        " (GET /api/market's figure), summed over the states listed: from the day's complete crawls, where"
        " `stores` counts its products in stock at the last refresh, so the two can differ"
    )


class BrandStateOut(BaseModel):
    state: str
    stores: int
    stores_by_platform: dict[str, int] = Field(description=BY_PLATFORM)
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
    provider_brand_ids: list[str] = Field(
        description="the platforms' brand ids resolved to it (Dutchie's brandId, Jane's product_brand_id)"
    )
    aliases: list[str] = Field(description="operator aliases (`scrapy brands alias`), normalized")
    states: list[BrandStateOut]
    categories: list[BrandCategoryOut]


class ProductOptionOut(BaseModel):
    option: str | None = Field(description="the option as the menu names it ('1/8oz', 'N/A', 'Tier 1')")
    size_value: float | None
    size_unit: str | None = Field(description="'g', 'mg', 'ml', 'each' (a tier's size from its raw option)")
    price_rec: float | None
    price_rec_special: float | None
    unit_price: float | None = Field(description="its own unit price: each size is its own SKU")
    unit_price_special: float | None
    unit_price_basis: Basis | None


class ProductStoreOut(BaseModel):
    dispensary_id: int
    store: str
    city: str | None
    state: str | None
    platform: str = Field(description="the store's menu platform ('dutchie', 'jane')")
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
    options: list[ProductOptionOut] = Field(description="its sizes, each with its price and unit price")


SIZE = "its size: grams for a weighed option ('3.5g'), else the option's own name ('N/A', '10pk')"
SKU_PRICES = (
    "an option's price on a day is the day's closing price of its store product (the cheapest option's, from"
    " the snapshots) times the option's price over the cheapest's now (docs/analytics.md, 'Sizes as SKUs')"
)


class ProductSizeOut(BaseModel):
    size: str = Field(description=SIZE)
    grams: float | None
    stores: int = Field(description="stores with it in stock now")
    skus: int
    price_min: float | None
    price_median: float | None
    price_max: float | None
    unit_price_median: float | None
    unit_price_basis: Basis | None = Field(description="null when its stores price it on different bases")


class CanonicalProductOut(BaseModel):
    id: int
    name: str | None
    brand_id: int | None
    brand: str | None
    category: str | None
    size_key: str | None = Field(description="its option sizes, smallest first ('1g,3.5g')")
    enterprise_product_id: str | None
    sizes: list[ProductSizeOut] = Field(description="each size its own SKU, over the stores with it in stock")
    stores: list[ProductStoreOut] = Field(description="in stock first, cheapest first")


class HistorySizeOut(BaseModel):
    size: str = Field(description=SIZE)
    grams: float | None
    stores: int = Field(description="stores listing this size that day")
    price_min: float | None
    price_median: float | None
    price_max: float | None
    unit_price_median: float | None
    unit_price_basis: Basis | None


class HistoryDayOut(BaseModel):
    day: date
    stores: int = Field(description="stores whose complete crawl that day listed it (the market's rule)")
    store_products: int
    snapshots: int = Field(
        description="the crawls' snapshots behind the day's figures (its listings: GET /api/products/{id}'s stores;"
        " each one's snapshots and runs: GET /api/stores/{id}/products/{pid}/history)"
    )
    sizes: list[HistorySizeOut] = Field(description=SKU_PRICES)


class ProductHistoryOut(BaseModel):
    id: int
    name: str | None
    brand_id: int | None
    brand: str | None
    category: str | None
    size_key: str | None
    enterprise_product_id: str | None
    since: date
    until: date
    days: list[HistoryDayOut] = Field(description="oldest first; a day no complete crawl listed it is absent")


MAX_ID = 2**63 - 1  # ids are bigints: a larger one is a 422, not a database error
# a day outside them is a 422: date arithmetic near year 1 or 9999 would overflow into a 500
FIRST_DAY, LAST_DAY = date(2000, 1, 1), date(2999, 12, 31)
DAY_PATTERN = "^2[0-9]{3}-"  # a year from FIRST_DAY's to LAST_DAY's


@router.get("/brands", response_model=list[BrandSummaryOut], responses=refused_with(503))
async def list_brands(
    request: Request,
    state: str | None = Query(None, min_length=2, max_length=2, pattern="^[A-Za-z]{2}$"),
    limit: int = Query(100, ge=1, le=1000),
    search: str | None = Query(
        None,
        alias="q",
        min_length=1,
        max_length=200,
        pattern=NO_NUL,
        description="brands whose name contains this, in any case, with or without accents and punctuation"
        " ('cafe' finds 'Café Nuit', 'mohave cannabis co' finds 'MOHAVE CANNABIS COMPANY')",
    ),
) -> list[dict[str, Any]]:
    key = None
    if search is not None:
        key = brand_key_name(search)
        if key is None:
            raise unprocessable("q", "q has no letter or digit to search by")
    async with request.app.state.pool.connection() as conn:
        rows = await q.brands(conn, state=state.upper() if state else None, limit=limit, q=key)
    return rows


@router.get("/brands/{brand_id}", response_model=BrandOut, responses=refused_with(404, 503))
async def get_brand(request: Request, brand_id: int = Path(ge=1, le=MAX_ID)) -> dict[str, Any]:
    async with request.app.state.pool.connection() as conn:
        found = await q.brand(conn, brand_id)
    if found is None:
        raise HTTPException(404, f"no canonical brand {brand_id}")
    return found


HISTORY_PARAMETERS = ("days", "since", "until")
MAX_SPAN = 366  # days of one history answer


@router.get("/products/{canonical_id}/history", response_model=ProductHistoryOut, responses=refused_with(404, 503))
async def get_canonical_product_history(
    request: Request,
    canonical_id: int = Path(ge=1, le=MAX_ID),
    since: date | None = Query(
        None, description="first UTC day (default: `days` before until)", json_schema_extra={"pattern": DAY_PATTERN}
    ),
    until: date | None = Query(
        None, description="last UTC day (default: its last rolled day)", json_schema_extra={"pattern": DAY_PATTERN}
    ),
    days: int = Query(30, ge=1, le=MAX_SPAN, description="the span when since or until is left out"),
) -> dict[str, Any]:
    unknown = sorted(set(request.query_params) - set(HISTORY_PARAMETERS))
    if unknown:
        raise unprocessable(unknown[0], f"unknown parameter {unknown[0][:40]!r}: use {', '.join(HISTORY_PARAMETERS)}")
    for name, value in (("since", since), ("until", until)):
        if value is not None and not FIRST_DAY <= value <= LAST_DAY:
            raise unprocessable(name, f"{name} must be from {FIRST_DAY} to {LAST_DAY}")
    if since is not None and until is not None:
        if since > until:
            raise unprocessable("since", f"since ({since}) is after until ({until})")
        if (until - since).days >= MAX_SPAN:
            raise unprocessable("until", f"at most {MAX_SPAN} days from since to until")
    async with request.app.state.pool.connection() as conn:
        found = await q.product_history(conn, canonical_id, since=since, until=until, days=days)
    if found is None:
        raise HTTPException(404, f"no canonical product {canonical_id}")
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


class MarketBrandOut(BaseModel):
    id: int = Field(description="canonical brand (GET /api/brands/{id})")
    name: str | None
    stores: int = Field(description="stores carrying it that day (one of its products in a complete crawl's feed)")
    stores_then: int = Field(description="the same, on compared_with")
    products: int | None = Field(description="its canonical products seen that day")
    median_price: float | None = Field(description="median closing price_rec of its store products that day")
    availability: float = Field(description="stores / stores_crawled (0 to 1)")
    availability_then: float | None = Field(description="on compared_with; null when no store was crawled then")
    change: float | None = Field(description="availability - availability_then")
    stores_by_platform: dict[str, int] = Field(description=BY_PLATFORM)
    stores_by_platform_then: dict[str, int] = Field(description="the same, on compared_with")


class BrandMoversOut(BaseModel):
    gains: list[MarketBrandOut] = Field(description="largest availability gains, largest first")
    losses: list[MarketBrandOut] = Field(description="largest availability losses, largest first")


class PriceMoveOut(BaseModel):
    rank: int
    event_id: int = Field(description="the price_changed event (GET /api/events)")
    crawl_run_id: int
    dispensary_id: int
    store: str
    city: str | None
    platform: str = Field(description="the store's menu platform ('dutchie', 'jane')")
    provider_product_id: str
    product: str | None
    brand_id: int | None
    brand: str | None
    price_old: float
    price_new: float
    change_pct: float


class PriceMoversOut(BaseModel):
    drops: list[PriceMoveOut]
    rises: list[PriceMoveOut]
    stores_by_platform: dict[str, int] = Field(description="the stores of the movers listed, per platform")


class MarketCategoryOut(BaseModel):
    category: str
    stores: int
    stores_by_platform: dict[str, int] = Field(description=BY_PLATFORM)
    products: int = Field(description="store products seen that day")
    on_special: int = Field(description="of them, on special at the day's last snapshot")
    skus_weighed: int = Field(description="their weighed options (SKUs) priced per gram: the figures below")
    price_per_g_mean: float | None = Field(description="over every weighed size, equivalized to the gram")
    price_per_g_p25: float | None
    price_per_g_median: float | None
    price_per_g_p75: float | None


class MarketSizeOut(BaseModel):
    category: str
    grams: float = Field(description="the size (an eighth: 3.5)")
    stores: int = Field(description="stores selling it that day")
    stores_by_platform: dict[str, int] = Field(description=BY_PLATFORM)
    skus: int = Field(description="store products' options of this size seen that day")
    price_mean: float
    price_p25: float
    price_median: float
    price_p75: float
    price_per_g_median: float


class MarketEventsOut(BaseModel):
    listed: int
    price_changed: int
    price_drops: int
    price_rises: int
    specials_started: int
    specials_ended: int
    out_of_stock: int
    back_in_stock: int
    price_changes_implausible: int = Field(
        description="of price_changed, the moves too large to be real ($30 → $0.01, ×1000): neither drops nor rises,"
        " never movers (docs/analytics.md, 'Implausible price moves')"
    )


class MarketOut(BaseModel):
    state: str
    day: date = Field(description="the UTC day shown: the one asked for, else the last one rolled, at most it")
    compared_with: date = Field(description="day - compare_days")
    stores_crawled: int = Field(description="stores with a complete crawl that day: availability's denominator")
    stores_crawled_then: int | None
    stores_by_platform: dict[str, int] = Field(description="stores_crawled per platform; they add up to it")
    stores_by_platform_then: dict[str, int] | None = Field(description="stores_crawled_then per platform")
    crawl_runs_by_platform: dict[str, int] = Field(
        description="the day's complete crawl runs of the state's stores per platform: the runs the figures are"
        " made of (GET /api/events and the movers name theirs)"
    )
    products_seen: int
    events: MarketEventsOut = Field(description="the day's product events in the state, by type")
    brands: list[MarketBrandOut] = Field(description="brands carried that day, most stores first")
    brand_movers: BrandMoversOut
    price_movers: PriceMoversOut
    categories: list[MarketCategoryOut] = Field(description="for the state, or the city asked for")
    sizes: list[MarketSizeOut] = Field(description=f"each weighed size per category, the state's; {SKU_PRICES}")


MARKET_PARAMETERS = ("city", "compare_days", "day", "limit", "movers", "state")


@router.get("/market", response_model=MarketOut, responses=refused_with(404, 503))
async def get_market(
    request: Request,
    state: str = Query(min_length=2, max_length=2, pattern="^[A-Za-z]{2}$"),
    day: date | None = Query(
        None,
        description=f"a UTC day, {FIRST_DAY} to {LAST_DAY} (default: the last rolled)",
        json_schema_extra={"pattern": DAY_PATTERN},  # the range, as the schema can say it
    ),
    compare_days: int = Query(28, ge=1, le=366, description="the change is measured against this many days before"),
    city: str | None = Query(None, min_length=1, max_length=100, pattern=NO_NUL, description="categories of a city"),
    limit: int = Query(100, ge=1, le=1000, description="brands listed"),
    movers: int = Query(10, ge=1, le=market.MOVERS_PER_DAY, description="movers of each kind"),
) -> dict[str, Any]:
    unknown = sorted(set(request.query_params) - set(MARKET_PARAMETERS))
    if unknown:
        raise unprocessable(unknown[0], f"unknown parameter {unknown[0][:40]!r}: use {', '.join(MARKET_PARAMETERS)}")
    if day is not None and not FIRST_DAY <= day <= LAST_DAY:
        raise unprocessable("day", f"day must be from {FIRST_DAY} to {LAST_DAY}")
    async with request.app.state.pool.connection() as conn:
        found = await q.market(
            conn,
            state=state.upper(),
            day=day,
            compare_days=compare_days,
            city=city or "",
            limit=limit,
            movers=movers,
        )
    if found is None:
        raise HTTPException(
            404,
            f"no market analytics for {state.upper()} on or before {day or 'today'}: not crawled, or not refreshed yet",
        )
    return found


class StateSizeOut(BaseModel):
    grams: float
    stores: int | None = None
    skus: int | None = None
    price_mean: float | None = None
    price_p25: float | None = None
    price_median: float | None = None
    price_p75: float | None = None
    price_per_g_median: float | None = None


class StateRowOut(BaseModel):
    state: str
    day: date = Field(description="the state's last rolled day up to the one asked for")
    stores_crawled: int
    stores: int = Field(description="stores that sold the category that day")
    stores_by_platform: dict[str, int] = Field(description=BY_PLATFORM)
    products: int
    skus_weighed: int
    price_per_g_mean: float | None
    price_per_g_p25: float | None
    price_per_g_median: float | None
    price_per_g_p75: float | None
    sizes: list[StateSizeOut] = Field(description="the table's sizes in order; only grams where it sold none")


class StatesTableOut(BaseModel):
    category: str
    day: date | None = Field(description="the day asked for (null: each state's last rolled day)")
    sizes: list[float] = Field(description="the sizes compared: Flower's 1, 3.5, 7, 14, 28 g, else its most sold")
    states: list[StateRowOut]


STATES_PARAMETERS = ("category", "day")


@router.get("/market/states", response_model=StatesTableOut, responses=refused_with(503))
async def get_market_states(
    request: Request,
    category: str = Query("Flower", min_length=1, max_length=100, pattern=NO_NUL),
    day: date | None = Query(
        None,
        description=f"a UTC day, {FIRST_DAY} to {LAST_DAY} (default: each state's last rolled)",
        json_schema_extra={"pattern": DAY_PATTERN},
    ),
) -> dict[str, Any]:
    unknown = sorted(set(request.query_params) - set(STATES_PARAMETERS))
    if unknown:
        raise unprocessable(unknown[0], f"unknown parameter {unknown[0][:40]!r}: use {', '.join(STATES_PARAMETERS)}")
    if day is not None and not FIRST_DAY <= day <= LAST_DAY:
        raise unprocessable("day", f"day must be from {FIRST_DAY} to {LAST_DAY}")
    async with request.app.state.pool.connection() as conn:
        return await q.states_table(conn, category=category, day=day)
