"""What a menu platform provides to the crawl: the interface every platform implements
(docs/platforms.md), and the shapes that cross it.

A platform (Dutchie, the next one) answers four questions and nothing else: which stores an area
has, which platform id a store's menu URL names, how to ask for a store's menu page by page and when
the menu is complete, and what one raw product is as the shared item (cannaspider/items.py). The
spiders (cannaspider/spiders/) hold everything else: units, tasks, runs, what a failure means for a
store's misses. Everything downstream of the item is platform-neutral and keyed by (platform,
platform product id).

An incomplete crawl says why in words (stored with its run) and of which kind (`INCOMPLETE_REASONS`):
the kinds are the shared rules, the same for every platform (tests/platforms/test_conformance.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, Self

import scrapy
from scrapy.http import Response
from scrapy.settings import BaseSettings
from twisted.python.failure import Failure

from cannaspider.items import DispensaryRecord, RawProduct, StoreProduct
from cannaspider.storable import Losses

# Why a store's menu crawl is incomplete (no product of the store is marked missing on it). A
# platform's pagination rules end a crawl incomplete only for the page kinds; the spider adds the rest.
INCOMPLETE_REASONS: Mapping[str, str] = {
    # the platform's pagination rules (Platform.after_page)
    "looping": "a page brought only products already seen: the server repeats itself",
    "page_cap": "the page cap was reached with more pages announced",
    "short_of_total": "fewer products arrived than the platform's own total count says exist",
    "anonymous": "a product had no usable id, so the ids seen cannot stand for the menu",
    "total_changed": "the platform's total count changed between two pages: the menu moved under the crawl",
    # the spider's (any platform)
    "failed_page": "a page's request failed or the platform answered it with an error",
    "malformed_page": "a page's answer holds no product list",
    "lease_lost": "the task's lease was lost: another worker may crawl the store",
    "unfinished": "the crawl ended before its last page was known (a callback raised, a request vanished)",
}
PAGINATION_REASONS = frozenset({"looping", "page_cap", "short_of_total", "anonymous", "total_changed"})

# Why an answer of a platform's API holds no data (PlatformFailure.kind): the proxy pool counts the
# first two against a proxy (stealth/policy.py), the health checks count them all per kind.
FAILURE_KINDS = frozenset({"blocked", "challenge", "http_error", "malformed", "graphql_errors", "stale_hash"})

# The shared item's vocabularies (cannaspider/items.py), whatever a platform calls them: an option's
# size unit (weights in grams), and the basis of a unit price (migrations/017_unit_prices.sql).
SIZE_UNITS = frozenset({"g", "mg", "ml", "each"})
UNIT_PRICE_BASES = frozenset({"g", "100mg_thc", "unit"})

Callback = Callable[..., Any]
Errback = Callable[[Failure], Any]


class NormalizationError(ValueError):
    """The product cannot be stored (no usable id or name)."""


@dataclass(frozen=True)
class PlatformFailure:
    """Why a platform's answer holds no data (`kind`: one of FAILURE_KINDS), and in its words."""

    kind: str
    detail: str

    @property
    def message(self) -> str:
        return f"{self.kind}: {self.detail}"


@dataclass(frozen=True)
class Decision:
    """After a menu page: the next page to ask for (None: stop), whether the menu is complete, and
    why (`kind`: one of INCOMPLETE_REASONS when it is not)."""

    next_page: int | None
    complete: bool = True
    reason: str = ""
    kind: str = ""


class MenuState(Protocol):
    """A store's menu crawl as the pagination rules keep it; the spider reads these three."""

    per_page: int  # the page size asked for (a server's cap may lower it during the crawl)
    pages_fetched: int
    seen: dict[str, None]  # the product ids seen, in order (an insertion-ordered set)


@dataclass(frozen=True)
class MenuPage:
    """One menu page's products (raw, as the platform sent them) and its paging facts."""

    products: list[Any]
    page_info: Any = None
    malformed: str | None = None  # the answer holds no product list: why (the crawl is incomplete)


@dataclass(frozen=True)
class StoresFound:
    """The stores of one area search: records, objects skipped (no id or name), or why none."""

    records: list[DispensaryRecord]
    skipped: int = 0
    malformed: str | None = None  # the answer holds no store list: why


@dataclass(frozen=True)
class Lookup:
    """A store's platform id resolution: the id, or a slug still to look up, or why neither."""

    platform_id: str | None = None
    slug: str | None = None
    reason: str | None = None
    failure: PlatformFailure | None = None  # the request failed (not an answer): a retry may resolve it


class Platform(Protocol):
    """A menu platform (docs/platforms.md has the rules each method keeps and the checklist)."""

    name: ClassVar[str]  # dispensaries.platform, worker_tasks.platform
    # defaults cannaspider/settings.py takes from the platform (data of its package, not literals)
    default_settings: ClassVar[Mapping[str, Any]]

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> Self: ...

    @staticmethod
    def classify(response: Response) -> dict[str, Any] | PlatformFailure:
        """An answer of the platform's API: its data, or why there is none (blocks included)."""
        ...

    # -- the stores of an area ----------------------------------------------------------------
    def area_requests(
        self, state: str, city: str | None, *, callback: Callback, errback: Errback, meta: dict[str, Any]
    ) -> list[scrapy.Request]:
        """The searches that cover a state (or one of its cities); each request's meta has `point`."""
        ...

    def read_stores(self, response: Response) -> StoresFound | PlatformFailure: ...

    # -- a store's platform id ----------------------------------------------------------------
    def slug_of(self, menu_url: str | None) -> str | None:
        """The store's key on the platform when its menu URL names it, else None."""
        ...

    def lookup_request(
        self, slug: str, *, callback: Callback, errback: Errback, meta: dict[str, Any]
    ) -> scrapy.Request: ...

    def read_lookup(self, response: Response, slug: str) -> Lookup: ...

    def read_website(self, html: str, url: str) -> Lookup:
        """A store's own website, rendered: the platform id its embed names, or a slug to look up."""
        ...

    # -- a store's menu, page by page -----------------------------------------------------------
    def menu_state(self, per_page: int | None = None, max_pages: int | None = None) -> MenuState:
        """A new menu crawl's state (the platform's configured page size and cap unless given)."""
        ...

    def menu_request(
        self,
        platform_id: str,
        page: int,
        per_page: int,
        *,
        callback: Callback,
        errback: Errback,
        meta: dict[str, Any],
    ) -> scrapy.Request: ...

    def read_menu_page(self, response: Response) -> MenuPage | PlatformFailure: ...

    def product_id(self, raw: object) -> str | None:
        """The raw product's id: stable across crawls, non-empty, storable; None when it has none."""
        ...

    def after_page(
        self, state: MenuState, page: int, product_ids: list[str], page_info: Any, anonymous: int = 0
    ) -> Decision:
        """The pagination rules: the next page, or the end, complete or not (and why)."""
        ...

    # -- a raw product as the shared item -------------------------------------------------------
    def normalize(self, item: RawProduct, losses: Losses) -> StoreProduct:
        """Raises NormalizationError when the product cannot be stored. What the product lost to the
        storable rules (cannaspider/storable.py) goes to `losses`, reported once it is done."""
        ...

    # -- the proxy pool's probe ---------------------------------------------------------------
    def probe_request(
        self, url: str, *, meta: dict[str, Any], callback: Callback | None = None, errback: Errback | None = None
    ) -> scrapy.Request:
        """A cheap request to the platform's API through a proxy, to tell whether it gets through."""
        ...
