"""Receivers accept our webhooks (issue 33): the Standard Webhooks headers checked by the standard's
own reference verifier (the `standardwebhooks` package) on what a real loopback receiver got, for the
event webhooks and the crawl-health webhook; and a pass never has more than
ALERTS_PER_HOST_CONCURRENCY posts in flight to one host."""

from __future__ import annotations

import asyncio
import base64
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import psycopg
import pytest
from scrapy.exceptions import UsageError
from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError

from cannaspider.webhooks.delivery import WebhookSender
from tests.monitors.conftest import run_health
from tests.webhooks.receiver import Receiver
from tests.webhooks.test_delivery import ALERT_TABLES, settings

pytestmark = pytest.mark.integration  # spawns (tests/tiers.py)

RAW_SECRET = "s3cret-for-alert-tests-only"
WHSEC = "whsec_" + base64.b64encode(b"sixteen byte key, or more").decode()


def queue(sql, url: str, n: int) -> None:
    """`n` due deliveries to `url` (what a matching pass would have queued)."""
    sql(f"TRUNCATE {ALERT_TABLES}")
    (sub,) = sql("INSERT INTO alert_subscriptions (webhook_url, types) VALUES (%s, '{listed}') RETURNING id", (url,))
    sql(
        "INSERT INTO alert_deliveries (subscription_id, key, payload) "
        "SELECT %s, 'e:' || g, jsonb_build_object('type', 'listed', 'event_id', g) FROM generate_series(1, %s) g",
        (sub[0], n),
    )


def send(db: str, **overrides: Any):
    async def run():
        async with await psycopg.AsyncConnection.connect(db, autocommit=True) as conn:
            return await WebhookSender.from_settings(settings(**overrides)).send(conn)

    return asyncio.run(run())


@pytest.mark.parametrize("secret", [RAW_SECRET, WHSEC])
def test_a_stock_verifier_accepts_the_event_webhooks(db, sql, secret):
    with Receiver() as receiver:
        queue(sql, receiver.url, 3)
        assert send(db, ALERTS_WEBHOOK_SECRET=secret).delivered == 3
    # a receiver gives its verifier the whsec_ secret as is, any other as its bytes
    verifier = Webhook(secret if secret.startswith("whsec_") else secret.encode())
    ids = set()
    for request in receiver.received:
        doc = verifier.verify(request["body"], request["headers"])
        assert doc["type"] == "listed"
        assert request["headers"]["webhook-id"] == f"msg_{doc['delivery_id']}"
        ids.add(request["headers"]["webhook-id"])
        with pytest.raises(WebhookVerificationError):  # a body changed on the way is refused
            verifier.verify(request["body"] + b" ", request["headers"])
        with pytest.raises(WebhookVerificationError):  # so is another secret's signature
            Webhook(b"another secret entirely").verify(request["body"], request["headers"])
    assert len(ids) == 3


def test_the_crawl_health_webhook_is_signed_the_same_way(tmp_path, db):
    with Receiver() as receiver:
        report = run_health(
            {"cannaspider/stale_hash_fallbacks": 2},
            tmp_path,
            db,
            ALERT_WEBHOOK_URL=receiver.url,
            ALERTS_WEBHOOK_SECRET=WHSEC,
        )
    assert not report["ok"]
    (request,) = receiver.received
    doc = Webhook(WHSEC).verify(request["body"], request["headers"])
    assert doc["text"].startswith("cannaspider crawl health: product_resync")


class CountingReceiver:
    """Answers 200 after `hold_s`, counting the requests in flight at once."""

    def __init__(self, hold_s: float) -> None:
        self.lock = threading.Lock()
        self.now = self.most = self.total = 0
        counter = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with counter.lock:
                    counter.now += 1
                    counter.total += 1
                    counter.most = max(counter.most, counter.now)
                time.sleep(hold_s)
                with counter.lock:
                    counter.now -= 1
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> CountingReceiver:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_a_pass_keeps_to_the_per_host_cap(db, sql):
    with CountingReceiver(hold_s=0.2) as receiver:
        queue(sql, receiver.url, 12)
        done = send(db, ALERTS_PER_HOST_CONCURRENCY=3)
    assert (done.delivered, done.failed, receiver.total) == (12, 0, 12)
    assert receiver.most == 3  # concurrent, and never more than the cap
    assert sql("SELECT count(*) FROM alert_deliveries WHERE delivered_at IS NOT NULL") == [(12,)]


def test_the_digest_is_one_signed_post_per_subscription_with_its_deliveries(db, sql):
    with Receiver() as receiver:
        queue(sql, receiver.url, 5)
        done = send(db, ALERTS_WEBHOOK_SECRET=WHSEC, ALERTS_DIGEST=True)
        again = send(db, ALERTS_WEBHOOK_SECRET=WHSEC, ALERTS_DIGEST=True)
    assert (done.delivered, done.failed, again.delivered) == (5, 0, 0)
    (request,) = receiver.received
    doc = Webhook(WHSEC).verify(request["body"], request["headers"])
    assert doc["digest"] is True and sorted(d["event_id"] for d in doc["deliveries"]) == [1, 2, 3, 4, 5]
    assert request["headers"]["webhook-id"].startswith("digest_")
    assert sql("SELECT count(*) FROM alert_deliveries WHERE delivered_at IS NOT NULL") == [(5,)]


def test_the_slack_format_is_text_one_line_per_delivery(db, sql):
    with Receiver() as receiver:
        queue(sql, receiver.url, 2)
        assert send(db, ALERTS_FORMAT="slack", ALERTS_DIGEST=True).delivered == 2
    (request,) = receiver.received
    doc = Webhook(RAW_SECRET.encode()).verify(request["body"], request["headers"])
    assert list(doc) == ["text"]
    assert [line.split(":")[0] for line in doc["text"].splitlines()] == ["listed", "listed"]


def test_an_unknown_format_is_refused():
    with pytest.raises(UsageError, match="ALERTS_FORMAT must be one of json, slack, got 'xml'"):
        WebhookSender.from_settings(settings(ALERTS_FORMAT="xml"))
