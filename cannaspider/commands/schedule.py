"""`scrapy schedule [--once] [--scrapyd URL[,URL…]]`: apply the periodic schedule
(cannaspider/tasks/schedule.py) every SCHEDULE_TICK_S seconds until SIGTERM/SIGINT, or once. Safe
to run on several machines at once. With --scrapyd, each tick also starts draining jobs on those
Scrapyd nodes for the roles that have pending work (cannaspider/tasks/scrapyd.py). Each tick
also re-probes the proxies that their failures deactivated, when due (cannaspider/stealth/probe.py).

Alerts (SCHEDULE_ALERTS): beside the ticks, a task of its own matches new events and posts the
due webhooks every ALERTS_TICK_S (cannaspider/webhooks/delivery.py `follow`), each pass bounded, on its
own connection: a webhook that hangs or fails delays neither a tick nor a crawl, and its deliveries
wait, retried with backoff. --once makes one alerts pass after the tick."""

from __future__ import annotations

import argparse
import asyncio
import signal
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import psycopg

from cannaspider import env
from cannaspider.db import database_url
from cannaspider.db.errors import first_line
from cannaspider.tasks import roles, schedule, scrapyd
from cannaspider.tasks.cli import TaskCommand, with_connection

if TYPE_CHECKING:
    from cannaspider.webhooks import delivery


class Command(TaskCommand):
    def syntax(self) -> str:
        return "[--once] [--scrapyd URL[,URL…]]"

    def short_desc(self) -> str:
        return "Create the scheduled tasks (resync every 4 h, store discovery and analytics daily)"

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument("--once", action="store_true", help="apply the schedule once and exit")
        parser.add_argument(
            "--scrapyd",
            metavar="URL[,URL…]",
            default=None,
            help="Scrapyd nodes to start draining jobs on (auth: SCRAPYD_USERNAME/SCRAPYD_PASSWORD)",
        )

    def execute(self, args: list[str], opts: argparse.Namespace) -> None:
        # the prober's TLS impersonation (curl_cffi, Scrapy's HTTP/1.1 handler) loads for this command only
        from cannaspider.stealth.probe import Prober  # noqa: PLC0415 - a command's start-up time

        settings = self.settings
        assert settings is not None  # set by Scrapy before run()
        config = schedule.ScheduleConfig.from_settings(settings)
        self.nodes = scrapyd.parse_nodes(opts.scrapyd, *env.scrapyd_credentials()) if opts.scrapyd else []
        # a role's spider has its name (tests/tasks/test_roles.py): the table, not a SpiderLoader, says which
        self.spiders = list(roles.names()) if self.nodes else []
        self.slots = settings.getint("TASK_SLOTS")
        self.prober = Prober(settings)  # deactivated proxies re-probed after each tick (stealth/probe.py)
        self.alerts = settings.getbool("SCHEDULE_ALERTS")
        url = database_url(settings)
        if opts.once:
            self._print(asyncio.run(with_connection(url, self._tick(config))))
            if self.alerts:
                asyncio.run(self._alerts_once(url))
            return
        asyncio.run(self._loop(url, config, settings.getfloat("SCHEDULE_TICK_S")))

    def _tick(
        self, config: schedule.ScheduleConfig
    ) -> Callable[[psycopg.AsyncConnection], Awaitable[schedule.TickReport]]:
        async def run(conn: psycopg.AsyncConnection) -> schedule.TickReport:
            report = await schedule.tick(conn, config)
            if self.nodes:
                self._print_dispatch(await scrapyd.dispatch(conn, self.nodes, self.spiders, self.slots))
            try:
                probes = await self.prober.reprobe_due(conn)
            except psycopg.Error as exc:  # the tick itself is done: say so, probe again next tick
                print(f"schedule: proxy re-probe failed: {first_line(exc)}", flush=True)
            else:
                for result in probes:
                    print(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {result.describe()}", flush=True)
            return report

        return run

    async def _loop(self, url: str, config: schedule.ScheduleConfig, every: float) -> None:
        from cannaspider.webhooks import delivery  # noqa: PLC0415 - a command's start-up time (aiohttp)

        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        print(f"schedule: every {every:g} s (stop with Ctrl-C)", flush=True)
        settings = self.settings
        assert settings is not None  # set by Scrapy before run()
        if self.alerts:
            delivery.WebhookSender.from_settings(settings)  # a bad ALERTS_FORMAT refused now, not in the task
        delivering = (
            asyncio.create_task(delivery.follow(url, settings, stop, self._print_alerts)) if self.alerts else None
        )
        try:
            await self._ticks(url, config, every, stop)
        finally:
            stop.set()
            if delivering is not None:
                await delivering  # a pass in flight ends within its bound

    async def _ticks(self, url: str, config: schedule.ScheduleConfig, every: float, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                report = await with_connection(url, self._tick(config))
                if report.total or report.requeued or report.partitions:
                    self._print(report)
            except Exception as exc:  # noqa: BLE001 - the database restarts: one line, try again next tick
                print(f"schedule: tick failed: {first_line(exc)}", flush=True)
            try:
                await asyncio.wait_for(stop.wait(), every)
            except TimeoutError:
                pass

    async def _alerts_once(self, url: str) -> None:
        from cannaspider.webhooks import delivery  # noqa: PLC0415 - a command's start-up time (aiohttp)

        stop = asyncio.Event()
        stop.set()  # follow() makes its first pass before it looks at stop: one pass
        settings = self.settings
        assert settings is not None  # set by Scrapy before run()
        await delivery.follow(url, settings, stop, self._print_alerts)

    @staticmethod
    def _print_alerts(done: delivery.WebhookPass | str) -> None:
        if isinstance(done, str) or done.matched or done.delivered or done.failed:  # quiet passes are not news
            print(
                f"{time.strftime('%Y-%m-%d %H:%M:%S')} {done if isinstance(done, str) else done.describe()}", flush=True
            )

    @staticmethod
    def _print_dispatch(done: scrapyd.Dispatch) -> None:
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        for node, spider, job in done.started:
            print(f"{stamp} scrapyd {node}: started {spider} (job {job})", flush=True)
        for node, spider in done.busy:
            print(f"{stamp} scrapyd {node}: {spider} already pending or running: none added", flush=True)
        for error in done.errors:
            print(f"{stamp} scrapyd {error}", flush=True)

    @staticmethod
    def _print(report: schedule.TickReport) -> None:
        created = ", ".join(f"{n} {role}" for role, n in report.created.items()) or "nothing"
        extra = f"; {report.requeued} expired lease(s) requeued" if report.requeued else ""
        extra += f"; {report.pruned} finished task(s) past the retention deleted" if report.pruned else ""
        extra += f"; {report.partitions} monthly partition(s) made" if report.partitions else ""
        print(f"{time.strftime('%Y-%m-%d %H:%M:%S')} created {created}{extra}", flush=True)
