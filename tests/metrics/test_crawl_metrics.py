"""A crawl's own metrics (cannaspider/metrics/crawl.py): its stats as Prometheus gauges, written for
node_exporter's textfile collector and pushed to a Pushgateway (a real HTTP receiver on loopback),
read back with prometheus-client's own parser."""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace

import pytest
from prometheus_client.parser import text_string_to_metric_families
from scrapy.exceptions import NotConfigured

from cannaspider.metrics.crawl import CrawlMetrics
from tests.helpers import project_crawler

GRAFANA = Path(__file__).resolve().parents[2] / "docs" / "grafana" / "cannaspider.json"
STATS = {
    "item_scraped_count": 1200,
    "downloader/response_status_count/403": 7,
    "cannaspider/stores_complete": 9,
    "start_time": "not a number",
    "log_count/ERROR": 0,
    "log_count/CRITICAL": 0,
}


def parsed(text: str) -> dict[str, tuple[dict[str, str], float]]:
    return {s.name: (s.labels, s.value) for f in text_string_to_metric_families(text) for s in f.samples}


def exporter(**settings) -> CrawlMetrics:
    ext = CrawlMetrics.from_crawler(project_crawler(None, **settings))
    ext.spider_name = "product_resync"
    for key, value in STATS.items():
        ext.crawler.stats.set_value(key, value)
    return ext


def test_off_unless_a_destination_is_set():
    with pytest.raises(NotConfigured):
        CrawlMetrics.from_crawler(project_crawler(None))


def test_the_stats_are_a_textfile_node_exporter_reads(tmp_path):
    ext = exporter(METRICS_TEXTFILE_DIR=str(tmp_path))
    ext._write_now(running=True)
    (path,) = tmp_path.glob("cannaspider_product_resync_*.prom")
    got = parsed(path.read_text())
    labels, value = got["scrapy_item_scraped_count"]
    assert value == 1200 and labels["spider"] == "product_resync" and labels["host"]
    assert got["scrapy_downloader_response_status_count_403"][1] == 7
    assert got["scrapy_cannaspider_stores_complete"][1] == 9
    assert got["scrapy_crawl_running"][1] == 1
    assert "scrapy_start_time" not in got  # not a number: not a metric
    ext._write_now(running=False)
    assert parsed(path.read_text())["scrapy_crawl_running"][1] == 0
    # the Grafana dashboard's crawl panels plot names these stats become
    exprs = " ".join(t["expr"] for p in json.loads(GRAFANA.read_text())["panels"] for t in p["targets"])
    plotted = set(re.findall(r"\bscrapy_[a-z_]+[a-z]", exprs)) - {
        "scrapy_downloader_response_status_count"
    }  # a regex prefix
    assert plotted and plotted <= set(got), plotted - set(got)


@pytest.mark.integration
def test_the_stats_are_pushed_to_a_pushgateway(tmp_path):
    received: list[tuple[str, str, bytes]] = []

    class Gateway(BaseHTTPRequestHandler):
        def do_PUT(self) -> None:
            received.append((self.command, self.path, self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Gateway)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        ext = exporter(METRICS_PUSHGATEWAY_URL=f"http://127.0.0.1:{server.server_port}")
        ext._write_now(running=False)
    finally:
        server.shutdown()
    ((method, path, body),) = received
    assert method == "PUT" and path.startswith("/metrics/job/cannaspider_crawl/")
    assert "/spider/product_resync" in path
    got = parsed(body.decode())
    assert got["scrapy_item_scraped_count"][1] == 1200 and got["scrapy_crawl_running"][1] == 0


def test_the_job_label_is_the_scrapyd_job_argument(tmp_path):
    """Scrapyd 1.5 names its job with `-a _job=<id>` (it sets no SCRAPY_JOB): the label and the file are the job's."""
    ext = exporter(METRICS_TEXTFILE_DIR=str(tmp_path))
    ext.spider_opened(SimpleNamespace(name="product_resync", _job="6487ec5c"))
    assert ext.loop is not None
    ext.loop.stop()
    ext._write_now(running=True)
    (path,) = tmp_path.glob("cannaspider_product_resync_*.prom")
    assert path.name == "cannaspider_product_resync_6487ec5c.prom"
    assert parsed(path.read_text())["scrapy_item_scraped_count"][0]["job"] == "6487ec5c"
