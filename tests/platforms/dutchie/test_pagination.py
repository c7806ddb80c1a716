"""Pagination rules: when to stop, and when the crawl counts as complete."""

from __future__ import annotations

from cannaspider.platforms.dutchie.pagination import PageState, after_page


def ids(start, n):
    return [f"{i:024x}" for i in range(start, start + n)]


def info(total, per_page=100):
    return {"totalCount": total, "totalPages": -(-total // per_page)}


def test_short_page_ends_a_complete_crawl():
    state = PageState(per_page=100, max_pages=50)
    assert after_page(state, 0, ids(0, 100), info(250)).next_page == 1
    assert after_page(state, 1, ids(100, 100), info(250)).next_page == 2
    d = after_page(state, 2, ids(200, 50), info(250))
    assert d.next_page is None and d.complete


def test_full_last_page_is_probed_once():
    state = PageState(per_page=100, max_pages=50)
    assert after_page(state, 0, ids(0, 100), info(200)).next_page == 1
    d = after_page(state, 1, ids(100, 100), info(200))
    assert d.next_page == 2  # totalCount says done, but the page was full
    d = after_page(state, 2, [], info(200))
    assert d.next_page is None and d.complete


def test_total_count_lying_low_does_not_hide_products():
    state = PageState(per_page=100, max_pages=50)
    d = after_page(state, 0, ids(0, 100), info(100))
    assert d.next_page == 1
    d = after_page(state, 1, ids(100, 100), info(100))
    assert d.next_page == 2
    d = after_page(state, 2, ids(200, 30), info(100))
    assert d.next_page is None and d.complete and len(state.seen) == 230


def test_total_count_lying_high_makes_the_crawl_incomplete():
    state = PageState(per_page=100, max_pages=50)
    after_page(state, 0, ids(0, 100), info(600))
    d = after_page(state, 1, ids(100, 40), info(600))
    assert d.next_page is None and not d.complete and "totalCount 600" in d.reason


def test_a_looping_server_is_stopped_and_incomplete():
    state = PageState(per_page=100, max_pages=50)
    after_page(state, 0, ids(0, 100), {"totalCount": 10**7, "totalPages": 10**5})
    d = after_page(state, 1, ids(0, 100), {"totalCount": 10**7, "totalPages": 10**5})
    assert d.next_page is None and not d.complete and "looping" in d.reason


def test_page_cap_stops_an_endless_sequence_of_new_products():
    state = PageState(per_page=100, max_pages=5)
    page, decision = 0, None
    while True:
        decision = after_page(state, page, ids(page * 100, 100), {"totalCount": 10**7, "totalPages": 10**5})
        if decision.next_page is None:
            break
        page = decision.next_page
    assert page == 4 and not decision.complete and "page cap" in decision.reason


def test_missing_query_info_falls_back_to_short_page():
    state = PageState(per_page=100, max_pages=50)
    assert after_page(state, 0, ids(0, 100), None).next_page == 1
    d = after_page(state, 1, ids(100, 3), {"totalCount": "lots"})
    assert d.next_page is None and d.complete


def test_empty_store_is_complete():
    d = after_page(PageState(per_page=100, max_pages=50), 0, [], {"totalCount": 0, "totalPages": 0})
    assert d.next_page is None and d.complete


def test_products_without_an_id_never_make_a_crawl_complete():
    # a page of id-less products (a schema change): "complete" with 0 seen would mark the menu oos
    state = PageState(per_page=100, max_pages=50)
    d = after_page(state, 0, [], info(30), anonymous=30)
    assert d.next_page is None and not d.complete and "30 product(s) had no usable id" in d.reason
    assert not state.seen


def test_one_product_without_an_id_among_good_ones_makes_the_crawl_incomplete():
    state = PageState(per_page=100, max_pages=50)
    d = after_page(state, 0, ids(0, 99), info(101), anonymous=1)
    assert d.next_page == 1  # a full page (the id-less product was delivered): go on
    d = after_page(state, 1, ids(99, 1), info(101))
    assert d.next_page is None and not d.complete and "1 product(s) had no usable id" in d.reason


def test_a_server_capping_per_page_is_followed_with_its_page_size():
    # asked 250, the server gives 100 (its cap) and says 230 exist
    state = PageState(per_page=250, max_pages=50)
    d = after_page(state, 0, ids(0, 100), info(230, 100))
    assert d.next_page == 1 and state.per_page == 100 and state.capped_from == 250
    d = after_page(state, 1, ids(100, 100), info(230, 100))  # page 1 of size 100: products 100..199
    assert d.next_page == 2
    d = after_page(state, 2, ids(200, 30), info(230, 100))
    assert d.next_page is None and d.complete and len(state.seen) == 230 and state.duplicates == 0


def test_a_short_first_page_of_a_small_store_is_not_a_cap():
    state = PageState(per_page=250, max_pages=50)
    d = after_page(state, 0, ids(0, 40), info(40))
    assert d.next_page is None and d.complete and state.per_page == 250


# -- where Dutchie's rules were not Jane's: the shared rules (cannaspider/platforms/pagination.py) --


def test_a_total_count_that_changes_between_pages_is_incomplete():
    # before the rules were shared, Dutchie took the later page's totalCount and went on; a menu that
    # changed during the crawl does not add up to one menu, so nothing may be marked missing on it
    state = PageState(per_page=100, max_pages=50)
    assert after_page(state, 0, ids(0, 100), info(250)).next_page == 1
    d = after_page(state, 1, ids(100, 100), info(240))
    assert (d.next_page, d.complete, d.kind) == (None, False, "total_changed")
    assert "totalCount changed from 250 to 240" in d.reason


def test_a_short_page_at_the_page_cap_ends_the_menu():
    # before, Dutchie said "page cap" on any page at the cap, even a short one that ends the menu
    state = PageState(per_page=100, max_pages=2)
    assert after_page(state, 0, ids(0, 100), info(150)).next_page == 1
    d = after_page(state, 1, ids(100, 50), info(150))
    assert (d.next_page, d.complete, d.kind) == (None, True, "")


def test_the_per_page_cap_is_not_followed_past_the_page_cap():
    state = PageState(per_page=250, max_pages=1)
    d = after_page(state, 0, ids(0, 100), info(230, 100))
    assert (d.next_page, d.complete, d.kind) == (None, False, "page_cap") and state.per_page == 250
