"""Jane's pagination rules (cannaspider/platforms/jane/pagination.py): Algolia's nbHits / nbPages /
page, and the guards that keep a bad answer from completing a menu."""

from __future__ import annotations

from cannaspider.platforms.jane.pagination import PageState, after_page


def ids(start: int, n: int) -> list[str]:
    return [str(1_000_000 + i) for i in range(start, start + n)]


def answer(nb_hits: int | None, page: int | None = None, per_page: int = 100) -> dict:
    out: dict = {"hitsPerPage": per_page, "page": page}
    if nb_hits is not None:
        out.update(nbHits=nb_hits, nbPages=-(-nb_hits // per_page))
    return out


def test_a_short_last_page_with_every_hit_is_complete():
    state = PageState(per_page=100, max_pages=20)
    assert after_page(state, 0, ids(0, 100), answer(250, 0)).next_page == 1
    assert after_page(state, 1, ids(100, 100), answer(250, 1)).next_page == 2
    d = after_page(state, 2, ids(200, 50), answer(250, 2))
    assert (d.next_page, d.complete) == (None, True)


def test_a_whole_menu_on_one_page_is_complete_at_once():
    state = PageState(per_page=1000, max_pages=20)
    d = after_page(state, 0, ids(0, 872), answer(872, 0, 1000))
    assert (d.next_page, d.complete) == (None, True) and state.pages_fetched == 1


def test_nbhits_changing_between_pages_is_incomplete():
    state = PageState(per_page=100, max_pages=20)
    after_page(state, 0, ids(0, 100), answer(250, 0))
    d = after_page(state, 1, ids(100, 100), answer(257, 1))
    assert (d.next_page, d.complete, d.kind) == (None, False, "total_changed")
    assert "nbHits changed from 250 to 257" in d.reason


def test_an_answer_for_another_page_is_the_server_repeating_itself():
    state = PageState(per_page=100, max_pages=20)
    after_page(state, 0, ids(0, 100), answer(250, 0))
    d = after_page(state, 1, ids(100, 100), answer(250, 0))
    assert (d.complete, d.kind) == (False, "looping") and "the answer is page 0" in d.reason


def test_a_short_page_before_the_total_is_incomplete():
    state = PageState(per_page=100, max_pages=20)
    after_page(state, 0, ids(0, 100), answer(250, 0))
    d = after_page(state, 1, ids(100, 99), answer(250, 1))
    assert (d.complete, d.kind) == (False, "short_of_total") and "199 of nbHits 250" in d.reason


def test_algolias_pagination_limit_ends_short_of_the_total():
    # an index that pages only its first 1,000 hits answers page 1 empty while nbHits says 1,400
    state = PageState(per_page=1000, max_pages=20)
    assert after_page(state, 0, ids(0, 1000), {"nbHits": 1400, "nbPages": 1, "page": 0}).next_page == 1
    d = after_page(state, 1, [], {"nbHits": 1400, "nbPages": 1, "page": 1})
    assert (d.complete, d.kind) == (False, "short_of_total")


def test_a_product_without_an_id_makes_the_menu_incomplete():
    state = PageState(per_page=100, max_pages=20)
    d = after_page(state, 0, ids(0, 40), answer(41, 0), anonymous=1)
    assert (d.complete, d.kind) == (False, "anonymous")


def test_pages_announced_past_the_cap_end_incomplete():
    state = PageState(per_page=100, max_pages=3)
    for page in range(2):
        assert after_page(state, page, ids(page * 100, 100), answer(10_000, page)).next_page == page + 1
    d = after_page(state, 2, ids(200, 100), answer(10_000, 2))
    assert (d.complete, d.kind) == (False, "page_cap")
