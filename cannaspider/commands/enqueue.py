"""`scrapy enqueue ROLE [--dispensary-id N | --state XX | --keyword-id N] [--priority P] [--platform dutchie]`:
an on-demand task."""

from __future__ import annotations

from cannaspider.tasks import queue, roles
from cannaspider.tasks.cli import TaskCommand, describe


class Command(TaskCommand):
    def syntax(self) -> str:
        return "ROLE [--dispensary-id N | --state XX | --keyword-id N] [--priority P] [--platform NAME]"

    def short_desc(self) -> str:
        return "Queue an on-demand task (an identical queued task is reused)"

    def long_desc(self) -> str:
        return "Roles: " + ", ".join(f"{r.name} ({r.needs.value})" for r in roles.ROLES.values())

    def add_options(self, parser) -> None:
        super().add_options(parser)
        parser.add_argument("--dispensary-id", type=int, default=None)
        parser.add_argument("--state", default=None)
        parser.add_argument("--keyword-id", type=int, default=None)
        parser.add_argument("--priority", type=int, default=roles.ON_DEMAND_PRIORITY)
        parser.add_argument("--platform", default=roles.PLATFORMS[0], help=f"one of {', '.join(roles.PLATFORMS)}")

    def execute(self, args, opts) -> None:
        if len(args) != 1:
            raise roles.TaskInputError(f"give one role ({', '.join(roles.ROLE_NAMES)})")
        role = roles.get(args[0])
        platform = roles.platform(opts.platform)
        role.target(dispensary_id=opts.dispensary_id, state=opts.state, keyword_id=opts.keyword_id)  # fail early
        done = self.on_db(
            lambda conn: queue.enqueue(
                conn,
                role.name,
                platform=platform,
                dispensary_id=opts.dispensary_id,
                state=opts.state,
                keyword_id=opts.keyword_id,
                priority=opts.priority,
            )
        )
        print(("queued " if done.created else "already queued: ") + describe(done.task))
