"""Run the crawl-health suite as the CrawlHealth extension runs it at spider close, on stats a test sets, and a
webhook receiver on 127.0.0.1 that records what it was sent."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from scrapy import Spider

from cannaspider.monitors.extension import CrawlHealth
from tests.helpers import project_crawler


class ProductSpider(Spider):
    name = "product_resync"


def run_health(stats: dict, tmp_path: Path, db: str, **settings) -> dict:
    """Close a crawl with these stats; return the report it wrote."""
    # webhook receivers are on 127.0.0.1: allowed unless a test says otherwise
    settings = {"WEBHOOK_ALLOW_PRIVATE": True, **settings}
    crawler = project_crawler(ProductSpider, HEALTH_REPORT_DIR=str(tmp_path / "reports"), DATABASE_URL=db, **settings)
    spider = ProductSpider.from_crawler(crawler)
    assert crawler.stats is not None
    crawler.stats.set_value("start_time", datetime.now(UTC))
    crawler.stats.set_value("finish_reason", "finished")
    for key, value in stats.items():
        crawler.stats.set_value(key, value)
    CrawlHealth.from_crawler(crawler).spider_closed(spider)
    reports = sorted((tmp_path / "reports" / spider.name).glob("*.json"))
    assert len(reports) == 1, reports
    return json.loads(reports[0].read_text())


def failed(report: dict) -> dict[str, str]:
    return {m["id"].split(".")[-1]: m["message"] for m in report["monitors"] if m["status"] != "passed"}


class Receiver:
    def __init__(self, status: int = 200):
        self.bodies: list[dict] = []
        self.raw: list[bytes] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["content-length"]))
                outer.raw.append(body)
                outer.bodies.append(json.loads(body))
                self.send_response(status)
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks/T000/B000/s3cr3t-hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)


@pytest.fixture
def webhook():
    receiver = Receiver()
    receiver.thread.start()
    yield receiver
    receiver.server.shutdown()
    receiver.server.server_close()
