"""One alerts pass: match what happened since the last pass, then post what is due; and the loop
that repeats it every ALERTS_TICK_S (`scrapy schedule`, as a task of its own beside the ticks,
and `scrapy alerts send --follow`). Crawls only write the events it reads: nothing here makes a
crawl wait.

A pass is bounded (AlertSender.pass_bound_s, past its posts' timeout): a webhook that hangs or a
database that stalls cuts the pass short; the deliveries it had claimed become due again when
their claim runs out (sender.py), so the cut loses nothing. A pass that fails (the database
restarts) is one line, and the loop tries again a tick later on a new connection.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import psycopg
from scrapy.settings import BaseSettings

from cannaspider.alerts.match import match
from cannaspider.alerts.sender import AlertSender
from cannaspider.db.errors import first_line


@dataclass(frozen=True)
class AlertsPass:
    matched: int
    delivered: int
    failed: int

    def describe(self) -> str:
        return f"alerts: {self.matched} matched, {self.delivered} delivered, {self.failed} to retry"


async def run_once(
    conn: psycopg.AsyncConnection[Any], settings: BaseSettings, sender: AlertSender | None = None
) -> AlertsPass:
    """`conn` in autocommit; pass the same sender on every call of a loop (it warns once)."""
    matched = await match(conn, settings.getfloat("ALERTS_MATCH_LOOKBACK_S"))
    sent = await (sender or AlertSender.from_settings(settings)).send(conn)
    return AlertsPass(matched, sent.delivered, sent.failed)


async def follow(
    url: str, settings: BaseSettings, stop: asyncio.Event, report: Callable[[AlertsPass | str], None]
) -> None:
    """A pass every ALERTS_TICK_S until `stop` is set (the first pass comes even so); `report`
    gets each pass, or a failure's line."""
    sender = AlertSender.from_settings(settings)
    every = settings.getfloat("ALERTS_TICK_S")
    conn: psycopg.AsyncConnection[Any] | None = None
    try:
        while True:
            try:
                if conn is None:
                    conn = await psycopg.AsyncConnection.connect(url, autocommit=True)
                report(await asyncio.wait_for(run_once(conn, settings, sender), sender.pass_bound_s))
            except (psycopg.Error, OSError, TimeoutError) as exc:
                # a pass cut short leaves its connection mid-statement: the next pass opens another
                why = f"no end within {sender.pass_bound_s:g} s" if isinstance(exc, TimeoutError) else first_line(exc)
                report(f"alerts: pass failed ({why}); again in {every:g} s")
                if conn is not None:
                    await conn.close()
                conn = None
            if stop.is_set():
                return
            try:
                await asyncio.wait_for(stop.wait(), every)
            except TimeoutError:
                pass
    finally:
        if conn is not None:
            await conn.close()
