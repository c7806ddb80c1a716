"""The demo's month: the whole chain, then DAYS days of product crawls, in one process, with a
simulated clock that is the demo's alone.

    python -m sandbox.demo_month --state AZ --sandbox http://127.0.0.1:PORT --output products.json

`scrapy demo` (sandbox/commands/demo.py) runs it with DATABASE_URL, DUTCHIE_GRAPHQL_URL and
JANE_ALGOLIA_URL set to its own database and sandbox. Each day: POST /_sandbox/day puts the
sandbox's menus on that day (sandbox/month.py), the day's crawl runs (product_discovery on day 1,
product_resync after), every store's run is checked complete, and then what the crawl wrote is
moved back in time (Backdating). The analytics refresh runs once at the end, over the whole month.

Why this clock: the crawl has no clock of its own to turn. Its times are PostgreSQL's now() (runs,
misses, events, snapshots) and the process's, in a dozen modules; a clock setting they all read
would be a path of production code that exists only for the demo. So every crawl runs at the
real time and the demo rewrites its own database afterwards: every timestamptz column of the
schema's tables (found in the catalog, so a table added later is moved too) whose value lies
between the day's start and now moves back by the days left in the month, less the minutes the
demo has already run. Day d's rows then lie where they would had the crawl run d - DAYS days ago,
in order, a day apart: the crawl's rules (three misses in a row, the OOS guard's streak) count
crawls, not hours, so they judge the month as they would a real one. Left alone: the menus' own
dates (store_products.provider_*: what the platform says, which the window could catch by
chance), and the migrations' log.

The crawls run in one process (Scrapy's AsyncCrawlerRunner, one crawl after the other) rather
than one `scrapy crawl` each: on the loaded development machine a `scrapy crawl` took some 15 s
(the demo of seven took 1 min 55 s), 34 of them would not fit the demo's three minutes; in one
process a day's crawl of the 12 stores takes 2 to 5 s. They are the same spiders with the same
settings as `scrapy crawl`, each printed as the command that does the same, but for the feeds:
only the last day writes one (`-O`); the others run with `-s FEEDS={}` (no default feed: 30 daily
feeds nobody reads were a fifth of the month's time).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
import urllib.request
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql
from scrapy.crawler import AsyncCrawlerRunner
from scrapy.settings import Settings
from scrapy.utils.log import configure_logging
from scrapy.utils.project import get_project_settings
from scrapy.utils.reactor import install_reactor

from cannaspider.crawl_outcome import FATAL_ERROR_STAT, FEED_ERROR_STAT, UNITS_INCOMPLETE_STAT
from cannaspider.db import connect, database_url
from sandbox import month

# every timestamptz column of the schema's tables (a partitioned table's once, on its parent)
TIMESTAMP_COLUMNS = """
SELECT c.relname, a.attname
  FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p') AND NOT c.relispartition
   AND a.attnum > 0 AND NOT a.attisdropped AND a.attgenerated = '' AND a.atttypid = 'timestamptz'::regtype
 ORDER BY 1, 2
"""
NOT_MOVED = {"schema_migrations"}  # the migrations' log; and columns provider_*: the menus' own dates
# a day's runs, by status (every store must have one complete run a day)
DAY_RUNS = "SELECT status, count(*) FROM crawl_runs WHERE started_at >= %s GROUP BY 1"


class Backdating:
    """The demo's clock: moves each day's writes back to that day of the month (one connection,
    held for the month: a day costs one round trip of checks and one pipeline of updates)."""

    def __init__(self, url: str, days: int):
        self.days = days
        self.conn = connect(url, autocommit=True)
        self.start = _now(self.conn)  # the month's last day is the demo's start, day 1 `days - 1` before
        self.columns = [
            (table, column)
            for table, column in self.conn.execute(TIMESTAMP_COLUMNS).fetchall()
            if table not in NOT_MOVED and not column.startswith("provider_")
        ]

    def close(self) -> None:
        self.conn.close()

    def day_date(self, day: int) -> str:
        return (self.start - timedelta(days=self.days - day)).date().isoformat()

    def close_day(self, day: int, since: datetime) -> datetime:
        """Checks that every store's crawl of day `day` (written since `since`) is complete, moves
        what was written since then back to that day; the next day's `since`."""
        runs = dict(self.conn.execute(DAY_RUNS, (since,)).fetchall())
        if set(runs) != {"complete"}:
            raise SystemExit(f"error: day {day}: every store's crawl should be complete: {runs}")
        shift = timedelta(days=self.days - day) + (since - self.start)
        with self.conn.transaction(), self.conn.pipeline():
            until = _now(self.conn)  # the day's crawl is over: nothing is written between now and the next
            for table, column in self.columns:
                query = sql.SQL("UPDATE {t} SET {c} = {c} - %(shift)s WHERE {c} >= %(since)s AND {c} <= %(until)s")
                self.conn.execute(
                    query.format(t=sql.Identifier(table), c=sql.Identifier(column)),
                    {"shift": shift, "since": since, "until": until},
                )
        return until


