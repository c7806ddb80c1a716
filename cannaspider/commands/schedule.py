"""`scrapy schedule [--once]`: apply the periodic schedule (cannaspider/tasks/schedule.py) every
SCHEDULE_TICK_S seconds until SIGTERM/SIGINT, or once. Safe to run on several machines at once."""

from __future__ import annotations

import asyncio
import signal
import time

from cannaspider.db import database_url
from cannaspider.db.errors import first_line
from cannaspider.tasks import schedule
from cannaspider.tasks.cli import TaskCommand, with_connection


class Command(TaskCommand):
    def syntax(self) -> str:
        return "[--once]"

    def short_desc(self) -> str:
        return "Create the scheduled tasks (resync every 4 h, store discovery and analytics daily)"

    def add_options(self, parser) -> None:
        super().add_options(parser)
        parser.add_argument("--once", action="store_true", help="apply the schedule once and exit")

    def execute(self, args, opts) -> None:
        settings = self.settings
        assert settings is not None  # set by Scrapy before run()
        config = schedule.ScheduleConfig.from_settings(settings)
        url = database_url(settings)
        if opts.once:
            self._print(asyncio.run(with_connection(url, lambda conn: schedule.tick(conn, config))))
            return
        asyncio.run(self._loop(url, config, settings.getfloat("SCHEDULE_TICK_S", 60.0)))

    async def _loop(self, url: str, config: schedule.ScheduleConfig, every: float) -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        print(f"schedule: every {every:g} s (stop with Ctrl-C)", flush=True)
        while not stop.is_set():
            try:
                report = await with_connection(url, lambda conn: schedule.tick(conn, config))
                if report.total or report.requeued:
                    self._print(report)
            except Exception as exc:  # noqa: BLE001 - the database restarts: one line, try again next tick
                print(f"schedule: tick failed: {first_line(exc)}", flush=True)
            try:
                await asyncio.wait_for(stop.wait(), every)
            except TimeoutError:
                pass

    @staticmethod
    def _print(report: schedule.TickReport) -> None:
        created = ", ".join(f"{n} {role}" for role, n in report.created.items()) or "nothing"
        extra = f"; {report.requeued} expired lease(s) requeued" if report.requeued else ""
        print(f"{time.strftime('%Y-%m-%d %H:%M:%S')} created {created}{extra}", flush=True)
