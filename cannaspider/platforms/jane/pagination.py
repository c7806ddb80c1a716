"""Jane's side of the shared pagination rules (cannaspider/platforms/pagination.py): how an
Algolia answer says its paging facts.

An answer says `nbHits` (the products the filter matches: the total), `nbPages` (pages of the asked
`hitsPerPage`, capped by the index's pagination limit) and `page` (which page it is: an answer for
another page than the one asked is the server repeating itself). Algolia answers an empty page past
its pagination limit while `nbHits` says more: the shared rules end that as `short_of_total`, never
complete. Algolia refuses more than 1000 hits a page.
"""

from __future__ import annotations

from typing import Any

from cannaspider.platforms import pagination
from cannaspider.platforms.interface import Decision
from cannaspider.platforms.pagination import PageFacts, PageState, Terms

__all__ = ["MAX_HITS_PER_PAGE", "PageState", "after_page"]

MAX_HITS_PER_PAGE = 1000  # Algolia refuses more
TERMS = Terms(total="nbHits", ids="product_id")


def facts(answer: object) -> PageFacts:
    """The answer's nbHits, nbPages and page (anything else: not said)."""
    info = answer if isinstance(answer, dict) else {}
    count = pagination.count
    return PageFacts(count(info.get("nbHits")), count(info.get("nbPages")), count(info.get("page")))


def after_page(
    state: PageState, page: int, product_ids: list[str], answer: dict[str, Any] | None, anonymous: int = 0
) -> Decision:
    """`product_ids`: the page's ids (repeats included); `answer`: the page's paging facts."""
    return pagination.after_page(state, page, product_ids, facts(answer), TERMS, anonymous)
