"""What follows Jane's stores downstream, shared with Dutchie's: the schedule's discovery per state
and platform, one product_resync queue draining the stores of both platforms (each crawled by its
own platform, taken from dispensaries.platform), and store discovery's `-a platform`."""

from __future__ import annotations

import asyncio

import psycopg
import pytest
from scrapy.settings import Settings

from cannaspider.tasks import queue, schedule
from cannaspider.tasks.roles import TaskInputError
from cannaspider.tasks.schedule import ScheduleConfig
from cannaspider.units.arguments import SpiderArgumentError, SpiderParams
from tests.helpers import add_store, products_of, project_settings, runs_of
from tests.platforms.jane.test_crawl import add_jane_store, jane


def on_connection(db_url: str, fn, *args, **kwargs):
    async def main():
        async with await psycopg.AsyncConnection.connect(db_url, autocommit=True) as conn:
            return await fn(conn, *args, **kwargs)

    return asyncio.run(main())


def test_the_schedule_discovers_each_state_on_each_platform_named(db, sql):
    config = ScheduleConfig(discovery_states=("AZ", "MI"), discovery_platforms=("dutchie", "jane"))
    assert on_connection(db, schedule.tick, config).created["store_discovery"] == 4
    tasks = sql("SELECT platform, payload ->> 'state' FROM worker_tasks WHERE role = 'store_discovery' ORDER BY 1, 2")
    assert tasks == [("dutchie", "AZ"), ("dutchie", "MI"), ("jane", "AZ"), ("jane", "MI")]
    assert on_connection(db, schedule.tick, config).created["store_discovery"] == 0  # twice: nothing new
    # analytics_refresh names no store: one task, under the columns' default platform
    assert sql("SELECT platform FROM worker_tasks WHERE role = 'analytics_refresh'") == [("dutchie",)]


def test_the_platforms_to_discover_come_from_the_settings():
    base = {**project_settings(), "SCHEDULE_DISCOVERY_STATES": "AZ"}
    assert ScheduleConfig.from_settings(Settings(base)).discovery_platforms == ("dutchie",)
    both = Settings({**base, "SCHEDULE_DISCOVERY_PLATFORMS": "dutchie,jane,jane"})
    assert ScheduleConfig.from_settings(both).discovery_platforms == ("dutchie", "jane")
    with pytest.raises(TaskInputError, match="unknown platform 'weedmaps'"):
        ScheduleConfig.from_settings(Settings({**base, "SCHEDULE_DISCOVERY_PLATFORMS": "weedmaps"}))


def test_store_discovery_takes_a_platform_only_with_a_state_and_only_a_registered_one():
    assert SpiderParams.parse("store_discovery", frozenset({"state", "platform"}), {"state": "AZ", "platform": "jane"})
    with pytest.raises(SpiderArgumentError, match="unknown platform 'weedmaps' \\(supported: dutchie, jane\\)"):
        SpiderParams.parse("store_discovery", frozenset({"state", "platform"}), {"state": "AZ", "platform": "weedmaps"})


@pytest.mark.integration
def test_one_resync_queue_drains_the_stores_of_both_platforms(crawl, db, sandbox, sql):
    dutchie_store = sandbox.stores("AZ")[0]
    jane_doc = jane(sandbox, "GET", "stores?state=AZ")[0]
    d, j = add_store(db, dutchie_store), add_jane_store(db, jane_doc)
    for dispensary, platform in ((d, "dutchie"), (j, "jane")):
        on_connection(db, queue.enqueue, "product_resync", dispensary_id=dispensary, platform=platform)
    result = crawl("product_resync")  # no target: drains the queue
    assert result.returncode == 0, result.stderr[-3000:]
    assert sql("SELECT platform, status FROM worker_tasks ORDER BY id") == [
        ("dutchie", "completed"),
        ("jane", "completed"),
    ]
    assert set(products_of(db, d)) == set(sandbox.menu(dutchie_store["id"], 0))
    assert set(products_of(db, j)) == set(jane(sandbox, "GET", f"menu/{jane_doc['id']}")["product_ids"])
    assert runs_of(db, d)[0][0] == runs_of(db, j)[0][0] == "complete"
    assert sql("SELECT DISTINCT provider FROM store_products WHERE dispensary_id = %s", (j,)) == [("jane",)]
