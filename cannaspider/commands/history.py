"""`scrapy history archive|restore|status`: the snapshot history's two tiers (docs/history.md).

    scrapy history archive [--month YYYY-MM] [--unrolled]   months older than HISTORY_ARCHIVE_AFTER_MONTHS
                                                            (or the one given) to HISTORY_ARCHIVE_STORE
    scrapy history restore --month YYYY-MM                  an archived month back into PostgreSQL
    scrapy history status                                   each month: where it is, rows, bytes

A month that cannot be moved (not rolled into the analytics yet, its file differing, the table
busy) is one `error:` line and exit code 2, and the database is as it was; a rerun finishes what a
killed one began.

The archive (cannaspider/history/archive.py) loads DuckDB and pyarrow: this command imports it as
it runs, not with this module (Scrapy imports every command module on each start of `scrapy`).
"""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, date, datetime

from cannaspider.command_base import CannaspiderCommand
from cannaspider.db import connect, database_url


def _figure(nbytes: int, rows: int) -> str:
    return f"{nbytes / rows:.2f} B/snapshot" if rows else "-"


class Command(CannaspiderCommand):
    def syntax(self) -> str:
        return "archive [--month YYYY-MM] [--unrolled] | restore --month YYYY-MM | status"

    def short_desc(self) -> str:
        return "Move months of snapshots to Parquet in HISTORY_ARCHIVE_STORE and back, or list them"

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument("--month", help="the month, YYYY-MM (UTC)")
        parser.add_argument(
            "--unrolled", action="store_true", help="archive: also a month the analytics have not rolled through"
        )

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        from cannaspider.analytics.exports import ExportError  # noqa: PLC0415 - a command's start-up time (pyarrow)
        from cannaspider.history import archive  # noqa: PLC0415 - a command's start-up time (DuckDB, pyarrow)

        try:
            super().run(args, opts)
        except (archive.ArchiveError, ExportError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            self.exitcode = 2

    def execute(self, args: list[str], opts: argparse.Namespace) -> None:
        from cannaspider.analytics.exports import parse_month  # noqa: PLC0415 - as run()'s
        from cannaspider.history import archive  # noqa: PLC0415 - as run()'s

        assert self.settings is not None  # set by scrapy.cmdline before run()
        action = args[0] if len(args) == 1 else None
        url = database_url(self.settings)
        month = parse_month(opts.month)[0] if opts.month else None
        if action == "archive":
            folder = archive.store_folder(self.settings.get("HISTORY_ARCHIVE_STORE"))
            if month is None:
                with connect(url, autocommit=True) as conn:
                    after = self.settings.getint("HISTORY_ARCHIVE_AFTER_MONTHS")
                    months = archive.due(conn, after, datetime.now(UTC).date())
            else:
                months = [month]
            if not months:
                print("nothing to archive")
            for m in months:
                moved = archive.archive_month(url, m, folder, require_rolled=not opts.unrolled)
                if moved is None:
                    print(f"{m:%Y-%m}: archived already")
                else:
                    print(
                        f"{m:%Y-%m}: {moved.rows} snapshots archived to {moved.path} "
                        f"({_figure(moved.bytes, moved.rows)}; {_figure(moved.pg_bytes, moved.rows)} in PostgreSQL)"
                    )
        elif action == "restore":
            if month is None:
                raise archive.ArchiveError("restore which month? --month YYYY-MM")
            rows = archive.restore_month(url, month)
            print(f"{month:%Y-%m}: {rows} snapshots restored to {archive.partition_name(month)}")
        elif action == "status":
            self._status(url)
        else:
            raise archive.ArchiveError("history what? `scrapy history archive`, `restore --month M` or `status`")

    def _status(self, url: str) -> None:
        from cannaspider.history import archive  # noqa: PLC0415 - as run()'s

        with connect(url, autocommit=True) as conn:
            listed = archive.archived(conn)
            hot: dict[date, tuple[int, int]] = {}
            for m in archive.partitions(conn):
                name = archive.partition_name(m)
                row = conn.execute(
                    "SELECT c.reltuples::bigint, pg_total_relation_size(c.oid) FROM pg_class c "
                    "WHERE c.oid = %s::regclass",
                    (name,),
                ).fetchone()
                hot[m] = (max(int(row[0]), 0), int(row[1])) if row else (0, 0)
        for m in sorted(set(hot) | set(listed)):
            if m in listed:
                entry = listed[m]
                print(
                    f"{m:%Y-%m}  cold  {entry['rows']} snapshots  {entry['bytes']} B "
                    f"({_figure(entry['bytes'], entry['rows'])})  {entry['store']}/{entry['file']}"
                )
            if m in hot:
                rows, nbytes = hot[m]
                print(f"{m:%Y-%m}  hot   ~{rows} snapshots  {nbytes} B ({_figure(nbytes, rows)})")
