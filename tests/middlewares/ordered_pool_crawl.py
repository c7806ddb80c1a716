"""`python -m tests.middlewares.ordered_pool_crawl crawl SPIDER …`: `scrapy …` with the proxy pool's
random pick made deterministic (the lowest row id among the proxies it may choose), for tests
that must know which proxy a page tries first. Rotation, health and everything else are the
crawl's own."""

from __future__ import annotations

import sys
from types import SimpleNamespace

from scrapy.cmdline import execute

from cannaspider.stealth import pool

pool.random = SimpleNamespace(choice=min)  # type: ignore[assignment]

if __name__ == "__main__":
    execute(["scrapy", *sys.argv[1:]])
