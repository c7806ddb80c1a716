"""A crawl's own metrics, the Scrapy way: its numeric stats exported every METRICS_EXPORT_PERIOD_S and
at its close, to a Prometheus Pushgateway (METRICS_PUSHGATEWAY_URL) and/or as a file for
node_exporter's textfile collector (METRICS_TEXTFILE_DIR). Off (NotConfigured) when neither is set.

Each stat becomes a gauge `scrapy_<stat>` (its name lower-cased, every character outside
[a-z0-9_] an underscore: `downloader/response_status_count/403` → `scrapy_downloader_response_status_count_403`),
labelled with the spider, the host and the Scrapyd job (the `_job` spider argument Scrapyd 1.5 passes;
it sets no SCRAPY_JOB variable; empty outside Scrapyd);
`scrapy_crawl_running` is 1 while it runs, 0 in the last export. The fleet's view (store crawls,
queue, alerts) is the web service's /metrics, read from the database (fleet.py): this one is what
only the crawl process knows (requests, responses, retries, memory, its item rate) while it runs.

The crawl never waits for an export: it reads the stats dict (a few hundred numbers) and hands the
text to a thread; an export that fails is one WARNING line, the crawl goes on. Its cost on the
ingest benchmark: docs/operations.md, "A crawl node's metrics".
"""

from __future__ import annotations

import logging
import os
import re
import socket
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, push_to_gateway, write_to_textfile
from prometheus_client.core import GaugeMetricFamily, Metric
from scrapy import Spider, signals
from scrapy.crawler import Crawler
from scrapy.exceptions import NotConfigured
from twisted.internet import task, threads
from twisted.internet.defer import Deferred
from twisted.python.failure import Failure

from cannaspider.db.crawl_jobs import JOB_ARGUMENT

logger = logging.getLogger(__name__)

UNSAFE = re.compile(r"[^a-z0-9_]+")


def metric_name(stat: str) -> str:
    return "scrapy_" + UNSAFE.sub("_", stat.lower()).strip("_")


def families(stats: dict[str, Any], labels: dict[str, str], *, running: bool) -> list[Metric]:
    """One gauge per numeric stat (two stats that sanitize alike: the first kept), and scrapy_crawl_running."""
    names, values = list(labels), list(labels.values())
    out: dict[str, Metric] = {}
    for stat, value in sorted(stats.items()):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        name = metric_name(stat)
        if name not in out:
            family = GaugeMetricFamily(name, f"the crawl stat {stat}", labels=names)
            family.add_metric(values, float(value))
            out[name] = family
    running_family = GaugeMetricFamily("scrapy_crawl_running", "1 while the crawl runs, 0 at its close", labels=names)
    running_family.add_metric(values, 1.0 if running else 0.0)
    out["scrapy_crawl_running"] = running_family
    return list(out.values())


class _Families:
    def __init__(self, found: list[Metric]) -> None:
        self.found = found

    def collect(self) -> list[Metric]:
        return self.found


class CrawlMetrics:
    def __init__(self, crawler: Crawler) -> None:
        settings = crawler.settings
        self.pushgateway = settings.get("METRICS_PUSHGATEWAY_URL") or None
        textfile_dir = settings.get("METRICS_TEXTFILE_DIR") or None
        if self.pushgateway is None and textfile_dir is None:
            # no message: Scrapy logs a NotConfigured's message at WARNING, in every crawl of a node without one
            raise NotConfigured
        self.crawler = crawler
        self.period = settings.getfloat("METRICS_EXPORT_PERIOD_S")
        self.textfile_dir = Path(textfile_dir) if textfile_dir else None
        self.job = ""  # the spider's _job, known when it opens
        self.host = socket.gethostname()
        self.loop: task.LoopingCall | None = None
        self.pending: Deferred[None] | None = None  # one export at a time: a slow gateway skips ticks
        crawler.signals.connect(self.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(self.spider_closed, signal=signals.spider_closed)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> CrawlMetrics:
        return cls(crawler)

    def spider_opened(self, spider: Spider) -> None:
        self.spider_name = spider.name
        self.job = str(getattr(spider, JOB_ARGUMENT, "") or "")
        self.loop = task.LoopingCall(self.export, running=True)
        self.loop.start(self.period, now=False)

    def spider_closed(self, spider: Spider) -> Deferred[None] | None:
        if self.loop is not None and self.loop.running:
            self.loop.stop()
        # the close's figures are the crawl's totals: exported whatever a periodic export is doing
        return self._run(running=False)

    def export(self, *, running: bool) -> None:
        if self.pending is None:
            self._run(running=running)

    def _registry(self, *, running: bool) -> CollectorRegistry:
        stats = self.crawler.stats.get_stats() if self.crawler.stats else {}
        labels = {"spider": self.spider_name, "host": self.host, "job": self.job}
        registry = CollectorRegistry(auto_describe=False)
        registry.register(_Families(families(dict(stats), labels, running=running)))
        return registry

    def _write_now(self, *, running: bool) -> None:
        """One export in the calling thread (the tests; the crawl exports through _run)."""
        self._write(self._registry(running=running))

    def _run(self, *, running: bool) -> Deferred[None]:
        done: Deferred[None] = threads.deferToThread(self._write, self._registry(running=running))
        done.addErrback(self._failed)
        self.pending = done

        def clear(_: object) -> None:
            if self.pending is done:
                self.pending = None

        done.addBoth(clear)
        return done

    @staticmethod
    def _failed(failure: Failure) -> None:
        logger.warning("crawl metrics: export failed: %s", failure.getErrorMessage())

    def _write(self, registry: CollectorRegistry) -> None:
        if self.textfile_dir is not None:
            self.textfile_dir.mkdir(parents=True, exist_ok=True)
            # node_exporter reads *.prom; write_to_textfile writes a temporary file and renames it
            name = f"cannaspider_{self.spider_name}_{self.job or os.getpid()}.prom"
            write_to_textfile(str(self.textfile_dir / name), registry)
        if self.pushgateway is not None:
            grouping = {"spider": self.spider_name, "instance": self.host, "scrapy_job": self.job or str(os.getpid())}
            push_to_gateway(
                self.pushgateway, job="cannaspider_crawl", registry=registry, grouping_key=grouping, timeout=10
            )
