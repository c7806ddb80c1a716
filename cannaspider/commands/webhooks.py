"""`scrapy webhooks add | list | remove ID | send [--follow]`: event webhooks, subscriptions to product events and
availability changes, delivered as signed webhooks (docs/analytics.md, "Alerts").

    scrapy webhooks add --type price_changed --min-drop 15 --brand "Stiiizy" --webhook URL
    scrapy webhooks add --type out_of_stock --type back_in_stock --state AZ --webhook URL
    scrapy webhooks add --type availability_changed --min-change 0.1 --state AZ --webhook URL
    scrapy webhooks send            # one pass: match new events, post what is due
    scrapy webhooks send --follow   # a pass every ALERTS_TICK_S, until interrupted
"""

from __future__ import annotations

import asyncio
import signal
import sys
from typing import Any

import psycopg

from cannaspider.command_base import CannaspiderCommand
from cannaspider.db import connect, database_url
from cannaspider.webhooks import subscriptions


class Command(CannaspiderCommand):
    def syntax(self) -> str:
        return "add --type T [--type T …] --webhook URL [filters] | list | remove ID | send [--follow]"

    def short_desc(self) -> str:
        return "Event webhooks: product events and brand availability changes, signed"

    def add_options(self, parser: Any) -> None:
        super().add_options(parser)
        parser.add_argument("--webhook", help="add: the URL to POST to (a secret: never printed in full)")
        parser.add_argument("--type", action="append", default=[], help=f"add: {', '.join(subscriptions.TYPES)}")
        parser.add_argument("--state", help="add: only stores of this state")
        parser.add_argument("--dispensary-id", type=int, help="add: only this store")
        parser.add_argument("--brand", help="add: only this brand (any spelling of it)")
        parser.add_argument("--min-drop", type=float, help="add: price_changed drops of at least this percent")
        parser.add_argument("--min-change", type=float, help="add: availability changes of at least this share")
        parser.add_argument("--follow", action="store_true", help="send: repeat every ALERTS_TICK_S")

    def _fail(self, message: str) -> None:
        print(f"error: {message}", file=sys.stderr)
        self.exitcode = 2

    def execute(self, args: list[str], opts: Any) -> None:
        action = args[0] if args else ""
        if action == "add" and len(args) == 1:
            self._add(opts)
        elif action == "list" and len(args) == 1:
            with connect(database_url(self.settings)) as conn:
                for sub in subscriptions.list_all(conn):
                    print(sub.describe())
        elif action == "remove" and len(args) == 2 and args[1].isdigit():
            with connect(database_url(self.settings)) as conn:
                if not subscriptions.remove(conn, int(args[1])):
                    self._fail(f"no subscription {args[1]}")
        elif action == "send" and len(args) == 1:
            asyncio.run(self._send(follow=opts.follow))
        else:
            self._fail("usage: scrapy webhooks " + self.syntax())

    def _add(self, opts: Any) -> None:
        if not opts.webhook:
            self._fail("add needs --webhook URL")
            return
        assert self.settings is not None  # Scrapy sets a command's settings before it runs
        with connect(database_url(self.settings)) as conn:
            try:
                new_id = subscriptions.add(
                    conn,
                    opts.webhook,
                    opts.type,
                    state=opts.state,
                    dispensary_id=opts.dispensary_id,
                    brand=opts.brand,
                    min_drop_pct=opts.min_drop,
                    min_change=opts.min_change,
                    allow_private=self.settings.getbool("WEBHOOK_ALLOW_PRIVATE"),
                )
            except subscriptions.SubscriptionError as exc:
                self._fail(str(exc))
                return
        print(f"subscription {new_id}: {', '.join(opts.type)} → {subscriptions.redacted(opts.webhook)}")

    async def _send(self, *, follow: bool) -> None:
        # delivery posts with aiohttp: loaded by `scrapy webhooks send` only
        from cannaspider.webhooks.delivery import follow as follow_deliveries  # noqa: PLC0415 - a command's start-up time
        from cannaspider.webhooks.delivery import run_once  # noqa: PLC0415 - a command's start-up time

        settings = self.settings
        assert settings is not None  # Scrapy sets a command's settings before it runs
        url = database_url(settings)
        if not follow:
            async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
                print((await run_once(conn, settings)).describe(), flush=True)
            return
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await follow_deliveries(
            url, settings, stop, lambda done: print(done if isinstance(done, str) else done.describe(), flush=True)
        )
