"""Alerts end to end against a receiver on 127.0.0.1: subscriptions matched against real event
rows (and market rows), the signed POSTs, a receiver that answers 500 or is down, the retries
with their backoff, at-least-once without duplicates, and the secret kept out of logs and rows."""

from __future__ import annotations

import asyncio
import json
import logging
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from cannaspider.webhooks import delivery, subscriptions
from cannaspider.webhooks.delivery import WebhookPass, WebhookSender, run_once
from tests.helpers import project_crawler
from tests.webhooks.receiver import TOKEN_PATH, Receiver

SECRET = "s3cret-for-alert-tests-only"
ALERT_TABLES = "alert_deliveries, alert_subscriptions, alert_match_state"


def settings(**overrides: Any) -> Any:
    # the receivers are on 127.0.0.1: allowed here, refused by default (test_a_private_webhook_…)
    base = {"ALERTS_WEBHOOK_SECRET": SECRET, "ALERTS_BACKOFF_S": 60.0, "WEBHOOK_ALLOW_PRIVATE": True}
    return project_crawler(**{**base, **overrides}).settings


def alerts_pass(db: str, sender: WebhookSender | None = None, **overrides: Any) -> WebhookPass:
    async def run() -> WebhookPass:
        async with await psycopg.AsyncConnection.connect(db, autocommit=True) as conn:
            return await run_once(conn, settings(**overrides), sender)

    return asyncio.run(run())


@pytest.fixture
def events(db, sql):
    """A store in AZ and one in NV; a Stiiizy product whose price fell 20 %, another 5 %; one out of stock."""
    sql(f"TRUNCATE {ALERT_TABLES}")
    sql("SELECT ensure_snapshot_partitions((now() - interval '1 day')::date, 2)")
    az, nv = (
        sql("INSERT INTO dispensaries (name, state, city) VALUES (%s, %s, 'X') RETURNING id", (n, s))[0][0]
        for n, s in (("Green AZ", "AZ"), ("Blue NV", "NV"))
    )
    brand = sql("INSERT INTO brands (key, name, normalized_name) VALUES ('d:b1', 'STIIIZY', 'stiiizy') RETURNING id")
    ids: dict[str, int] = {"az": az, "nv": nv, "brand": brand[0][0]}
    for key, store in (("pod", az), ("pen", az), ("nv", nv)):
        ids[key] = sql(
            "INSERT INTO store_products (dispensary_id, provider_product_id, name_raw, brand_name_raw, "
            "canonical_brand_id) VALUES (%s, %s, %s, 'Stiiizy', %s) RETURNING id",
            (store, key, f"Blue Dream {key}", ids["brand"]),
        )[0][0]
    at = datetime.now(UTC) - timedelta(minutes=10)
    runs = {
        s: sql(
            "INSERT INTO crawl_runs (dispensary_id, role, status, started_at) VALUES (%s, 'product_resync', "
            "'complete', %s) RETURNING id",
            (s, at),
        )[0][0]
        for s in (az, nv)
    }
    for key, store, kind, old, new in (
        ("pod", az, "price_changed", 35, 28),  # -20 %
        ("pen", az, "price_changed", 20, 19),  # -5 %
        ("pen", az, "out_of_stock", None, 19),
        ("nv", nv, "out_of_stock", None, 30),
    ):
        ids[f"{key}:{kind}"] = sql(
            "INSERT INTO product_events (occurred_at, crawl_run_id, dispensary_id, store_product_id, type, "
            "price_rec_old, price_rec) VALUES (%s, %s, %s, %s, %s, %s, %s) RETURNING id",
            (at, runs[store], store, ids[key], kind, old, new),
        )[0][0]
    return ids


def subscribe(db: str, url: str, types: list[str], allow_private: bool = True, **filters: Any) -> int:
    with psycopg.connect(db, autocommit=True) as conn:
        return subscriptions.add(conn, url, types, allow_private=allow_private, **filters)


