"""Dutchie as a platform (cannaspider/platforms/interface.py): its GraphQL operations behind the
interface's four questions. The rules themselves live beside it: requests and answers in
graphql.py and operations.py, slugs in slugs.py, a product's id in ids.py, pagination and its
completeness in pagination.py, store objects in stores.py, the product's fields in normalizer.py.

Configured by the DUTCHIE_* settings (cannaspider/settings.py): the endpoint, the client name the
API expects, the persisted-query hashes, the page size and cap, the search radius."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Self

import scrapy
from scrapy.http import Response
from scrapy.settings import BaseSettings

from cannaspider.items import RawProduct, StoreProduct
from cannaspider.platforms.dutchie import graphql, ids, normalizer, slugs, stores
from cannaspider.platforms.dutchie.operations import (
    CONSUMER_DISPENSARIES,
    DEFAULT_PERSISTED_HASHES,
    DISPENSARY_SEARCH,
    FILTERED_PRODUCTS,
    consumer_dispensaries_variables,
    dispensary_search_variables,
    products_variables,
)
from cannaspider.platforms.dutchie.pagination import PageState, after_page
from cannaspider.platforms.geography import search_points
from cannaspider.platforms.interface import (
    Callback,
    Decision,
    Errback,
    Lookup,
    MenuPage,
    MenuState,
    Platform,
    PlatformFailure,
    StoresFound,
)
from cannaspider.storable import Losses


class DutchiePlatform:
    name: ClassVar[str] = "dutchie"
    # the defaults settings.py takes from here (they are data of this package, not literals)
    default_settings: ClassVar[Mapping[str, Any]] = {"DUTCHIE_PERSISTED_HASHES": DEFAULT_PERSISTED_HASHES}

    def __init__(self, settings: BaseSettings):
        self.graphql_url: str = settings.get("DUTCHIE_GRAPHQL_URL")
        self.client_name: str = settings.get("DUTCHIE_CLIENT_NAME")
        self.hashes: dict[str, str] = settings.getdict("DUTCHIE_PERSISTED_HASHES")
        self.per_page = settings.getint("DUTCHIE_PER_PAGE")
        self.max_pages = settings.getint("DUTCHIE_MAX_PAGES")
        self.search_distance_mi = settings.getfloat("DUTCHIE_SEARCH_DISTANCE_MI")
        self.search_min_population = settings.getint("DUTCHIE_SEARCH_MIN_POPULATION")

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> Self:
        return cls(settings)

    @staticmethod
    def classify(response: Response) -> dict[str, Any] | PlatformFailure:
        return graphql.read(response)

    def request(
        self,
        operation: str,
        variables: dict[str, Any],
        *,
        callback: Callback | None,
        errback: Callback | None = None,
        meta: dict[str, Any] | None = None,
        persisted: bool = True,
    ) -> scrapy.Request:
        """One GraphQL request of ours (a persisted query while its hash is known)."""
        return graphql.build_request(
            self.graphql_url,
            operation,
            variables,
            persisted_hash=self.hashes.get(operation) if persisted else None,
            client_name=self.client_name,
            callback=callback,
            errback=errback,
            meta=meta,
        )

    # -- the stores of an area ----------------------------------------------------------------
    def area_requests(
        self, state: str, city: str | None, *, callback: Callback, errback: Errback, meta: dict[str, Any]
    ) -> list[scrapy.Request]:
        distance = self.search_distance_mi
        points = search_points(state, distance, city=city, min_population=self.search_min_population)
        return [
            self.request(
                DISPENSARY_SEARCH,
                dispensary_search_variables(point.lat, point.lng, distance, state),
                callback=callback,
                errback=errback,
                meta={**meta, "point": point.name},
            )
            for point in points
        ]

    def read_stores(self, response: Response) -> StoresFound | PlatformFailure:
        result = graphql.read(response)
        if isinstance(result, PlatformFailure):
            return result
        found = result.get("filteredDispensaries")
        if not isinstance(found, list):
            return StoresFound([], malformed="malformed payload (no filteredDispensaries list)")
        records = [stores.dispensary_record(obj) for obj in found]
        kept = [r for r in records if r is not None]
        return StoresFound(kept, skipped=len(records) - len(kept))

    # -- a store's platform id ----------------------------------------------------------------
    def slug_of(self, menu_url: str | None) -> str | None:
        return slugs.slug_from_menu_url(menu_url)

    def lookup_request(
        self, slug: str, *, callback: Callback, errback: Errback, meta: dict[str, Any]
    ) -> scrapy.Request:
        return self.request(
            CONSUMER_DISPENSARIES, consumer_dispensaries_variables(slug), callback=callback, errback=errback, meta=meta
        )

    def read_lookup(self, response: Response, slug: str) -> Lookup:
        result = graphql.read(response)
        if isinstance(result, PlatformFailure):
            return Lookup(slug=slug, reason=f"ConsumerDispensaries failed: {result.message}", failure=result)
        found = result.get("filteredDispensaries")
        first = found[0] if isinstance(found, list) and found and isinstance(found[0], dict) else None
        pid = first.get("id") if first else None
        if first is None or not isinstance(pid, str) or not slugs.is_object_id(pid):
            return Lookup(slug=slug, reason=f"ConsumerDispensaries found no store for {slug!r}")
        return Lookup(platform_id=pid.lower(), slug=first.get("cName") or slug)

    def read_website(self, html: str, url: str) -> Lookup:
        pid = slugs.id_from_embed(html)
        if pid:
            return Lookup(platform_id=pid)
        slug = slugs.slug_from_embed(html)
        if slug:
            return Lookup(slug=slug)
        return Lookup(reason=f"no Dutchie embedded menu found on {url}")

    # -- a store's menu, page by page -----------------------------------------------------------
    def menu_state(self, per_page: int | None = None, max_pages: int | None = None) -> PageState:
        return PageState(per_page or self.per_page, max_pages or self.max_pages)

    def menu_request(
        self,
        platform_id: str,
        page: int,
        per_page: int,
        *,
        callback: Callback,
        errback: Errback,
        meta: dict[str, Any],
    ) -> scrapy.Request:
        variables = products_variables(platform_id, page, per_page)
        return self.request(FILTERED_PRODUCTS, variables, callback=callback, errback=errback, meta=meta)

    def read_menu_page(self, response: Response) -> MenuPage | PlatformFailure:
        result = graphql.read(response)
        if isinstance(result, PlatformFailure):
            return result
        block = result.get("filteredProducts")
        products = block.get("products") if isinstance(block, dict) else None
        if not isinstance(block, dict) or not isinstance(products, list):
            return MenuPage([], malformed="malformed payload: filteredProducts.products missing")
        return MenuPage(products, block.get("queryInfo"))

    def product_id(self, raw: object) -> str | None:
        return ids.product_id(raw)

    def after_page(
        self, state: MenuState, page: int, product_ids: list[str], page_info: Any, anonymous: int = 0
    ) -> Decision:
        assert isinstance(state, PageState)  # the state menu_state() made
        return after_page(state, page, product_ids, page_info, anonymous)

    # -- a raw product as the shared item -------------------------------------------------------
    def normalize(self, item: RawProduct, losses: Losses) -> StoreProduct:
        return normalizer.normalize(item, losses)

    # -- the proxy pool's probe ---------------------------------------------------------------
    def probe_request(
        self, url: str, *, meta: dict[str, Any], callback: Callback | None = None, errback: Errback | None = None
    ) -> scrapy.Request:
        """ConsumerDispensaries for a store that does not exist: small, and answered by the API
        (not the edge) only when the proxy gets through."""
        return graphql.build_request(
            url,
            CONSUMER_DISPENSARIES,
            consumer_dispensaries_variables("proxy-check"),
            persisted_hash=None,
            client_name=self.client_name,
            callback=callback,
            errback=errback,
            meta=meta,
        )


# mypy holds the class to the interface here (the registry imports it by name)
_CONFORMS: type[Platform] = DutchiePlatform
