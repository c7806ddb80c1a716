"""`scrapy tasks [--role R] [--status S] [--limit N]`: the queue, newest first;
`scrapy tasks retry ID` / `scrapy tasks cancel ID`."""

from __future__ import annotations

import argparse

from cannaspider.tasks import queue, roles
from cannaspider.tasks.cli import TaskCommand, describe


class Command(TaskCommand):
    def syntax(self) -> str:
        return "[--role R] [--status S] [--limit N] | retry ID | cancel ID"

    def short_desc(self) -> str:
        return "List queued tasks, or retry/cancel one"

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument("--role", default=None)
        parser.add_argument("--status", default=None)
        parser.add_argument("--dispensary-id", type=int, default=None)
        parser.add_argument("--limit", type=int, default=50)

    def execute(self, args: list[str], opts: argparse.Namespace) -> None:
        if args:
            self._act(args)
            return
        if not 1 <= opts.limit <= 10_000:
            raise roles.TaskInputError("--limit must be between 1 and 10000")
        page = self.on_db(
            lambda conn: queue.list_tasks(
                conn, role=opts.role, status=opts.status, dispensary_id=opts.dispensary_id, limit=opts.limit
            )
        )
        print(f"{'id':>8}  {'role':22} {'target':16} {'prio':>4}  {'status':9} {'att':>5}  {'updated':19}  error")
        for t in page.tasks:
            target = str(t.dispensary_id) if t.dispensary_id is not None else (t.state or t.keyword_id or "-")
            print(
                f"{t.id:>8}  {t.role:22} {str(target):16} {t.priority:>4}  {t.status:9} "
                f"{t.attempts:>2}/{t.max_attempts:<2}  {t.updated_at:%Y-%m-%d %H:%M:%S}  {t.error or ''}"
            )
        if page.next_before_id is not None:
            print("(more: older tasks not shown; raise --limit)")

    def _act(self, args: list[str]) -> None:
        if len(args) != 2 or args[0] not in ("retry", "cancel"):
            raise roles.TaskInputError("usage: scrapy tasks [--role R --status S] | retry ID | cancel ID")
        try:
            task_id = int(args[1])
        except ValueError:
            raise roles.TaskInputError(f"task id must be an integer, got {args[1]!r}") from None
        action = queue.retry if args[0] == "retry" else queue.cancel
        task = self.on_db(lambda conn: action(conn, task_id))
        print(("retrying " if args[0] == "retry" else "cancelled ") + describe(task))
