"""`scrapy migrate [--status]`: apply pending migrations, or list applied and pending ones."""

from __future__ import annotations

import argparse

from cannaspider.command_base import CannaspiderCommand
from cannaspider.db import database_url, migrations


class Command(CannaspiderCommand):
    def short_desc(self) -> str:
        return "Apply database migrations (migrations/NNN_name.sql) or show their status"

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument("--status", action="store_true", help="list applied and pending migrations")

    def execute(self, args: list[str], opts: argparse.Namespace) -> None:
        url = database_url(self.settings)
        folder = migrations.migrations_dir(self.settings)
        if opts.status:
            for st in migrations.status(url, folder):
                state = f"applied {st.applied_at:%Y-%m-%d %H:%M:%S}" if st.applied_at else "pending"
                changed = "  (file changed since it was applied)" if st.changed_since_applied else ""
                print(f"{st.migration.path.name:45} {state}{changed}")
            return
        done = migrations.apply(url, folder)
        print(f"{len(done)} migration(s) applied" if done else "schema is up to date")
