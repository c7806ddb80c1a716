"""The shared rules every registered platform keeps (docs/platforms.md), checked through the interface
alone, on each platform's samples (tests/platforms/<name>/samples.py): pagination completeness, id
rules, the normalized item's invariants, and the incomplete-crawl reasons. A new platform is
registered, gives its samples, and passes this file unchanged."""

from __future__ import annotations

import copy
import importlib
import math
import re
from types import ModuleType
from typing import Any

import pytest
from scrapy.settings import Settings

from cannaspider import platforms
from cannaspider.items import DispensaryRecord, RawProduct, StoreProduct
from cannaspider.platforms import pagination
from cannaspider.platforms.interface import (
    FAILURE_KINDS,
    INCOMPLETE_REASONS,
    PAGINATION_REASONS,
    SIZE_UNITS,
    UNIT_PRICE_BASES,
    Decision,
    MenuPage,
    NormalizationError,
    Platform,
    PlatformFailure,
    StoresFound,
)
from cannaspider.storable import Losses
from tests.helpers import ROOT

PER_PAGE = 4


@pytest.fixture(params=platforms.names())
def platform(request: pytest.FixtureRequest) -> Platform:
    settings = Settings()
    settings.setmodule("cannaspider.settings")
    return platforms.build(request.param, settings)


@pytest.fixture
def samples(platform: Platform) -> ModuleType:
    return importlib.import_module(f"tests.platforms.{platform.name}.samples")


def page(platform: Platform, samples: ModuleType, products: list[Any], total: int | None) -> tuple[list[str], Any, int]:
    """A menu page as the spider reads it: (ids, the page's paging facts, products without an id)."""
    answer = platform.read_menu_page(samples.menu_response(products, total, PER_PAGE))
    assert isinstance(answer, MenuPage) and answer.malformed is None
    ids = [platform.product_id(raw) for raw in answer.products]
    return [i for i in ids if i is not None], answer.page_info, sum(i is None for i in ids)


def crawl(
    platform: Platform, samples: ModuleType, pages: list[list[Any]], total: int | None | list[int], **state: int
) -> Decision:
    """Feeds `pages` to the pagination rules until they stop (failing if they ask past the last);
    `total`: the total every answer announces, or each page's."""
    menu = platform.menu_state(per_page=PER_PAGE, **state)
    number = 0
    while True:
        announced = total[min(number, len(total) - 1)] if isinstance(total, list) else total
        ids, info, anonymous = page(platform, samples, pages[number] if number < len(pages) else [], announced)
        decision = platform.after_page(menu, number, ids, info, anonymous)
        if decision.next_page is None:
            return decision
        assert decision.next_page == number + 1, "pages are asked for in order"
        number = decision.next_page
        assert number <= len(pages), f"asked for page {number} past the menu's end"


def incomplete(decision: Decision, kind: str) -> None:
    assert (decision.next_page, decision.complete, decision.kind) == (None, False, kind)
    assert kind in PAGINATION_REASONS and decision.reason


# -- the registry ------------------------------------------------------------------------------


def test_the_registry_names_each_platform_by_its_own_name(platform: Platform) -> None:
    assert platform.name in platforms.names() and platforms.get(platform.name).name == platform.name
    assert platforms.DEFAULT in platforms.names()
    with pytest.raises(platforms.UnknownPlatform):
        platforms.get("no-such-platform")


# -- pagination completeness ---------------------------------------------------------------------


def test_a_short_last_page_completes_the_menu(platform: Platform, samples: ModuleType) -> None:
    products = samples.raw_products(6)
    decision = crawl(platform, samples, [products[:4], products[4:]], 6)
    assert (decision.next_page, decision.complete, decision.kind) == (None, True, "")


def test_a_full_last_page_at_the_total_is_probed_once_then_complete(platform: Platform, samples: ModuleType) -> None:
    products = samples.raw_products(8)
    decision = crawl(platform, samples, [products[:4], products[4:]], 8)  # the probe: page 2, empty
    assert (decision.next_page, decision.complete) == (None, True)


