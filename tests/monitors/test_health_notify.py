"""The alert: a POST of `{"text": ...}` to ALERT_WEBHOOK_URL on a failed check only, and never a
secret in the report, the log line or the webhook body."""

from __future__ import annotations

import json
import logging

import pytest

from tests.monitors.conftest import run_health
from tests.webhooks.receiver import Receiver

PROXY_PASSWORD = "pr0xy-pa55-9f8e"
API_KEY = "fc-key-0a1b2c3d4e"


@pytest.mark.integration
def test_a_failed_check_posts_to_the_webhook(tmp_path, db, webhook):
    report = run_health({"cannaspider/stale_hash_fallbacks": 2}, tmp_path, db, ALERT_WEBHOOK_URL=webhook.url)
    assert not report["ok"]
    assert len(webhook.bodies) == 1 and list(webhook.bodies[0]) == ["text"]
    text = webhook.bodies[0]["text"]
    assert text.startswith("cannaspider crawl health: product_resync: 1 check(s) failed")
    assert "2 requests fell back to the full query" in text


@pytest.mark.integration
def test_a_healthy_crawl_posts_nothing(tmp_path, db, webhook):
    assert run_health({}, tmp_path, db, ALERT_WEBHOOK_URL=webhook.url)["ok"]
    assert webhook.bodies == []


def test_an_unreachable_webhook_is_a_warning_without_its_url(tmp_path, db, caplog):
    url = "http://127.0.0.1:9/hooks/T000/s3cr3t-path"
    with caplog.at_level(logging.WARNING):
        report = run_health({"log_count/ERROR": 1}, tmp_path, db, ALERT_WEBHOOK_URL=url)
    assert not report["ok"]
    assert any("alert webhook could not be reached" in r.getMessage() for r in caplog.records)
    assert "s3cr3t-path" not in caplog.text


def warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


@pytest.mark.integration
@pytest.mark.parametrize("status", [302, 307, 308])
def test_a_redirect_is_never_followed(tmp_path, db, caplog, status):
    with Receiver() as elsewhere, Receiver(statuses=[status], location=elsewhere.url) as receiver:
        run_health({"log_count/ERROR": 1}, tmp_path, db, ALERT_WEBHOOK_URL=receiver.url)
    assert [r["method"] for r in receiver.received] == ["POST"] and elsewhere.received == []
    assert warnings(caplog) == [
        f"crawl health: the alert webhook could not be reached (answered HTTP {status}, a redirect (never followed))"
    ]


@pytest.mark.integration
def test_a_long_answer_is_not_read(tmp_path, db, caplog):
    with Receiver(stream=32 << 20) as receiver:
        run_health({"log_count/ERROR": 1}, tmp_path, db, ALERT_WEBHOOK_URL=receiver.url)
        assert receiver.done.wait(60) and receiver.hung_up.is_set()
    assert len(receiver.received) == 1 and warnings(caplog) == []


@pytest.mark.integration
def test_a_private_webhook_is_refused_without_the_setting(tmp_path, db, caplog):
    with Receiver() as receiver:
        for n, url in enumerate((receiver.url, receiver.url.replace("127.0.0.1", "localhost"))):
            settings = {"ALERT_WEBHOOK_URL": url, "WEBHOOK_ALLOW_PRIVATE": False}
            run_health({"log_count/ERROR": 1}, tmp_path / str(n), db, **settings)
    assert receiver.received == []
    assert warnings(caplog) == 2 * [
        "crawl health: the alert webhook could not be reached (refused: the webhook's address 127.0.0.1 is not "
        "public (set WEBHOOK_ALLOW_PRIVATE to allow it))"
    ]


@pytest.mark.integration
def test_no_secret_in_the_report_log_or_webhook(tmp_path, db, webhook, caplog):
    proxy = f"http://crawler:{PROXY_PASSWORD}@127.0.0.1:3128"
    stats = {
        # a fatal error whose text carries a proxy URL and a key, as an exception message might
        "cannaspider/fatal_error": f"proxy {proxy} refused; Firecrawl said bad key {API_KEY}",
        f"cannaspider/proxy/{proxy}/blocked": 50,
    }
    with caplog.at_level(logging.INFO):
        report = run_health(
            stats, tmp_path, db, ALERT_WEBHOOK_URL=webhook.url, FIRECRAWL_API_KEY=API_KEY, PROXY_URL=proxy
        )
    written = json.dumps(report)
    assert "refused" in written and "http://***@127.0.0.1:3128" in written  # the alert still says what happened
    for secret in (PROXY_PASSWORD, API_KEY, "s3cr3t-hook"):
        assert secret not in written
        assert secret.encode() not in b"".join(webhook.raw)
        assert secret not in "\n".join(r.getMessage() for r in caplog.records if r.name.startswith("cannaspider"))
