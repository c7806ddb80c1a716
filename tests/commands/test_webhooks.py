"""`scrapy webhooks add | list | remove | send` as an operator runs them: a subscription stored and
listed without its webhook's token, bad input one `error:` line and exit 2, a pass that sends
nothing without the secret."""

from __future__ import annotations

import os

import pytest

from tests.helpers import run_scrapy

pytestmark = pytest.mark.integration  # spawns (tests/tiers.py)

HOOK = "https://hooks.example.com/services/T0KEN/secret-part"


@pytest.fixture
def env(db, sql, tmp_path) -> dict:
    sql("TRUNCATE alert_deliveries, alert_subscriptions, alert_match_state")
    clean = {k: v for k, v in os.environ.items() if not k.startswith("SCRAPY_") and k != "CANNASPIDER_ALERTS_SECRET"}
    return {**clean, "DATABASE_URL": db, "CANNASPIDER_DATA_DIR": str(tmp_path / "data")}


def alerts(env, *args):
    return run_scrapy("webhooks", *args, env=env, timeout=120)


def test_add_list_remove_without_showing_the_token(env, sql):
    added = alerts(env, "add", "--type", "price_changed", "--min-drop", "15", "--brand", "Stiiizy", "--webhook", HOOK)
    assert added.returncode == 0, added.stderr
    assert "T0KEN" not in added.stdout + added.stderr and "https://hooks.example.com/…" in added.stdout
    assert sql("SELECT types, min_drop_pct, brand_key, webhook_url FROM alert_subscriptions") == [
        (["price_changed"], 15, "stiiizy", HOOK)
    ]
    listed = alerts(env, "list")
    assert listed.returncode == 0 and "min-drop %=15" in listed.stdout and "T0KEN" not in listed.stdout
    sent = alerts(env, "send")
    assert sent.returncode == 0 and "0 delivered" in sent.stdout
    (sub_id,) = sql("SELECT id FROM alert_subscriptions")[0]
    assert alerts(env, "remove", str(sub_id)).returncode == 0
    assert sql("SELECT count(*) FROM alert_subscriptions") == [(0,)]


@pytest.mark.parametrize(
    "args",
    [
        ("add", "--type", "sold_out", "--webhook", HOOK),
        ("add", "--type", "listed"),
        ("remove", "999"),
        ("frobnicate",),
        ("add", "--type", "listed", "--webhook", "http://127.0.0.1:9/hooks/T0KEN"),  # WEBHOOK_ALLOW_PRIVATE unset
    ],
)
def test_bad_input_is_one_error_line_and_exit_2(env, args):
    done = alerts(env, *args)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    assert "T0KEN" not in done.stderr