def test_fewer_products_than_the_total_is_incomplete(platform: Platform, samples: ModuleType) -> None:
    products = samples.raw_products(6)
    incomplete(crawl(platform, samples, [products[:4], products[4:]], 10), "short_of_total")


def test_a_page_repeating_only_seen_products_is_incomplete(platform: Platform, samples: ModuleType) -> None:
    products = samples.raw_products(4)
    incomplete(crawl(platform, samples, [products, copy.deepcopy(products)], 12), "looping")


def test_the_page_cap_ends_the_crawl_incomplete(platform: Platform, samples: ModuleType) -> None:
    products = samples.raw_products(12)
    incomplete(crawl(platform, samples, [products[:4], products[4:8], products[8:]], 100, max_pages=2), "page_cap")


def test_a_total_that_changes_between_pages_is_incomplete(platform: Platform, samples: ModuleType) -> None:
    # the menu moved under the crawl: its pages do not add up to one menu, whichever way it moved
    products = samples.raw_products(8)
    incomplete(crawl(platform, samples, [products[:4], products[4:]], [10, 11]), "total_changed")
    incomplete(crawl(platform, samples, [products[:4], products[4:]], [10, 8]), "total_changed")


def test_a_short_page_at_the_page_cap_ends_the_menu(platform: Platform, samples: ModuleType) -> None:
    products = samples.raw_products(7)
    decision = crawl(platform, samples, [products[:4], products[4:]], 7, max_pages=2)
    assert (decision.next_page, decision.complete, decision.kind) == (None, True, "")


def test_a_full_page_at_the_page_cap_with_nothing_announced_is_incomplete(
    platform: Platform, samples: ModuleType
) -> None:
    products = samples.raw_products(8)
    incomplete(crawl(platform, samples, [products[:4], products[4:]], None, max_pages=2), "page_cap")


def test_every_platform_keeps_the_shared_rules(platform: Platform) -> None:
    # the rules are written once (cannaspider/platforms/pagination.py): each platform's state is theirs
    assert isinstance(platform.menu_state(per_page=PER_PAGE), pagination.PageState)


def test_a_product_without_an_id_makes_the_menu_incomplete(platform: Platform, samples: ModuleType) -> None:
    products = samples.raw_products(2)
    assert platform.product_id(samples.anonymous_product()) is None
    incomplete(crawl(platform, samples, [[*products, samples.anonymous_product()]], 3), "anonymous")


def test_a_failed_or_malformed_page_is_said_so_never_an_empty_menu(platform: Platform, samples: ModuleType) -> None:
    failed = platform.read_menu_page(samples.blocked_response())
    assert isinstance(failed, PlatformFailure) and failed.kind in FAILURE_KINDS and failed.message
    malformed = platform.read_menu_page(samples.malformed_menu_response())
    assert isinstance(malformed, MenuPage) and malformed.malformed and malformed.products == []


def test_a_server_that_pages_forever_is_stopped(platform: Platform, samples: ModuleType) -> None:
    products = samples.raw_products(4 * 5)
    pages = [products[i : i + 4] for i in range(0, 20, 4)]
    decision = crawl(platform, samples, pages, None, max_pages=5)
    assert decision.complete is False and decision.kind in PAGINATION_REASONS


def test_the_incomplete_reasons_are_the_documented_set() -> None:
    assert PAGINATION_REASONS <= set(INCOMPLETE_REASONS)
    documented = (ROOT / "docs" / "platforms.md").read_text(encoding="utf-8")
    assert {r for r in INCOMPLETE_REASONS if f"`{r}`" not in documented} == set()
    assert {k for k in FAILURE_KINDS if f"`{k}`" not in documented} == set()


# -- id rules ------------------------------------------------------------------------------------


def test_product_ids_are_stable_non_empty_and_the_items_own(platform: Platform, samples: ModuleType) -> None:
    products = samples.raw_products(20)
    ids = [platform.product_id(raw) for raw in products]
    assert all(isinstance(i, str) and i and i == i.strip() and "\x00" not in i for i in ids)
    assert len(set(ids)) == len(ids)
    assert ids == [platform.product_id(copy.deepcopy(raw)) for raw in products]  # stable across crawls
    # the id the spider counts a product seen under is the one it is stored under
    stored = [
        platform.normalize(RawProduct(1, 1, raw, 0, platform.name), Losses()).provider_product_id for raw in products
    ]
    assert stored == ids