def _now(conn: psycopg.Connection) -> datetime:
    row = conn.execute("SELECT now()").fetchone()
    assert row is not None
    return row[0]


def set_day(base: str, day: int) -> None:
    req = urllib.request.Request(
        f"{base}/_sandbox/day",
        data=json.dumps({"day": day}).encode(),
        method="POST",
        headers={"content-type": "application/json"},
    )
    urllib.request.urlopen(req, timeout=10).read()


class Month:
    """The chain and the month's crawls, one after the other in one reactor."""

    def __init__(self, settings: Settings, args: argparse.Namespace):
        self.settings, self.args = settings, args
        self.state = args.state.upper()
        self.runner = AsyncCrawlerRunner(settings)
        self.url = database_url(settings)

    async def crawl(self, spider: str, note: str = "", feed: Path | None = None, **kwargs: str) -> None:
        shown = " ".join(f"-a {k}={v}" for k, v in kwargs.items()) + (f" -O {feed}" if feed else "")
        print(f"$ scrapy crawl {spider} {shown}".rstrip() + (f"   {note}" if note else ""), flush=True)
        crawler = self.runner.create_crawler(spider)
        # the last day's menus as a feed; no feed of the other crawls (`-s FEEDS={}`: module docstring)
        feeds = {str(feed): {"format": "json", "overwrite": True}} if feed else {}
        crawler.settings.set("FEEDS", feeds, priority="cmdline")
        await self.runner.crawl(crawler, **kwargs)
        stats = crawler.stats
        assert stats is not None
        for key in (FATAL_ERROR_STAT, UNITS_INCOMPLETE_STAT, FEED_ERROR_STAT):
            if stats.get_value(key):
                raise SystemExit(f"error: `scrapy crawl {spider} {shown}`: {key} {stats.get_value(key)}")

    async def run(self) -> None:
        days, state = self.args.days, self.state
        clock = Backdating(self.url, days)
        try:
            since = clock.start
            await self.crawl("store_discovery", state=state)
            await self.crawl("store_discovery", state=state, platform="jane")
            await self.crawl("entry_point_discovery", state=state)
            for day in range(1, days + 1):
                set_day(self.args.sandbox, day)
                spider = "product_discovery" if day == 1 else "product_resync"
                feed = self.args.output if day == days else None
                await self.crawl(spider, f"(day {day} of {days}: {clock.day_date(day)})", feed, state=state)
                since = await asyncio.to_thread(clock.close_day, day, since)
        finally:
            clock.close()
        await self.crawl("analytics_refresh", once="1")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--state", default="AZ")
    parser.add_argument("--sandbox", required=True, help="the sandbox's base URL (its control API)")
    parser.add_argument("--output", type=Path, required=True, help="the last day's feed")
    parser.add_argument("--days", type=int, default=month.DAYS)
    args = parser.parse_args(argv)
    settings = get_project_settings()
    settings.set("LOG_LEVEL", "WARNING", priority="cmdline")
    install_reactor(settings["TWISTED_REACTOR"])
    configure_logging(settings)
    from twisted.internet import reactor as installed  # noqa: PLC0415 - only once install_reactor has installed it

    reactor: Any = installed  # the module attribute is typed as the default reactor's module

    failures: list[BaseException] = []

    async def run() -> None:
        try:
            await Month(settings, args).run()
        except BaseException as exc:  # noqa: BLE001 - reported once the reactor has stopped
            failures.append(exc)
        finally:
            reactor.stop()

    started = time.monotonic()
    reactor.callWhenRunning(lambda: asyncio.ensure_future(run()))
    reactor.run()
    for exc in failures:
        if isinstance(exc, SystemExit):
            print(exc, file=sys.stderr)
            return 1
        raise exc
    print(f"(the month's crawls and refresh took {time.monotonic() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
