"""A store whose product count fell by more than HEALTH_MAX_PRODUCT_DROP against its previous
complete crawl fails the crawl's health; incomplete earlier runs and other processes' runs don't count.
Every crawl the OOS guard flagged suspect fails it too, each one of a collapse."""

from __future__ import annotations

import os
import socket

from tests.monitors.conftest import failed, run_health
from tests.tasks.conftest import add_store


def add_run(sql, store: int, seen: int, *, status="complete", ago_min: int, mine=True, suspect=None) -> int:
    host, pid = (socket.gethostname(), os.getpid()) if mine else ("elsewhere", 1)
    return sql(
        "INSERT INTO crawl_runs (dispensary_id, role, status, started_at, products_seen, host, pid, suspect, "
        "suspect_reason) VALUES (%s, 'product_resync', %s, now() - make_interval(mins => %s), %s, %s, %s, %s, %s) "
        "RETURNING id",
        (store, status, ago_min, seen, host, pid, suspect is not None, suspect),
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
            f"1 store crawl(s) suspect (an emptied or collapsed menu): Collapsed (#{store}): {reason}"
        )
        sql("UPDATE crawl_runs SET started_at = now() - make_interval(mins => %s) WHERE id = %s", (500 - streak, run))
    add_run(sql, store, 40, ago_min=-1)  # the menu that is left, judged against itself: healthy
    assert run_health({"cannaspider/stores_complete": 1}, tmp_path / "after", db)["ok"]