def test_store_ids_are_non_empty_and_scoped_to_the_platform(platform: Platform, samples: ModuleType) -> None:
    found = platform.read_stores(samples.stores_response())
    assert isinstance(found, StoresFound) and found.records and found.skipped == 1 and found.malformed is None
    for record in found.records:
        assert isinstance(record, DispensaryRecord)
        assert record.platform == platform.name and record.platform_dispensary_id.strip()
        assert record.name
    failed = platform.read_stores(samples.blocked_response())
    assert isinstance(failed, PlatformFailure) and failed.kind in FAILURE_KINDS


def test_a_store_resolves_to_its_platform_id(platform: Platform, samples: ModuleType) -> None:
    url, slug = samples.menu_url()
    assert platform.slug_of(url) == slug and platform.slug_of(None) is None
    response, asked = samples.lookup_response()
    found = platform.read_lookup(response, asked)
    assert found.platform_id and found.platform_id.strip() == found.platform_id and found.failure is None
    failed = platform.read_lookup(samples.blocked_response(), asked)
    assert failed.platform_id is None and failed.failure is not None and failed.reason
    html, pid = samples.website_html()
    assert platform.read_website(html, "http://127.0.0.1:1/").platform_id == pid
    nothing = platform.read_website("<html></html>", "http://127.0.0.1:1/")
    assert nothing.platform_id is None and nothing.slug is None and nothing.reason


# -- requests ------------------------------------------------------------------------------------


def test_requests_carry_the_spiders_meta_and_callbacks(platform: Platform) -> None:
    def callback(response: Any) -> None: ...

    def errback(failure: Any) -> None: ...

    menu = platform.menu_request("some-store", 2, PER_PAGE, callback=callback, errback=errback, meta={"page": 2})
    assert menu.meta["page"] == 2 and menu.callback is callback and menu.errback is errback and menu.dont_filter
    searches = platform.area_requests("AZ", None, callback=callback, errback=errback, meta={"state": "AZ"})
    assert searches and all(r.meta["state"] == "AZ" and r.meta["point"] for r in searches)
    lookup = platform.lookup_request("a-slug", callback=callback, errback=errback, meta={"slug": "a-slug"})
    assert lookup.meta["slug"] == "a-slug" and lookup.callback is callback


# -- the normalized item -------------------------------------------------------------------------


def _price(value: float | None) -> bool:
    return value is None or (math.isfinite(value) and value >= 0)


def test_normalized_items_keep_the_shared_invariants(platform: Platform, samples: ModuleType) -> None:
    items = [
        platform.normalize(RawProduct(12, 34, raw, 0, platform.name), Losses()) for raw in samples.raw_products(60)
    ]
    for item in items:
        assert isinstance(item, StoreProduct)
        assert (item.dispensary_id, item.crawl_run_id, item.provider) == (12, 34, platform.name)
        assert item.provider_product_id and item.name and item.name == item.name.strip()
        prices = [item.price_rec, item.price_med, item.price_rec_special, item.price_med_special]
        assert all(_price(p) for p in prices + [item.unit_price, item.unit_price_special])
        assert item.unit_price_basis is None or item.unit_price_basis in UNIT_PRICE_BASES
        for option in item.options:
            assert option.size_unit is None or option.size_unit in SIZE_UNITS
            assert option.size_value is None or (math.isfinite(option.size_value) and option.size_value > 0)
            option_prices = [option.price_rec, option.price_med, option.price_rec_special, option.price_med_special]
            assert all(_price(p) for p in option_prices)
        assert all(re.match(r"https?://", url) for url in item.images)
    assert any(item.options for item in items) and any(item.price_rec is not None for item in items)


def test_a_product_that_cannot_be_stored_raises_normalization_error(platform: Platform, samples: ModuleType) -> None:
    with pytest.raises(NormalizationError):
        platform.normalize(RawProduct(1, 1, samples.anonymous_product(), 0, platform.name), Losses())
