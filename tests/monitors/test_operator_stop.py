"""A stop the operator asked for is not an alert (docs/health.md, "The operator's stop"): a `-a follow=1`
drainer, a real `scrapy crawl` subprocess against the sandbox and the test database, stopped by
SIGTERM or SIGINT (what Scrapyd's cancel.json sends) finishes with reason `shutdown`, its health
report is healthy and the crawl-health webhook (a real receiver on loopback) is sent nothing."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import ROOT, add_store
from tests.spiders.test_queue_drain import enqueue


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_stopped_drainer_is_healthy_and_alerts_nobody(scrapy_env, db, sandbox, sql, webhook, tmp_path, signum):
    store = add_store(db, sandbox.stores("AZ")[0])
    task = enqueue(db, "product_resync", dispensary_id=store)
    settings = {
        "TASK_POLL_S": "0.5",
        "ALERT_WEBHOOK_URL": webhook.url,
        "WEBHOOK_ALLOW_PRIVATE": "True",
        "HEALTH_CHECK_PERIOD_S": "0",  # judged at close only: the stop's report is the one
    }
    argv = [sys.executable, "-m", "scrapy", "crawl", "product_resync", "-a", "follow=1"]
    for name, value in settings.items():
        argv += ["-s", f"{name}={value}"]
    proc = subprocess.Popen(argv, env=scrapy_env, cwd=ROOT, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while sql("SELECT status FROM worker_tasks WHERE id = %s", (task.id,)) != [("completed",)]:
            assert time.monotonic() < deadline and proc.poll() is None, "the drainer did not complete its task"
            time.sleep(0.2)
    finally:
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=60)
    assert "Traceback" not in err, err[-3000:]
    assert proc.returncode == 0, err[-3000:]  # idle, every task it took completed
    [path] = (Path(scrapy_env["CANNASPIDER_DATA_DIR"]) / "reports" / "product_resync").glob("*.json")
    report = json.loads(path.read_text())
    assert report["finish_reason"] == "shutdown"
    assert report["ok"], [m for m in report["monitors"] if m["status"] != "passed"]
    assert webhook.bodies == []
    assert "crawl health" not in err
