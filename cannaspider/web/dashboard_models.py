"""Response bodies of the dashboard's JSON API (they make its part of /openapi.json)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from cannaspider.web.events import OosIntervalOut, ProductEventOut


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
    crawls: list[CrawlHealthOut] = Field(description="the newest crawl-health report of each spider")
