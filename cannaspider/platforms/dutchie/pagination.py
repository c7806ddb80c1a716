"""When to ask for the next FilteredProducts page, and whether the crawl counts as complete.

docs/architecture.md ("Crawl correctness"): stop when a page is short, the collected count reaches
totalCount, or page+1 ≥ totalPages; never loop forever. We add guards, because pagination is where
a bad payload would otherwise mark real products out of stock:
- a page that brings no new id (the server repeats itself) or the page cap ends the crawl as
  incomplete;
- fewer products than totalCount at the end makes the crawl incomplete (a lying totalCount), so
  nothing is marked missing on that evidence;
- a product without a usable id (see platforms/dutchie/ids.py) makes the crawl incomplete: we cannot tell
  which stored product it is, so nobody else's miss may rest on it; it still counts for whether a
  page was full (it was delivered), never toward totalCount;
- a *full* last page when totalCount/totalPages say "done" gets one probe page, so a totalCount
  that lies low cannot hide the products after it;
- a first page shorter than asked while totalCount says there are more means the server caps
  perPage (real Dutchie does): the rest of the crawl asks for that many per page. Page n of the
  new size starts at n × cap, and page 0 held exactly the first `cap` products, so nothing is
  skipped or seen twice.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from cannaspider.platforms.interface import Decision

__all__ = ["Decision", "PageState", "after_page"]


@dataclass
class PageState:
    per_page: int
    max_pages: int
    seen: dict[str, None] = field(default_factory=dict)  # insertion-ordered set of product ids
    pages_fetched: int = 0
    total_count: int | None = None
    total_pages: int | None = None
    probing: bool = False
    duplicates: int = 0
    anonymous: int = 0  # products without a usable id: the crawl cannot be complete
    capped_from: int | None = None  # the perPage asked for before the server's cap was detected


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def after_page(
    state: PageState, page: int, product_ids: list[str], query_info: dict[str, Any] | None, anonymous: int = 0
) -> Decision:
    """`product_ids`: the ids on this page (repeats included); `anonymous`: products without an id."""
    state.pages_fetched += 1
    state.anonymous += anonymous
    info = query_info if isinstance(query_info, dict) else {}
    if _int(info.get("totalCount")) is not None:
        state.total_count = _int(info.get("totalCount"))
    if _int(info.get("totalPages")) is not None:
        state.total_pages = _int(info.get("totalPages"))
    new = 0
    for pid in product_ids:
        if pid in state.seen:
            state.duplicates += 1
        else:
            state.seen[pid] = None
            new += 1
    delivered = len(product_ids) + anonymous

    if state.probing:
        if not product_ids or new == 0:
            return _finish(state, "probe page past totalCount was empty")
        state.probing = False  # totalCount lied low: keep going
    if not delivered:
        return _finish(state, "empty page")
    if new == 0 and not anonymous:
        return Decision(
            None,
            False,
            f"page {page} repeated only products already seen: the server is looping; crawl incomplete",
            "looping",
        )
    if page + 1 >= state.max_pages:
        return Decision(
            None,
            False,
            f"reached the page cap ({state.max_pages}) with more pages announced; crawl incomplete",
            "page_cap",
        )
    if (
        page == 0
        and delivered < state.per_page
        and state.total_count is not None
        and delivered < state.total_count
        and state.capped_from is None
    ):
        state.capped_from, state.per_page = state.per_page, delivered
        return Decision(1, True, f"the server caps perPage at {delivered}")
    if delivered < state.per_page:
        return _finish(state, "short page")
    collected = len(state.seen)
    count_done = state.total_count is not None and collected >= state.total_count
    pages_done = state.total_pages is not None and page + 1 >= state.total_pages
    if count_done or pages_done:
        state.probing = True
        return Decision(page + 1, True, "full last page: probing one more")
    return Decision(page + 1, True, "")


def _finish(state: PageState, reason: str) -> Decision:
    if state.anonymous:
        return Decision(
            None,
            False,
            f"{reason}, but {state.anonymous} product(s) had no usable id (_id/id); crawl incomplete",
            "anonymous",
        )
    collected = len(state.seen)
    if state.total_count is not None and collected < state.total_count:
        return Decision(
            None,
            False,
            f"{reason}, but only {collected} of totalCount {state.total_count} products arrived; crawl incomplete",
            "short_of_total",
        )
    return Decision(None, True, reason)
