"""Feeds: the default dated feed and what replaces it, one file per crawl, what feed lines carry;
and the extensions a crawl must not start."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from types import SimpleNamespace

import psycopg
import pytest
from itemadapter import ItemAdapter
from scrapy.exporters import JsonLinesItemExporter
from scrapy.extension import ExtensionManager
from scrapy.extensions.feedexport import apply_uri_params
from scrapy.extensions.remote_control import RemoteControl
from scrapy.settings import Settings
from scrapy.utils.test import get_crawler

from cannaspider.db.crawl_database import CrawlDatabase
from cannaspider.feeds import uri_params
from cannaspider.pipelines.dispensary_writer import DispensaryWriterPipeline
from cannaspider.platforms.dutchie.stores import dispensary_record
from tests.helpers import add_store, settings_module_now


def project_crawler(**overrides):
    """A crawler with the project's settings, as `scrapy crawl` builds it (add-ons applied)."""
    project = Settings()
    project.setmodule(settings_module_now(), priority="project")  # as the environment is now
    # what settings.py (and the environment) set, not Scrapy's defaults; get_crawler picks the reactor
    settings = {k: v for k, v in project.items() if project.getpriority(k) and not k.startswith("TWISTED_REACTOR")}
    # get_crawler turns these two off by itself: take the project's word for them
    for name in ("REMOTE_CONTROL_ENABLED", "TELNETCONSOLE_ENABLED"):
        settings[name] = project.getbool(name)
    return get_crawler(settings_dict={**settings, **overrides})


def feeds_of(crawler) -> dict:
    return crawler.settings.getdict("FEEDS")


def test_without_feeds_of_its_own_a_crawl_writes_the_dated_default(tmp_path):
    crawler = project_crawler(CANNASPIDER_FEED_DIR=str(tmp_path))
    (uri, options), *others = feeds_of(crawler).items()
    assert not others
    assert uri == f"{tmp_path}/%(name)s/%(date)s/%(time)s-%(job)s.jsonl"
    assert options["format"] == "jsonlines"


def test_feeds_given_on_the_command_line_or_in_settings_replace_the_default(tmp_path):
    # what `scrapy crawl -O out.json` leaves in the settings (Scrapy merges the project's FEEDS in)
    given = {str(tmp_path / "out.json"): {"format": "json", "overwrite": True}}
    assert feeds_of(project_crawler(FEEDS=given)) == given
    assert feeds_of(project_crawler(FEEDS={})) == {}  # `-s FEEDS={}`: no feed at all


def test_two_crawls_starting_in_the_same_second_write_two_files(tmp_path):
    template = next(iter(feeds_of(project_crawler(CANNASPIDER_FEED_DIR=str(tmp_path)))))
    spider = SimpleNamespace(name="product_resync")
    params = {"name": "product_resync", "time": "2026-11-30T11-00-00"}  # the same second
    first, second = (apply_uri_params(template, uri_params(dict(params), spider)) for _ in range(2))
    assert first != second
    assert Path(first).parent == Path(second).parent == tmp_path / "product_resync" / Path(first).parent.name
    # under Scrapyd, the job id names the file
    job = apply_uri_params(template, uri_params(dict(params), SimpleNamespace(name="x", _job="abc123")))
    assert job.endswith("/2026-11-30T11-00-00-abc123.jsonl")


@pytest.mark.integration
def test_dash_O_replaces_the_default_feed_and_no_remote_control_server_starts(crawl, db, sandbox, scrapy_env, tmp_path):
    store = sandbox.stores("AZ")[0]
    d = add_store(db, store)
    out = tmp_path / "products.json"
    state_dir = tmp_path / "state"  # where Scrapy's RemoteControl would leave its token file
    scrapy_env["XDG_STATE_HOME"] = str(state_dir)
    result = crawl("product_resync", "-O", str(out), dispensary_id=d)
    assert result.returncode == 0, result.stderr[-2000:]
    assert len(json.loads(out.read_text())) == len(sandbox.menu(store["id"], 0))
    assert not list(Path(scrapy_env["CANNASPIDER_FEED_DIR"]).rglob("*.jsonl"))  # no default feed beside it
    assert "Remote control" not in result.stderr and "RemoteControl" not in result.stderr
    assert not list(state_dir.rglob("*.json"))


def test_the_remote_control_extension_is_off_unless_asked_for():
    def remote_controls(crawler):
        return [mw for mw in ExtensionManager.from_crawler(crawler).middlewares if isinstance(mw, RemoteControl)]

    assert remote_controls(project_crawler()) == []
    assert len(remote_controls(project_crawler(REMOTE_CONTROL_ENABLED=True))) == 1  # the documented switch


def test_dispensary_records_are_stored_with_their_raw_object_and_exported_without_it(db, monkeypatch, tmp_path):
    monkeypatch.setenv("DATABASE_URL", db)
    obj = {"id": "a" * 24, "name": "Feed Store", "cName": "feed-store", "location": {"city": "Mesa", "state": "AZ"}}
    record = dispensary_record(obj)
    assert record is not None

    async def write():
        crawler = project_crawler()
        pipeline = DispensaryWriterPipeline.from_crawler(crawler)
        try:
            return await pipeline.process_item(record)
        finally:
            await CrawlDatabase.for_crawler(crawler).close()

    item = asyncio.run(write())
    with psycopg.connect(db) as conn:
        raw = conn.execute("SELECT raw FROM discovery_locations").fetchone()
    assert raw == (obj,)
    assert "raw" not in ItemAdapter(item).field_names()
    path = tmp_path / "feed.jsonl"
    with path.open("wb") as f:
        exporter = JsonLinesItemExporter(f)
        exporter.export_item(item)
    line = json.loads(path.read_text())
    assert "raw" not in line and line["platform_dispensary_id"] == "a" * 24 and line["dispensary_id"]


@pytest.mark.integration
def test_a_crawl_that_exports_nothing_leaves_no_feed_file_and_one_that_does_leaves_its_items(
    crawl, db, sandbox, scrapy_env
):
    feeds = Path(scrapy_env["CANNASPIDER_FEED_DIR"])
    # the analytics refresh yields no item of the feed's classes: FEED_STORE_EMPTY = False
    result = crawl("analytics_refresh")
    assert result.returncode == 0, result.stderr[-2000:]
    assert not [p for p in feeds.rglob("*") if p.is_file()]
    store = sandbox.stores("AZ")[0]
    result = crawl("product_resync", dispensary_id=add_store(db, store))
    assert result.returncode == 0, result.stderr[-2000:]
    [feed] = [p for p in feeds.rglob("*") if p.is_file()]
    assert len(feed.read_text().splitlines()) == len(sandbox.menu(store["id"], 0))
