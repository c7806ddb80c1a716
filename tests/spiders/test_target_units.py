"""An `-a` target is a unit of work as a queued task is, by the same start path
(units/lifecycle.py `UnitLifecycle.units`), for every role: a target that does not complete makes
`scrapy crawl` exit 3 ("a unit did not complete", commands/crawl.py EXIT_INCOMPLETE), as the drained
task would have failed. Real `scrapy crawl` runs against the sandbox, one per role here; the other
roles' own files hold theirs (tests/spiders/test_crawl_onpage.py: a keyword Firecrawl fails,
tests/spiders/test_analytics_refresh.py: a refresh that fails)."""

from __future__ import annotations

import pytest

from cannaspider.commands.crawl import EXIT_INCOMPLETE
from tests.helpers import add_store

pytestmark = pytest.mark.integration  # spawns (tests/tiers.py)


def test_store_discovery_a_state_whose_search_points_failed_exits_3(crawl, db, sandbox, sql):
    sandbox.faults({"kind": "error500", "operation": "DispensarySearch", "times": 1})
    result = crawl("store_discovery", "-s", "RETRY_ENABLED=0", state="AZ")
    assert result.returncode == EXIT_INCOMPLETE, result.stderr[-3000:]
    assert "error: 1 unit(s) of work incomplete" in result.stderr
    assert "1 search points failed" in result.stderr
    # what the other points found is stored all the same (a retry finds the rest)
    assert sql("SELECT count(*) FROM dispensaries")[0][0] > 0


def test_store_discovery_a_state_searched_whole_exits_0(crawl, db, sandbox):
    result = crawl("store_discovery", state="AZ")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "unit(s) of work incomplete" not in result.stderr


def test_entry_point_discovery_a_store_whose_lookup_failed_exits_3(crawl, db, sandbox, sql):
    store = next(s for s in sandbox.stores("AZ") if "/sites/" not in s["menu_url"])
    d = add_store(db, store, resolved=False)
    sandbox.faults({"kind": "error500", "operation": "ConsumerDispensaries"})
    result = crawl("entry_point_discovery", "-s", "RETRY_ENABLED=0", dispensary_id=str(d))
    assert result.returncode == EXIT_INCOMPLETE, result.stderr[-3000:]
    assert "error: 1 unit(s) of work incomplete" in result.stderr
    [(pid, error)] = sql("SELECT platform_dispensary_id, resolution_error FROM dispensaries WHERE id = %s", (d,))
    assert pid is None and error.startswith("request failed: HttpError"), error  # the reason recorded all the same


def test_entry_point_discovery_a_store_answered_unresolvable_completes_and_exits_0(crawl, db, sandbox, sql):
    # an answer that names no store is the store's outcome (its reason recorded), not a unit that failed
    store = next(s for s in sandbox.stores("AZ") if "/sites/" not in s["menu_url"])
    d = add_store(db, store, resolved=False, menu_url="not a url")
    result = crawl("entry_point_discovery", dispensary_id=str(d))
    assert result.returncode == 0, result.stderr[-3000:]
    [(error,)] = sql("SELECT resolution_error FROM dispensaries WHERE id = %s", (d,))
    assert error is not None and "no usable menu_url" in error


@pytest.mark.parametrize("role", ["product_resync", "product_discovery"])
def test_a_product_role_a_store_whose_crawl_is_incomplete_exits_3(role, crawl, db, sandbox, sql):
    store = sandbox.stores("AZ")[0]
    d = add_store(db, store)
    sandbox.faults({"kind": "error500", "store": store["id"], "pages": [0]})
    result = crawl(role, "-s", "RETRY_ENABLED=0", dispensary_id=str(d))
    assert result.returncode == EXIT_INCOMPLETE, result.stderr[-3000:]
    assert "error: 1 unit(s) of work incomplete" in result.stderr
    assert sql("SELECT status, task_id FROM crawl_runs") == [("incomplete", None)]