@pytest.mark.integration
def test_matching_events_are_posted_signed_once_each(db, sql, events):
    with Receiver() as receiver:
        drops = subscribe(db, receiver.url, ["price_changed"], min_drop_pct=15, brand="stiiizy ")
        oos = subscribe(db, receiver.url, ["out_of_stock"], state="az")
        done = alerts_pass(db)
        assert done == WebhookPass(matched=2, delivered=2, failed=0)
        again = alerts_pass(db)  # the same events seen again: nothing twice
        assert again == WebhookPass(0, 0, 0)
    got = {}
    for request in receiver.received:
        headers, body = request["headers"], request["body"]
        assert request["path"] == TOKEN_PATH
        assert delivery.verify(SECRET, int(headers[delivery.TIMESTAMP]), body, headers[delivery.SIGNATURE])
        assert not delivery.verify(
            "another secret", int(headers[delivery.TIMESTAMP]), body, headers[delivery.SIGNATURE]
        )
        doc = json.loads(body)
        assert headers[delivery.DELIVERY] == str(doc["delivery_id"])
        got[doc["subscription_id"]] = doc
    assert set(got) == {drops, oos}
    drop = got[drops]
    assert (drop["type"], drop["event_id"], drop["price_rec_old"], drop["price_rec"], drop["change_pct"]) == (
        "price_changed",
        events["pod:price_changed"],
        35.0,
        28.0,
        -20.0,
    )
    assert (drop["store"], drop["brand_id"], drop["key"]) == (
        "Green AZ",
        events["brand"],
        f"e:{events['pod:price_changed']}",
    )
    assert (got[oos]["type"], got[oos]["event_id"], got[oos]["state"]) == (
        "out_of_stock",
        events["pen:out_of_stock"],
        "AZ",
    )
    assert sql("SELECT count(*) FROM alert_deliveries WHERE delivered_at IS NOT NULL AND attempts = 1") == [(2,)]


@pytest.mark.integration
def test_an_implausible_price_move_fires_no_price_alert(db, sql, events):
    """Issue #28, 16: $30 → $0.01 and $20 → $20,000 are wrong prices, not a 99.97 % drop or a rise
    (cannaspider/analytics/plausible.py): no subscription to price changes hears of them, with
    --min-drop or without; the plausible -20 % drop still fires."""
    run = sql("SELECT crawl_run_id FROM product_events WHERE id = %s", (events["pod:price_changed"],))[0][0]
    for key, old, new in (("pod", "30.00", "0.01"), ("pen", "20.00", "20000.00")):
        sql(
            "INSERT INTO product_events (occurred_at, crawl_run_id, dispensary_id, store_product_id, type, "
            "price_rec_old, price_rec) VALUES (now(), %s, %s, %s, 'price_changed', %s, %s)",
            (run, events["az"], events[key], old, new),
        )
    with Receiver() as receiver:
        drops = subscribe(db, receiver.url, ["price_changed"], min_drop_pct=15)
        every = subscribe(db, receiver.url, ["price_changed"])
        assert alerts_pass(db) == WebhookPass(matched=3, delivered=3, failed=0)
    got = sorted(
        (doc["subscription_id"], doc["price_rec_old"], doc["price_rec"])
        for doc in (json.loads(r["body"]) for r in receiver.received)
    )
    assert got == sorted([(drops, 35.0, 28.0), (every, 35.0, 28.0), (every, 20.0, 19.0)])


@pytest.mark.integration
def test_a_500_or_a_receiver_down_loses_nothing_and_is_retried_with_backoff(db, sql, events, caplog):
    caplog.set_level(logging.DEBUG)
    with Receiver(statuses=[500]) as receiver:
        subscribe(db, receiver.url, ["out_of_stock"], state="NV")
        assert alerts_pass(db) == WebhookPass(1, 0, 1)
        ((status, error, attempts, wait),) = sql(
            "SELECT last_status, last_error, attempts, extract(epoch FROM next_attempt_at - now()) "
            "FROM alert_deliveries"
        )
        assert (status, error, attempts) == (500, "answered HTTP 500", 1)
        assert 50 < float(wait) <= 72  # ALERTS_BACKOFF_S (60) after the first failure, jittered up to +20 %
        assert alerts_pass(db) == WebhookPass(0, 0, 0)  # not due yet
        sql("UPDATE alert_deliveries SET next_attempt_at = now()")
        assert alerts_pass(db) == WebhookPass(0, 1, 0)
    first, second = receiver.received
    assert first["headers"][delivery.DELIVERY] == second["headers"][delivery.DELIVERY]  # the same delivery, retried
    assert json.loads(second["body"])["event_id"] == events["nv:out_of_stock"]

    # the receiver is down now: the next delivery waits, its error names no URL
    sql(
        "INSERT INTO alert_deliveries (subscription_id, key, payload) "
        "SELECT id, 'e:manual', '{}' FROM alert_subscriptions"
    )
    for _ in (1, 2):
        sql("UPDATE alert_deliveries SET next_attempt_at = now() WHERE delivered_at IS NULL")
        assert alerts_pass(db) == WebhookPass(0, 0, 1)
    ((status, error, attempts, wait),) = sql(
        "SELECT last_status, last_error, attempts, extract(epoch FROM next_attempt_at - now()) FROM alert_deliveries "
        "WHERE delivered_at IS NULL"
    )
    assert (status, attempts) == (None, 2) and error.startswith("connection failed (")
    assert 110 < float(wait) <= 144  # doubled after the second failure
    logged = caplog.text + " ".join(str(r) for r in sql("SELECT * FROM alert_deliveries"))
    assert SECRET not in logged and "T0KEN" not in logged
    # after ALERTS_MAX_ATTEMPTS it stays, undelivered, and is no longer posted
    sql("UPDATE alert_deliveries SET next_attempt_at = now() WHERE delivered_at IS NULL")
    assert alerts_pass(db, ALERTS_MAX_ATTEMPTS=2) == WebhookPass(0, 0, 0)
    assert sql("SELECT count(*) FROM alert_deliveries WHERE delivered_at IS NULL") == [(1,)]


