"""When to ask for a store's next products-index page, and whether its menu counts as complete.

The shared rules (docs/platforms.md, "Pagination completeness") in Algolia's terms: an answer says
`nbHits` (the products the filter matches) and `nbPages` (pages of the asked `hitsPerPage`,
capped by the index's pagination limit). The menu is complete when a short page ends it, or the
pages and the count are reached, with every product id received; a full last page at the total is
probed once, so a low `nbHits` cannot hide products. Besides Dutchie's guards (a page of seen ids
only, the page cap, products without an id, fewer ids than the total):
- `nbHits` that changes between two pages of one crawl: the menu moved under the crawl (the index
  was rewritten between pages), so the pages do not add up to one menu (`total_changed`);
- an answer for another page than the one asked for: the server repeats itself (`looping`).
Algolia also answers an empty page past its pagination limit while `nbHits` says more: that ends
as `short_of_total`, never complete.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from cannaspider.platforms.interface import Decision

MAX_HITS_PER_PAGE = 1000  # Algolia refuses more


@dataclass
class PageState:
    per_page: int
    max_pages: int
    seen: dict[str, None] = field(default_factory=dict)  # insertion-ordered set of product ids
    pages_fetched: int = 0
    nb_hits: int | None = None  # the first page's count: every later page must agree
    nb_pages: int | None = None
    probing: bool = False
    anonymous: int = 0


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def after_page(
    state: PageState, page: int, product_ids: list[str], answer: dict[str, Any] | None, anonymous: int = 0
) -> Decision:
    """`product_ids`: the page's ids (repeats included); `answer`: the page's paging facts."""
    state.pages_fetched += 1
    state.anonymous += anonymous
    info = answer if isinstance(answer, dict) else {}
    nb_hits, nb_pages, answered = _count(info.get("nbHits")), _count(info.get("nbPages")), _count(info.get("page"))
    if nb_hits is not None:
        if state.nb_hits is not None and nb_hits != state.nb_hits:
            return Decision(
                None,
                False,
                f"page {page}: nbHits changed from {state.nb_hits} to {nb_hits} between pages (the menu was "
                "reindexed during the crawl); crawl incomplete",
                "total_changed",
            )
        state.nb_hits = nb_hits
    if nb_pages is not None:
        state.nb_pages = nb_pages
    if answered is not None and answered != page:
        return Decision(
            None, False, f"asked for page {page}, the answer is page {answered}: the server repeats itself", "looping"
        )
    new = 0
    for pid in product_ids:
        if pid not in state.seen:
            state.seen[pid] = None
            new += 1
    delivered = len(product_ids) + anonymous

    if state.probing:
        if not product_ids or new == 0:
            return _finish(state, "probe page past nbHits was empty")
        state.probing = False  # nbHits lied low: keep going
    if not delivered:
        return _finish(state, "empty page")
    if new == 0 and not anonymous:
        return Decision(
            None, False, f"page {page} repeated only products already seen: the server is looping", "looping"
        )
    if delivered < state.per_page:
        return _finish(state, "short page")
    if page + 1 >= state.max_pages:
        return Decision(None, False, f"reached the page cap ({state.max_pages}) with more pages announced", "page_cap")
    count_done = state.nb_hits is not None and len(state.seen) >= state.nb_hits
    pages_done = state.nb_pages is not None and page + 1 >= state.nb_pages
    if count_done or pages_done:
        state.probing = True
        return Decision(page + 1, True, "full last page: probing one more")
    return Decision(page + 1, True, "")


def _finish(state: PageState, reason: str) -> Decision:
    if state.anonymous:
        return Decision(
            None, False, f"{reason}, but {state.anonymous} product(s) had no usable product_id", "anonymous"
        )
    collected = len(state.seen)
    if state.nb_hits is not None and collected < state.nb_hits:
        return Decision(
            None,
            False,
            f"{reason}, but only {collected} of nbHits {state.nb_hits} products arrived",
            "short_of_total",
        )
    return Decision(None, True, reason)
