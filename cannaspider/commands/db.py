"""`scrapy db start|stop|status|url|partitions`: manage the embedded server and partitions."""

from __future__ import annotations

import argparse

from cannaspider.command_base import CannaspiderCommand
from cannaspider.db import connect, database_url, embedded
from cannaspider.db.connection import configured_url, embedded_pgdata
from cannaspider.db.errors import DatabaseSetupError, redact


class Command(CannaspiderCommand):
    def syntax(self) -> str:
        return "start|stop|status|url|partitions [--months N]"

    def short_desc(self) -> str:
        return "Start/stop the embedded PostgreSQL, print the database URL, create snapshot partitions"

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument("--months", type=int, default=3, help="partitions: months ahead to create")

    def execute(self, args: list[str], opts: argparse.Namespace) -> None:
        assert self.settings is not None  # set by scrapy.cmdline before run()
        action = args[0] if args else "status"
        pgdata = embedded_pgdata(self.settings.get("CANNASPIDER_DATA_DIR"))
        external = configured_url(self.settings)
        if action == "start":
            url = database_url(self.settings)
            print(f"running: {redact(url)}")
        elif action == "stop":
            if external:
                raise DatabaseSetupError("DATABASE_URL is set: that server is not ours to stop")
            print("stopped" if embedded.stop(pgdata) else f"no embedded server running in {pgdata}")
        elif action == "status":
            if external:
                print(f"external server: {redact(external)}")
            else:
                pid = embedded.running_pid(pgdata)
                print(f"embedded server in {pgdata}: " + (f"running (pid {pid})" if pid else "stopped"))
        elif action == "url":
            print(database_url(self.settings))
        elif action == "partitions":
            with connect(database_url(self.settings), autocommit=True) as conn:
                row = conn.execute("SELECT ensure_snapshot_partitions(current_date, %s)", (opts.months,)).fetchone()
            print(f"{row[0] if row else 0} partition(s) created")
        else:
            raise DatabaseSetupError(f"unknown action {action!r}: use start, stop, status, url or partitions")
