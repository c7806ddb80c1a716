"""The pagination completeness rules every platform keeps, written once (docs/platforms.md,
"Pagination completeness"): after each menu page, the next page to ask for, or the end of the
menu, complete or not and why.

A platform's own pagination module (platforms/<name>/pagination.py) reads its answers' paging facts
into `PageFacts`, names them in its own words (`Terms`), and may add what only its server does
(Dutchie's perPage cap, through `short_page`). The rules, in the order they are applied:

- a total (the products the platform says the menu has) that changes between two pages of one crawl
  is incomplete (`total_changed`): the menu moved under the crawl, so its pages do not add up to one
  menu;
- an answer for another page than the one asked for (when the platform says which), or a page that
  brings no new id, is the server repeating itself (`looping`): stop, never loop;
- an empty page, or a page shorter than the page size (a short page ends the menu, even the one at
  the page cap), ends the crawl: complete only when every page arrived and parsed, no product lacked
  an id (`anonymous`), and the ids received reach the announced total (`short_of_total`);
- a full page at the page cap with more announced ends the crawl incomplete (`page_cap`): an endless
  sequence of pages is cut there;
- a *full* last page when the total or the page count says "done" gets one probe page, so a total
  that lies low cannot hide the products after it.

A failed or malformed page never reaches these rules: the spider ends the crawl incomplete on it
(`failed_page`, `malformed_page`), so "every page arrived and parsed" holds for any page they see.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from cannaspider.platforms.interface import Decision

__all__ = ["Decision", "PageFacts", "PageState", "ShortPage", "Terms", "after_page", "count"]


@dataclass(frozen=True)
class PageFacts:
    """What one answer says about the menu's pages (None: the answer does not say)."""

    total: int | None = None  # products the menu has, as the platform counts them
    pages: int | None = None  # pages of the asked size
    page: int | None = None  # which page the answer is


@dataclass(frozen=True)
class Terms:
    """The platform's names for its facts, for the reasons stored with an incomplete run."""

    total: str  # e.g. "totalCount"
    ids: str  # the fields a product's id comes from, e.g. "_id/id"


@dataclass
class PageState:
    """One store's menu crawl as the rules keep it (the interface's MenuState)."""

    per_page: int
    max_pages: int
    seen: dict[str, None] = field(default_factory=dict)  # insertion-ordered set of product ids
    pages_fetched: int = 0
    total: int | None = None  # the first page's total: every later page must agree
    total_pages: int | None = None
    probing: bool = False
    duplicates: int = 0  # ids delivered again (kept once)
    anonymous: int = 0  # products without a usable id: the crawl cannot be complete


# A platform's rule for a short page before the shared one ends the menu: a Decision, or None to
# let the short page end it (Dutchie: a short first page under a larger total is the server's cap).
ShortPage = Callable[[PageState, int, int], Decision | None]


def count(value: object) -> int | None:
    """A count as an answer gives it: a non-negative int, else None (not said)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def after_page(
    state: PageState,
    page: int,
    product_ids: list[str],
    facts: PageFacts,
    terms: Terms,
    anonymous: int = 0,
    short_page: ShortPage | None = None,
) -> Decision:
    """`product_ids`: the page's ids (repeats included); `anonymous`: its products without an id."""
    state.pages_fetched += 1
    state.anonymous += anonymous
    if facts.total is not None:
        if state.total is not None and facts.total != state.total:
            return Decision(
                None,
                False,
                f"page {page}: {terms.total} changed from {state.total} to {facts.total} between pages "
                "(the menu changed during the crawl)",
                "total_changed",
            )
        state.total = facts.total
    if facts.pages is not None:
        state.total_pages = facts.pages
    if facts.page is not None and facts.page != page:
        return Decision(
            None, False, f"asked for page {page}, the answer is page {facts.page}: the server repeats itself", "looping"
        )
    new = 0
    for pid in product_ids:
        if pid in state.seen:
            state.duplicates += 1
        else:
            state.seen[pid] = None
            new += 1
    delivered = len(product_ids) + anonymous  # an id-less product was delivered: it fills its page

    if state.probing:
        if not product_ids or new == 0:
            return _finish(state, terms, f"probe page past {terms.total} was empty")
        state.probing = False  # the total lied low: keep going
    if not delivered:
        return _finish(state, terms, "empty page")
    if new == 0 and not anonymous:
        return Decision(
            None, False, f"page {page} repeated only products already seen: the server is looping", "looping"
        )
    if delivered < state.per_page:
        decided = short_page(state, page, delivered) if short_page is not None else None
        return decided if decided is not None else _finish(state, terms, "short page")
    if page + 1 >= state.max_pages:
        return page_cap(state)
    count_done = state.total is not None and len(state.seen) >= state.total
    pages_done = state.total_pages is not None and page + 1 >= state.total_pages
    if count_done or pages_done:
        state.probing = True
        return Decision(page + 1, True, "full last page: probing one more")
    return Decision(page + 1, True, "")


def page_cap(state: PageState) -> Decision:
    return Decision(None, False, f"reached the page cap ({state.max_pages}) with more pages announced", "page_cap")


def _finish(state: PageState, terms: Terms, reason: str) -> Decision:
    if state.anonymous:
        return Decision(
            None, False, f"{reason}, but {state.anonymous} product(s) had no usable id ({terms.ids})", "anonymous"
        )
    collected = len(state.seen)
    if state.total is not None and collected < state.total:
        return Decision(
            None,
            False,
            f"{reason}, but only {collected} of {terms.total} {state.total} products arrived",
            "short_of_total",
        )
    return Decision(None, True, reason)
