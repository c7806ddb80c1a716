"""One alerts pass: match what happened since the last pass, then post what is due. The unit a
loop repeats (`scrapy alerts send --follow`, and the schedule loop when it calls it); it runs in
its own process beside the crawls, which only write the events it reads."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg
from scrapy.settings import BaseSettings

from cannaspider.alerts.match import match
from cannaspider.alerts.sender import AlertSender


@dataclass(frozen=True)
class AlertsPass:
    matched: int
    delivered: int
    failed: int


async def run_once(
    conn: psycopg.AsyncConnection[Any], settings: BaseSettings, sender: AlertSender | None = None
) -> AlertsPass:
    """`conn` in autocommit; pass the same sender on every call of a loop (it warns once)."""
    matched = await match(conn, settings.getfloat("ALERTS_MATCH_LOOKBACK_S"))
    sent = await (sender or AlertSender.from_settings(settings)).send(conn)
    return AlertsPass(matched, sent.delivered, sent.failed)
