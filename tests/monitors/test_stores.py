"""A store whose product count fell by more than HEALTH_MAX_PRODUCT_DROP against its previous
complete crawl fails the crawl's health; incomplete earlier runs and other processes' runs don't count.
Every crawl the OOS guard flagged suspect fails it too, each one of a collapse, and every crawl that
found a store's menu empty; many stores going empty at once fail the fleet's check."""

from __future__ import annotations

import os
import socket

from tests.monitors.conftest import failed, run_health
from tests.tasks.conftest import add_store


def add_run(
    sql, store: int, seen: int, *, status="complete", ago_min: int, mine=True, suspect=None, empty=False, ended=False
) -> int:
    """A crawl run started `ago_min` minutes ago (negative: after the crawl's start), finished a second later if
    `ended` (else as the runs of the crawl being checked look to it: by their start)."""
    host, pid = (socket.gethostname(), os.getpid()) if mine else ("elsewhere", 1)
    return sql(
        "INSERT INTO crawl_runs (dispensary_id, role, status, started_at, finished_at, products_seen, host, pid, "
        "suspect, suspect_reason, empty) VALUES (%s, 'product_resync', %s, now() - make_interval(mins => %s), "
        "CASE WHEN %s THEN now() - make_interval(mins => %s, secs => -1) END, %s, %s, %s, %s, %s, %s) RETURNING id",
        (store, status, ago_min, ended, ago_min, seen, host, pid, suspect is not None, suspect, empty),
    )[0][0]


def test_a_store_losing_more_than_30_percent_fails(tmp_path, db, sql):
    fell, steady, new = add_store(sql, "Fell"), add_store(sql, "Steady"), add_store(sql, "New")
    add_run(sql, fell, 100, ago_min=300)
    add_run(sql, fell, 20, status="incomplete", ago_min=200)  # not a complete crawl: not the reference
    add_run(sql, steady, 100, ago_min=300)
    for store, seen in ((fell, 69), (steady, 70), (new, 5)):
        add_run(sql, store, seen, ago_min=-1)  # this crawl's runs (started after start_time)
    report = run_health({"cannaspider/stores_complete": 3}, tmp_path, db)
    assert failed(report) == {
        "test_product_count_drop": "product count fell by more than 30% against the last complete crawl: "
        f"Fell (#{fell}): 69 products, 100 before"
    }


def test_runs_of_other_processes_are_not_this_crawls(tmp_path, db, sql):
    store = add_store(sql, "Other")
    add_run(sql, store, 100, ago_min=300)
    add_run(sql, store, 10, ago_min=-1, mine=False)
    assert run_health({"cannaspider/stores_complete": 1}, tmp_path, db)["ok"]
    assert run_health({"cannaspider/stores_complete": 1}, tmp_path / "b", db, HEALTH_MAX_PRODUCT_DROP=0.95)["ok"]


def test_every_suspect_crawl_of_a_collapse_fails_not_only_the_first(tmp_path, db, sql):
    store = add_store(sql, "Collapsed")
    add_run(sql, store, 100, ago_min=600)
    for streak in (1, 2, 3):
        reason = f"saw 40 of the 100 products in stock before this crawl: suspect crawl {streak}"
        run = add_run(sql, store, 40, ago_min=-1, suspect=reason)
        stats = {"cannaspider/stores_complete": 1, "cannaspider/stores_suspect": 1}
        report = run_health(stats, tmp_path / str(streak), db)
        assert failed(report)["test_suspect_crawls"] == (
            f"1 store crawl(s) suspect (a collapsed menu): Collapsed (#{store}): {reason}"
        )
        sql("UPDATE crawl_runs SET started_at = now() - make_interval(mins => %s) WHERE id = %s", (500 - streak, run))
    add_run(sql, store, 40, ago_min=-1)  # the menu that is left, judged against itself: healthy
    assert run_health({"cannaspider/stores_complete": 1}, tmp_path / "after", db)["ok"]


def went_empty(sql, store: int, ago_min: int) -> None:
    sql("UPDATE dispensaries SET menu_empty_since = now() - make_interval(mins => %s) WHERE id = %s", (ago_min, store))


def test_every_empty_menu_crawl_fails_with_since_when_and_not_as_a_product_drop(tmp_path, db, sql):
    dark, steady = add_store(sql, "Dark"), add_store(sql, "Steady")
    for store in (dark, steady):
        add_run(sql, store, 25, ago_min=600)
    add_run(sql, dark, 0, ago_min=300, empty=True)
    went_empty(sql, dark, 300)
    add_run(sql, dark, 0, ago_min=-1, empty=True)  # this crawl's: the state goes on
    add_run(sql, steady, 25, ago_min=-1)
    since = sql("SELECT menu_empty_since FROM dispensaries WHERE id = %s", (dark,))[0][0]
    report = run_health({"cannaspider/stores_complete": 2, "cannaspider/stores_empty": 1}, tmp_path, db)
    assert failed(report) == {
        "test_empty_menus": "1 store(s) with an empty menu (no product, totalCount 0: nothing marked out of stock; "
        f"a broken query, an API change or a menu gone dark): Dark (#{dark}): empty since {since:%Y-%m-%d %H:%M} UTC"
    }  # one store of the fleet: not a fleet-wide emptying; the product count's check leaves it to its own
    assert report["figures"]["cannaspider/stores_empty"] == 1


def test_many_stores_going_empty_at_once_fail_the_fleet_check(tmp_path, db, sql):
    stores = [add_store(sql, f"S{i}") for i in range(6)]
    for store in stores:
        add_run(sql, store, 25, ago_min=600)
    for store in stores[:3]:  # 3 of 6 crawled within the window went empty, 2 by other processes
        add_run(sql, store, 0, ago_min=-1, empty=True, mine=store == stores[0], ended=True)
        went_empty(sql, store, 1)
    for store in stores[3:]:
        add_run(sql, store, 25, ago_min=-1, mine=False, ended=True)
    stats = {"cannaspider/stores_complete": 1, "cannaspider/stores_empty": 1}
    got = failed(run_health(stats, tmp_path, db))
    assert got["test_fleet_emptied"] == (
        "3 of the 6 stores crawled in the last 6 h went empty (HEALTH_MAX_EMPTIED_SHARE = 10%, "
        "HEALTH_FLEET_EMPTIED_MIN_STORES = 3): the shape of an API change or a broken query, not of stores; "
        "their products' stock is left as it was"
    )
    assert set(got) == {"test_empty_menus", "test_fleet_emptied"}
    # a store that went empty before the window, or fewer stores than the least: the store check only
    went_empty(sql, stores[2], 60 * 7)
    assert set(failed(run_health(stats, tmp_path / "b", db))) == {"test_empty_menus"}
    assert set(failed(run_health(stats, tmp_path / "c", db, HEALTH_MAX_EMPTIED_SHARE=0.5))) == {"test_empty_menus"}
