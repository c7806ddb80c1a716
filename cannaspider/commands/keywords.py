"""`scrapy keywords import FILE.json | list`: load SERP snapshots and our pages (docs/onpage.md),
list keywords."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from cannaspider.command_base import CannaspiderCommand
from cannaspider.db import connect, database_url


class Command(CannaspiderCommand):
    def syntax(self) -> str:
        return "import FILE.json | list"

    def short_desc(self) -> str:
        return "Import keywords with their SERP competitors (JSON file), or list the keywords"

    def execute(self, args: list[str], opts: argparse.Namespace) -> None:
        action = args[0] if args else ""
        if action == "import" and len(args) == 2:
            self._import(Path(args[1]))
        elif action == "list" and len(args) == 1:
            self._list()
        else:
            self._fail("usage: scrapy keywords import FILE.json | scrapy keywords list")

    def _fail(self, message: str) -> None:
        print(f"error: {message}", file=sys.stderr)
        self.exitcode = 2

    def _import(self, path: Path) -> None:
        # the file's checks import the on-page classifier's statuses (trafilatura, extruct): for an import only
        from cannaspider.firecrawl import keywords_file  # noqa: PLC0415 - a command's start-up time

        try:
            snapshots = keywords_file.load(path)
        except keywords_file.KeywordsFileError as exc:
            self._fail(str(exc))
            return
        with connect(database_url(self.settings)) as conn:
            report = keywords_file.import_snapshots(conn, snapshots)
        print(
            f"{report.snapshots} snapshot(s) read: {report.keywords_created} new keyword(s), "
            f"{report.snapshots_changed} snapshot(s) written, "
            f"{report.snapshots - report.snapshots_changed} unchanged"
            + (f"; {report.own_pages_changed} own page(s) set or removed" if report.own_pages_changed else "")
        )

    def _list(self) -> None:
        with connect(database_url(self.settings)) as conn:
            rows = conn.execute(
                "SELECT k.id, k.keyword, l.key, jsonb_array_length(l.value -> 'competitors'), "
                "(SELECT string_agg(s.status || ' ' || s.n, ', ' ORDER BY s.status) FROM ("
                "   SELECT coalesce(c ->> 'crawlStatus', 'not crawled') AS status, count(*) AS n "
                "     FROM jsonb_array_elements(l.value -> 'competitors') c GROUP BY 1) s), "
                "w.url, coalesce(w.crawl ->> 'crawlStatus', 'not crawled') "
                "FROM keywords k LEFT JOIN LATERAL jsonb_each(k.serp) l ON "
                "jsonb_typeof(l.value -> 'competitors') = 'array' "
                "LEFT JOIN keyword_own_pages w ON w.keyword_id = k.id AND w.locale = l.key ORDER BY k.id, l.key"
            ).fetchall()
        for keyword_id, keyword, locale, count, statuses, own_url, own_status in rows:
            where = f"{locale}: {count} competitor(s), {statuses or 'none'}" if locale else "no SERP"
            if own_url:
                where += f"; our page {own_url} ({own_status})"
            print(f"{keyword_id:>6}  {keyword}  [{where}]")