@pytest.mark.integration
@pytest.mark.parametrize("status", [302, 307, 308])
def test_a_redirect_is_a_failed_delivery_never_followed(db, sql, events, status):
    with Receiver() as elsewhere, Receiver(statuses=[status], location=elsewhere.url) as receiver:
        subscribe(db, receiver.url, ["out_of_stock"], state="NV")
        assert alerts_pass(db) == WebhookPass(1, 0, 1)
    assert [r["method"] for r in receiver.received] == ["POST"]
    assert elsewhere.received == []  # neither a GET nor the signed POST went where it pointed
    assert sql("SELECT delivered_at, last_status, last_error FROM alert_deliveries") == [
        (None, status, f"answered HTTP {status}, a redirect (never followed)")
    ]


@pytest.mark.integration
def test_a_long_answer_is_read_no_further_than_a_few_kb(db, sql, events):
    """A receiver that streams 32 MB back: the status is read, the answer closed unread."""
    with Receiver(stream=32 << 20) as receiver:
        subscribe(db, receiver.url, ["out_of_stock"], state="NV")
        assert alerts_pass(db) == WebhookPass(1, 1, 0)
        assert receiver.done.wait(60) and receiver.hung_up.is_set()
    assert sql("SELECT last_status, last_error FROM alert_deliveries") == [(200, None)]


@pytest.mark.integration
def test_a_private_webhook_is_refused_unless_allowed(db, sql, events):
    with Receiver() as receiver:
        by_name = receiver.url.replace("127.0.0.1", "localhost")
        for url in (receiver.url, by_name):
            with pytest.raises(subscriptions.SubscriptionError, match=r"127\.0\.0\.1 is not public"):
                subscribe(db, url, ["out_of_stock"], allow_private=False)
        # subscribed while allowed (or a name that resolved elsewhere then): each post checks again
        for url in (receiver.url, by_name):
            subscribe(db, url, ["out_of_stock"], state="NV")
        assert alerts_pass(db, WEBHOOK_ALLOW_PRIVATE=False) == WebhookPass(2, 0, 2)
        assert receiver.received == []
        assert sql("SELECT DISTINCT last_status, last_error FROM alert_deliveries") == [
            (None, "refused: the webhook's address 127.0.0.1 is not public (set WEBHOOK_ALLOW_PRIVATE to allow it)")
        ]
        sql("UPDATE alert_deliveries SET next_attempt_at = now()")
        assert alerts_pass(db) == WebhookPass(0, 2, 0)
    assert len(receiver.received) == 2


@pytest.mark.integration
def test_without_a_secret_nothing_is_sent_and_deliveries_wait(db, sql, events, caplog):
    with Receiver() as receiver:
        subscribe(db, receiver.url, ["out_of_stock"])
        sender = WebhookSender.from_settings(settings(ALERTS_WEBHOOK_SECRET=None))
        assert "s3cret" not in repr(WebhookSender.from_settings(settings()))
        assert alerts_pass(db, sender) == WebhookPass(2, 0, 0)
        assert alerts_pass(db, sender) == WebhookPass(0, 0, 0)
    assert receiver.received == []
    assert sql("SELECT count(*) FROM alert_deliveries WHERE delivered_at IS NULL AND attempts = 0") == [(2,)]
    assert caplog.text.count("ALERTS_WEBHOOK_SECRET is not set") == 1


@pytest.mark.integration
def test_a_brands_availability_change_over_the_threshold(db, sql, events):
    today = datetime.now(UTC).date()
    then = today - timedelta(days=28)
    sql("TRUNCATE market_state_daily, market_brand_daily")
    for day, crawled in ((then, 4), (today, 4)):
        sql("INSERT INTO market_state_daily VALUES ('AZ', %s, %s, 0, 0, 0, 0, 0, 0, 0, 0, 0)", (day, crawled))
    for day, stores in ((then, 1), (today, 3)):  # 25 % → 75 %
        sql("INSERT INTO market_brand_daily VALUES ('AZ', %s, %s, %s, 4, 1, 1, 10)", (day, events["brand"], stores))
    with Receiver() as receiver:
        big = subscribe(db, receiver.url, ["availability_changed"], min_change=0.5, brand="Stiiizy")
        subscribe(db, receiver.url, ["availability_changed"], min_change=0.6)  # not reached
        assert alerts_pass(db) == WebhookPass(1, 1, 0)
    doc = json.loads(receiver.received[0]["body"])
    assert doc["subscription_id"] == big
    assert (doc["state"], doc["day"], doc["availability"], doc["availability_then"], doc["change"]) == (
        "AZ",
        today.isoformat(),
        0.75,
        0.25,
        0.5,
    )


