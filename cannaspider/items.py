"""Typed items. Feeds export StoreProduct and DispensaryRecord (see README, "Item schema")."""

from __future__ import annotations

from dataclasses import InitVar, dataclass
from datetime import datetime
from typing import Any


@dataclass
class DispensaryRecord:
    """A store as discovery saw it; upserted into dispensaries + discovery_locations."""

    platform_dispensary_id: str
    name: str
    slug: str | None = None
    menu_url: str | None = None
    address: str | None = None
    city: str | None = None
    state: str | None = None
    zip: str | None = None
    lat: float | None = None
    lng: float | None = None
    timezone: str | None = None
    phone: str | None = None
    is_recreational: bool | None = None
    is_medical: bool | None = None
    platform: str = "dutchie"
    dispensary_id: int | None = None  # set by the writer
    # The platform's object as sent, for discovery_locations.raw. Not a field (an init-only
    # argument kept as a plain attribute): feeds export an item's fields, and must not carry it.
    raw: InitVar[dict[str, Any] | None] = None

    def __post_init__(self, raw: dict[str, Any] | None) -> None:
        self.raw_object = raw


@dataclass
class EntryPointResolution:
    """The outcome of slug → platform_dispensary_id for one store."""

    dispensary_id: int
    platform_dispensary_id: str | None
    slug: str | None
    method: str  # "graphql", "embedded-script", "iframe", "unresolved"
    error: str | None = None


@dataclass(slots=True)
class RawProduct:
    """One product exactly as its platform returned it (Dutchie: FilteredProducts); its platform's
    normalization turns it into StoreProduct."""

    dispensary_id: int
    crawl_run_id: int | None
    raw: dict[str, Any]
    page: int = 0
    platform: str = "dutchie"  # the store's platform, whose normalizer reads `raw` (cannaspider/platforms/)


@dataclass  # no slots: orjson serialises a __dict__ dataclass ~4x faster (the options jsonb column)
class ProductOption:
    option: str
    size_value: float | None
    size_unit: str | None
    price_rec: float | None
    price_med: float | None
    price_rec_special: float | None
    price_med_special: float | None
    quantity: int | None
    quantity_available: int | None
    kiosk_quantity_available: int | None
    raw_option: str | None = None  # the rawOptions entry aligned with it: the size when `option` is a tier name
    # what this size costs per unit (identity.unit_prices: each size its own SKU): per gram of a
    # weighed category, per 100 mg THC of an edible, else per unit; None when implausible
    unit_price: float | None = None
    unit_price_special: float | None = None
    unit_price_basis: str | None = None  # 'g' | '100mg_thc' | 'unit'


@dataclass(slots=True)
class Potency:
    value: float | None
    unit: str | None  # 'percent' | 'mg' | 'mg_per_g'
    range: list[float] | None = None


@dataclass(slots=True)
class StoreProduct:
    """The canonical product (one row of store_products; one snapshot per crawl)."""

    dispensary_id: int
    crawl_run_id: int | None
    provider_product_id: str
    name_raw: str
    name: str
    brand_name_raw: str | None
    brand_id: str | None
    category: str | None
    subcategory: str | None
    strain_type: str | None
    price_rec: float | None
    price_med: float | None
    price_rec_special: float | None
    price_med_special: float | None
    is_on_special: bool
    options: list[ProductOption]
    thc: Potency
    cbd: Potency
    cannabinoids: list[dict[str, Any]]
    specials: list[dict[str, Any]]
    effects: dict[str, Any]
    image_url: str | None
    images: list[str]
    quantity_available: int | None
    provider_created_at: datetime | None
    provider_updated_at: datetime | None
    provider: str = "dutchie"
    brand_logo_url: str | None = None  # brand.imageUrl: stored once per brand (pipelines/images.py)
    # identity across stores and unit prices (cannaspider/identity.py, docs/analytics.md)
    enterprise_product_id: str | None = None  # Dutchie's enterpriseProductId, when sent
    brand_name_key: str | None = None  # the brand's normalized name
    name_key: str | None = None  # the product's normalized name, without the brand's in front
    size_key: str = ""  # the options' sizes, smallest first ('1g,3.5g')
    unit_price: float | None = None  # price_rec per unit_price_basis
    unit_price_special: float | None = None  # the same option's special price per unit_price_basis
    unit_price_basis: str | None = None  # 'g' | '100mg_thc' | 'unit'
    status: str | None = None  # Dutchie's Status of the product ('Active'), as sent
    brand_description: str | None = None  # brand.description: stored on the brand (brands.description)
