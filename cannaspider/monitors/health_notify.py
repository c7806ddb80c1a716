"""Crawl-health notification: what a crawl's health leaves behind (docs/health.md): a report per
crawl, always, as a row of crawl_health_reports (migrations/033: every node's in the one database,
which the dashboard's health page, /api/health and /metrics read) and as a JSON file under
HEALTH_REPORT_DIR (default CANNASPIDER_DATA_DIR/reports/<spider>/), the node's local copy; and,
when a monitor failed, an alert: one log line at ERROR and, with ALERT_WEBHOOK_URL set, a
Slack-compatible POST `{"text": ...}`, signed with Standard Webhooks' headers when
ALERTS_WEBHOOK_SECRET is set (cannaspider/webhooks/standard.py). (Not the webhooks on product
events and market moves: those are cannaspider/webhooks/.)

Nothing secret leaves: the report holds monitor messages and counters only, and every string
in it goes through redact() (configured secrets and URL credentials replaced) before it is
written or posted. The webhook URL itself (a Slack URL is a credential) is never logged."""

from __future__ import annotations

import json
import logging
import os
import re
import socket
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
from scrapy.settings import BaseSettings
from spidermon.core.actions import Action

from cannaspider import env
from cannaspider.db import connect, database_url
from cannaspider.db.errors import DatabaseSetupError, first_line
from cannaspider.monitors.checks import blocks_per_proxy
from cannaspider.webhooks import standard

logger = logging.getLogger(__name__)

SECRET_SETTING = re.compile(r"(KEY|TOKEN|PASSWORD|SECRET|WEBHOOK_URL|DATABASE_URL)", re.I)
URL_CREDENTIALS = re.compile(r"(?P<scheme>[a-z][a-z0-9+.-]*://)[^/\s:@]+:[^/\s@]+@", re.I)
FIGURES = (
    "item_scraped_count",
    "log_count/CRITICAL",
    "log_count/ERROR",
    "log_count/WARNING",
    "cannaspider/stores_complete",
    "cannaspider/stores_incomplete",
    "cannaspider/stores_suspect",
    "cannaspider/stores_empty",
    "cannaspider/stale_hash_fallbacks",
    "cannaspider/graphql_failure/blocked",
    "cannaspider/validation/items",
    "cannaspider/validation/items_invalid",
)
STATUS = {"OK": "passed", "FAIL": "failed", "ERROR": "error", "SKIPPED": "skipped"}


def secret_values(settings: BaseSettings) -> list[str]:
    values = []
    for name in settings:
        if SECRET_SETTING.search(name):
            value = settings.get(name)
            if isinstance(value, str) and len(value) >= 4:
                values.append(value)
    return sorted(values, key=len, reverse=True)


def redact(value: Any, secrets: list[str]) -> Any:
    if isinstance(value, str):
        value = URL_CREDENTIALS.sub(r"\g<scheme>***@", value)
        for secret in secrets:
            value = value.replace(secret, "***")
        return value
    if isinstance(value, dict):
        return {redact(k, secrets): redact(v, secrets) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact(v, secrets) for v in value]
    return value


def message(item: Any) -> str:  # a Spidermon monitor result (untyped)
    """A failure's assertion message; for a check that raised, the exception's last line."""
    if item.reason:
        return str(item.reason)
    lines = (item.error or "").strip().splitlines()
    return lines[-1] if lines else "unknown error"


def reports_dir(settings: BaseSettings) -> Path:
    configured = settings.get("HEALTH_REPORT_DIR")
    base = settings.get("CANNASPIDER_DATA_DIR") or str(env.data_dir())
    return Path(configured) if configured else Path(base) / "reports"


def build_report(result: Any, stats: dict[str, Any], spider_name: str) -> dict[str, Any]:
    monitors = []
    for item in result.monitor_results:
        monitor = item.monitor
        status = STATUS.get(str(item.status), str(item.status).lower())
        monitors.append(
            {
                "id": f"{type(monitor).__name__}.{monitor._testMethodName}",
                "monitor": monitor.monitor_name,
                "check": monitor.method_name,
                "status": status,
                "message": message(item) if status in {"failed", "error", "skipped"} else None,
            }
        )
    finished = stats.get("finish_time")
    started = stats.get("start_time")
    return {
        "spider": spider_name,
        "ok": all(m["status"] in {"passed", "skipped"} for m in monitors),
        "finish_reason": stats.get("finish_reason"),
        "started_at": started.isoformat() if isinstance(started, datetime) else None,
        "finished_at": (finished if isinstance(finished, datetime) else datetime.now(UTC)).isoformat(),
        "figures": {k: stats[k] for k in FIGURES if isinstance(stats.get(k), (int, float))},
        "blocks_per_proxy": blocks_per_proxy(stats),
        "monitors": monitors,
    }