@pytest.mark.integration
def test_a_brand_that_no_store_carries_any_more_is_an_availability_change(db, sql, events):
    today = datetime.now(UTC).date()
    then = today - timedelta(days=28)
    sql("TRUNCATE market_state_daily, market_brand_daily")
    for day, crawled in ((then, 4), (today, 5)):
        sql("INSERT INTO market_state_daily VALUES ('AZ', %s, %s, 0, 0, 0, 0, 0, 0, 0, 0, 0)", (day, crawled))
    # carried by 2 of 4 stores then, by none of the 5 crawled today: no row of today at all
    sql("INSERT INTO market_brand_daily VALUES ('AZ', %s, %s, 2, 4, 1, 2, 10)", (then, events["brand"]))
    with Receiver() as receiver:
        sub = subscribe(db, receiver.url, ["availability_changed"], min_change=0.5, state="AZ")
        assert alerts_pass(db) == WebhookPass(1, 1, 0)
        assert alerts_pass(db) == WebhookPass(0, 0, 0)  # once
    doc = json.loads(receiver.received[0]["body"])
    assert (doc["subscription_id"], doc["brand_id"], doc["brand"]) == (sub, events["brand"], "STIIIZY")
    assert (doc["stores"], doc["stores_crawled"], doc["stores_then"], doc["stores_crawled_then"]) == (0, 5, 2, 4)
    assert (doc["availability"], doc["availability_then"], doc["change"]) == (0, 0.5, -0.5)
    assert doc["key"] == f"a:AZ:{today.isoformat()}:{events['brand']}"


@pytest.mark.integration
def test_the_events_of_a_crawl_that_closes_hours_after_its_start_are_matched(db, sql, events):
    """Matched by when the close wrote them, not by their crawl's start (ALERTS_MATCH_LOOKBACK_S before)."""
    started = datetime.now(UTC) - timedelta(hours=8)
    product = events["nv"]  # the NV store's product (the fixture's "nv" key names it, not the store)
    store = sql("SELECT dispensary_id FROM store_products WHERE id = %s", (product,))[0][0]
    run = sql(
        "INSERT INTO crawl_runs (dispensary_id, role, status, started_at) VALUES (%s, 'product_resync', "
        "'running', %s) RETURNING id",
        (store, started),
    )[0][0]
    with Receiver() as receiver:
        subscribe(db, receiver.url, ["back_in_stock"])
        assert alerts_pass(db) == WebhookPass(0, 0, 0)  # a pass while the crawl runs
        # 8 hours on, the crawl closes: its events carry its start, written now
        event = sql(
            "INSERT INTO product_events (occurred_at, crawl_run_id, dispensary_id, store_product_id, type, "
            "price_rec) VALUES (%s, %s, %s, %s, 'back_in_stock', 30) RETURNING id",
            (started, run, store, product),
        )[0][0]
        assert alerts_pass(db) == WebhookPass(1, 1, 0)
    doc = json.loads(receiver.received[0]["body"])
    assert (doc["event_id"], doc["type"], doc["crawl_run_id"]) == (event, "back_in_stock", run)
    assert datetime.fromisoformat(doc["occurred_at"]) == started


@pytest.mark.parametrize(
    ("types", "filters", "reason"),
    [
        ([], {}, "at least one --type"),
        (["sold_out"], {}, "unknown type 'sold_out'"),
        (["listed"], {"min_drop_pct": 10}, "applies to --type price_changed"),
        (["price_changed"], {"min_drop_pct": 0}, "percent"),
        (["availability_changed"], {}, "needs --min-change"),
        (["listed"], {"state": "Arizona"}, "two letters"),
        (["listed"], {"brand": "!!"}, "letters or digits"),
    ],
)
def test_bad_subscriptions_are_refused_with_the_reason(db, types, filters, reason):
    with pytest.raises(subscriptions.SubscriptionError, match=reason):
        subscribe(db, "https://hooks.example/T0KEN", types, **filters)
    with pytest.raises(subscriptions.SubscriptionError, match="http"):
        subscribe(db, "file:///etc/passwd", ["listed"])


def test_a_listed_subscription_shows_no_token():
    assert subscriptions.redacted("https://hooks.slack.com/services/T0/B0/XYZ") == "https://hooks.slack.com/…"
    assert subscriptions.redacted("http://127.0.0.1:8080/x?token=1") == "http://127.0.0.1:8080/…"
