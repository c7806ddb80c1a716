"""CrawlStore: the shared pool, and runs left 'running' by a process that died."""

from __future__ import annotations

import asyncio

from scrapy.utils.test import get_crawler

from cannaspider.db.crawl_store import CrawlStore


def test_runs_of_a_dead_process_are_marked_failed_when_the_next_crawl_opens(db, sql, monkeypatch):
    monkeypatch.setenv("DATABASE_URL", db)
    d = sql("INSERT INTO dispensaries (name) VALUES ('x') RETURNING id")[0][0]
    old = sql(
        "INSERT INTO crawl_runs (dispensary_id, role, started_at) VALUES (%s, 'product_resync', "
        "now() - interval '3 hours') RETURNING id",
        (d,),
    )[0][0]
    recent = sql("INSERT INTO crawl_runs (dispensary_id, role) VALUES (%s, 'product_resync') RETURNING id", (d,))[0][0]

    async def open_and_close():
        store = CrawlStore.for_crawler(get_crawler(settings_dict={"CRAWL_RUN_ABANDONED_AFTER": "2 hours"}))
        await store.open()
        await store.close()

    asyncio.run(open_and_close())
    rows = dict(sql("SELECT id, status FROM crawl_runs"))
    assert rows == {old: "failed", recent: "running"}  # a run that may still be going is left alone
    assert "abandoned" in sql("SELECT error FROM crawl_runs WHERE id = %s", (old,))[0][0]
