"""Jane as a platform (cannaspider/platforms/interface.py): Jane's Algolia indexes behind the
interface's four questions. Requests and answers, and store documents, in algolia.py; pagination
and its completeness in pagination.py; a product's id and fields in normalizer.py.

Configured by the JANE_* settings (cannaspider/settings.py): the Algolia host, the application id
and search-only key Jane's front end ships, the two index names, the page size and cap, the
search radius. A store's platform id is Jane's numeric store id, which its menu URL names
(`iheartjane.com/stores/<id>/…`), so a store found by the stores index needs no lookup."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, ClassVar, Self

import scrapy
from scrapy.http import Response
from scrapy.settings import BaseSettings

from cannaspider.items import RawProduct, StoreProduct
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
from cannaspider.platforms.jane import algolia, normalizer
from cannaspider.platforms.jane.pagination import MAX_HITS_PER_PAGE, PageState, after_page
from cannaspider.storable import Losses

# a menu URL or an embed naming a Jane store: iheartjane.com/stores/<id>/…, …/embed/stores/<id>/…
STORE_URL = re.compile(r"iheartjane\.com/(?:embed/)?stores/(\d{1,12})(?:[/?#\"']|$)", re.I)
# the store id in an embed's configuration ("storeId": 123, data-store-id="123", janeStoreId: 123)
EMBED_STORE_ID = re.compile(r"""(?:jane[_-]?store[_-]?id|data-jane-store-id)["'\s:=]+["']?(\d{1,12})""", re.I)


class JanePlatform:
    name: ClassVar[str] = "jane"
    default_settings: ClassVar[Mapping[str, Any]] = {}

    def __init__(self, settings: BaseSettings):
        self.base_url: str = settings.get("JANE_ALGOLIA_URL")
        self.app_id: str = settings.get("JANE_ALGOLIA_APP_ID")
        self.api_key: str = settings.get("JANE_ALGOLIA_API_KEY")
        self.products_index: str = settings.get("JANE_PRODUCTS_INDEX")
        self.stores_index: str = settings.get("JANE_STORES_INDEX")
        self.per_page = min(settings.getint("JANE_PER_PAGE"), MAX_HITS_PER_PAGE)
        self.max_pages = settings.getint("JANE_MAX_PAGES")
        self.search_distance_mi = settings.getfloat("JANE_SEARCH_DISTANCE_MI")
        self.search_min_population = settings.getint("JANE_SEARCH_MIN_POPULATION")

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> Self:
        return cls(settings)

    @staticmethod
    def classify(response: Response) -> dict[str, Any] | PlatformFailure:
        return algolia.read(response)

    def request(
        self,
        index: str,
        params: dict[str, Any],
        *,
        callback: Callback | None,
        errback: Errback | None = None,
        meta: dict[str, Any] | None = None,
        base_url: str | None = None,
    ) -> scrapy.Request:
        return algolia.build_request(
            base_url or self.base_url,
            index,
            params,
            app_id=self.app_id,
            api_key=self.api_key,
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
                self.stores_index,
                algolia.stores_params(point.lat, point.lng, distance, MAX_HITS_PER_PAGE),
                callback=callback,
                errback=errback,
                meta={**meta, "point": point.name},
            )
            for point in points
        ]

    def read_stores(self, response: Response) -> StoresFound | PlatformFailure:
        answer = algolia.read(response)
        if isinstance(answer, PlatformFailure):
            return answer
        hits = answer.get("hits")
        if not isinstance(hits, list):
            return StoresFound([], malformed="malformed answer (no hits list)")
        records = [algolia.dispensary_record(obj) for obj in hits]
        kept = [r for r in records if r is not None]
        return StoresFound(kept, skipped=len(records) - len(kept))

    # -- a store's platform id ----------------------------------------------------------------
    def slug_of(self, menu_url: str | None) -> str | None:
        """The store id a Jane menu URL names (Jane has no slugs to resolve: the id is the key)."""
        match = STORE_URL.search(menu_url or "")
        return match[1] if match else None

    def lookup_request(
        self, slug: str, *, callback: Callback, errback: Errback, meta: dict[str, Any]
    ) -> scrapy.Request:
        key = algolia.store_id(slug)
        params = {"query": "", "filters": f"id = {key}" if key else f'objectID:"{slug}"', "hitsPerPage": 1}
        return self.request(self.stores_index, params, callback=callback, errback=errback, meta=meta)

    def read_lookup(self, response: Response, slug: str) -> Lookup:
        answer = algolia.read(response)
        if isinstance(answer, PlatformFailure):
            return Lookup(slug=slug, reason=f"stores index lookup failed: {answer.message}", failure=answer)
        hits = answer.get("hits")
        record = algolia.dispensary_record(hits[0]) if isinstance(hits, list) and hits else None
        if record is None:
            return Lookup(slug=slug, reason=f"the stores index has no store {slug!r}")
        return Lookup(platform_id=record.platform_dispensary_id, slug=record.slug)

    def read_website(self, html: str, url: str) -> Lookup:
        match = STORE_URL.search(html) or EMBED_STORE_ID.search(html)
        if match:
            return Lookup(platform_id=str(int(match[1])))
        return Lookup(reason=f"no Jane menu embed found on {url}")

    # -- a store's menu, page by page -----------------------------------------------------------
    def menu_state(self, per_page: int | None = None, max_pages: int | None = None) -> PageState:
        return PageState(min(per_page or self.per_page, MAX_HITS_PER_PAGE), max_pages or self.max_pages)

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
        params = algolia.products_params(platform_id, page, per_page)
        return self.request(self.products_index, params, callback=callback, errback=errback, meta=meta)

    def read_menu_page(self, response: Response) -> MenuPage | PlatformFailure:
        answer = algolia.read(response)
        if isinstance(answer, PlatformFailure):
            return answer
        hits = answer.get("hits")
        if not isinstance(hits, list):
            return MenuPage([], malformed="malformed answer: no hits list")
        # the paging facts without the hits (the rules read nbHits, nbPages, page)
        return MenuPage(hits, {k: answer.get(k) for k in ("nbHits", "nbPages", "page", "hitsPerPage")})

    def product_id(self, raw: object) -> str | None:
        return normalizer.product_id(raw)

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
        """One hit of a store that does not exist: a few hundred bytes, answered by Algolia only
        when the proxy gets through (`url`: the Algolia host's base URL)."""
        params = algolia.products_params("0", 0, 1)
        return self.request(self.products_index, params, callback=callback, errback=errback, meta=meta, base_url=url)


# mypy holds the class to the interface here (the registry imports it by name)
_CONFORMS: type[Platform] = JanePlatform
