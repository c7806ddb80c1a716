"""Dutchie's side of the shared pagination rules (cannaspider/platforms/pagination.py): how a
FilteredProducts answer says its paging facts, and the one thing only Dutchie's server does.

`queryInfo{totalCount, totalPages}` are the total and the page count (docs/dutchie.md, "Products");
an answer does not say which page it is. Dutchie caps perPage (real Dutchie answers at most 100 per
page whatever is asked): a first page shorter than asked while totalCount says there are more is
that cap, not the menu's end, and the rest of the crawl asks for that many per page. Page n of the
new size starts at n × cap, and page 0 held exactly the first `cap` products, so nothing is skipped
or seen twice. The spider logs the change (products.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cannaspider.platforms import pagination
from cannaspider.platforms.interface import Decision
from cannaspider.platforms.pagination import PageFacts, Terms

__all__ = ["Decision", "PageState", "after_page"]

TERMS = Terms(total="totalCount", ids="_id/id")


@dataclass
class PageState(pagination.PageState):
    capped_from: int | None = None  # the perPage asked for before the server's cap was detected


def facts(query_info: object) -> PageFacts:
    """queryInfo's totalCount and totalPages (anything else, or no queryInfo: not said)."""
    info = query_info if isinstance(query_info, dict) else {}
    return PageFacts(pagination.count(info.get("totalCount")), pagination.count(info.get("totalPages")))


def after_page(
    state: PageState, page: int, product_ids: list[str], query_info: dict[str, Any] | None, anonymous: int = 0
) -> Decision:
    """`product_ids`: the ids on this page (repeats included); `anonymous`: products without an id."""

    def per_page_cap(state: pagination.PageState, page: int, delivered: int) -> Decision | None:
        assert isinstance(state, PageState)
        if page != 0 or state.total is None or delivered >= state.total or state.capped_from is not None:
            return None  # a short page: the menu's end
        if page + 1 >= state.max_pages:
            return pagination.page_cap(state)
        state.capped_from, state.per_page = state.per_page, delivered
        return Decision(1, True, f"the server caps perPage at {delivered}")

    return pagination.after_page(state, page, product_ids, facts(query_info), TERMS, anonymous, per_page_cap)