def alert_text(report: dict[str, Any]) -> str:
    failed = [m for m in report["monitors"] if m["status"] in {"failed", "error"}]
    lines = [f"cannaspider crawl health: {report['spider']}: {len(failed)} check(s) failed"]
    lines += [f"• {m['monitor']}: {m['message']}" for m in failed]
    return "\n".join(lines)


def post_webhook(url: str, text: str, timeout: float, *, allow_private: bool, secret: str | None = None) -> bool:
    """One POST, never redirected, its answer read no further than a few kB (cannaspider/webhooks/posting.py);
    with `secret` (ALERTS_WEBHOOK_SECRET), signed as the event webhooks are (Standard Webhooks' headers)."""
    # the poster's aiohttp loads when a crawl has an alert to post, not with every crawl
    from cannaspider.webhooks import posting  # noqa: PLC0415 - a crawl's start-up time

    body = json.dumps({"text": text}).encode()
    headers = {"content-type": "application/json"}
    if secret:
        headers |= standard.headers(secret, f"health_{uuid.uuid4().hex}", int(time.time()), body)
    answer = posting.post_once(url, body, headers, timeout_s=timeout, allow_private=allow_private)
    if answer.error is not None:
        logger.warning("crawl health: the alert webhook could not be reached (%s)", answer.error)
        return False
    return True


STORE = """
INSERT INTO crawl_health_reports (spider, host, pid, ok, finish_reason, started_at, finished_at, blocks, report)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)
"""


def store(settings: BaseSettings, report: dict[str, Any]) -> bool:
    """The report as a row of crawl_health_reports; False (one WARNING line) when the database
    cannot take it: the local file still has it, and the crawl's outcome is not changed."""
    blocks = sum(v for v in report["blocks_per_proxy"].values() if isinstance(v, int))
    try:
        with connect(database_url(settings), autocommit=True) as conn:
            conn.execute(
                STORE,
                (
                    report["spider"],
                    socket.gethostname(),
                    os.getpid(),
                    report["ok"],
                    report["finish_reason"],
                    report["started_at"],
                    report["finished_at"],
                    blocks,
                    json.dumps(report, default=str),
                ),
            )
    # the database away, or not migrated to 033 yet: the report stays on this node only, said once
    except (psycopg.Error, DatabaseSetupError) as exc:
        logger.warning("crawl health: the report was not stored in the database (%s)", first_line(exc))
        return False
    return True


class HealthReportAction(Action):  # type: ignore[misc]  # Spidermon is untyped
    """Runs after the suite whatever the outcome (monitors_finished_actions)."""

    def run_action(self) -> None:
        crawler = self.data.crawler
        settings = crawler.settings
        spider_name = self.data.spider.name if self.data.spider is not None else "unknown"
        secrets = secret_values(settings)
        report = redact(build_report(self.result, self.data.stats or {}, spider_name), secrets)
        folder = reports_dir(settings) / spider_name
        folder.mkdir(parents=True, exist_ok=True)
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
        path = folder / f"{stamp}-{os.getpid()}.json"
        path.write_text(json.dumps(report, indent=2, default=str) + "\n")
        store(settings, report)
        if report["ok"]:
            return
        text = alert_text(report)
        logger.error("%s (report: %s)", text.replace("\n", " "), path)
        url = settings.get("ALERT_WEBHOOK_URL")
        if url:
            post_webhook(
                url,
                text,
                settings.getfloat("ALERT_WEBHOOK_TIMEOUT_S"),
                allow_private=settings.getbool("WEBHOOK_ALLOW_PRIVATE"),
                secret=env.configured(settings, "ALERTS_WEBHOOK_SECRET"),
            )
