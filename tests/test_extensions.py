"""Wiring you can see (docs/architecture.md, "Wiring"): the per-crawler services are Scrapy
extensions declared in settings.py's EXTENSIONS, each after the services it uses, and found with
Scrapy's public crawler.get_extension; no module keeps a registry of crawlers beside Scrapy's."""

from __future__ import annotations

import ast
from pathlib import Path

import cannaspider
from cannaspider import settings
from cannaspider.db.crawl_database import CrawlDatabase
from cannaspider.stealth.pool import ProxyPools
from cannaspider.tasks.drain import CrawlDrain, TaskDrain
from cannaspider.units.crawl_close import CrawlClose
from cannaspider.units.lifecycle import UnitLifecycle
from tests.helpers import project_crawler

PACKAGE = Path(cannaspider.__file__).parent
SERVICES = (CrawlDatabase, ProxyPools, CrawlDrain, CrawlClose, UnitLifecycle)
# a service and those it uses: it is declared after them
USES = {CrawlClose: (CrawlDatabase, CrawlDrain), UnitLifecycle: (CrawlDatabase, CrawlDrain)}


def path(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def test_each_service_is_an_extension_of_every_crawler_found_by_get_extension():
    crawler = project_crawler()
    for cls in SERVICES:
        assert crawler.get_extension(cls) is not None, path(cls)
    assert CrawlDatabase.for_crawler(crawler) is crawler.get_extension(CrawlDatabase)
    assert ProxyPools.for_crawler(crawler) is crawler.get_extension(ProxyPools)
    assert CrawlClose.for_crawler(crawler) is crawler.get_extension(CrawlClose)
    assert UnitLifecycle.of(crawler) is crawler.get_extension(UnitLifecycle)
    assert TaskDrain.of(crawler) is None  # no drain until the spider opens one
    assert UnitLifecycle.of(project_crawler()) is not UnitLifecycle.of(crawler)


def test_each_service_is_declared_after_those_it_uses():
    order = settings.EXTENSIONS
    assert all(path(cls) in order for cls in SERVICES)
    for cls, used in USES.items():
        assert all(order[path(u)] < order[path(cls)] for u in used), path(cls)


def test_no_module_keeps_a_registry_of_crawlers():
    found = []
    for module in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(module.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr in {"WeakKeyDictionary", "WeakValueDictionary"}:
                found.append(f"{module.relative_to(PACKAGE)}:{node.lineno}")
            elif isinstance(node, ast.alias) and node.name in {"WeakKeyDictionary", "WeakValueDictionary"}:
                found.append(f"{module.relative_to(PACKAGE)}:{node.lineno}")
    assert found == []
