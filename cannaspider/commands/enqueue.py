"""`scrapy enqueue ROLE [--dispensary-id N | --state XX | --keyword-id N] [--priority P] [--platform dutchie]`:
an on-demand task. The target options are the fields of the roles' targets (tasks/roles.py), which
validate them."""

from __future__ import annotations

from argparse import ArgumentParser, Namespace
from typing import Any

from cannaspider.tasks import queue, roles
from cannaspider.tasks.cli import TaskCommand, describe


def _option(field: str) -> str:
    return "--" + field.replace("_", "-")


class Command(TaskCommand):
    def syntax(self) -> str:
        targets = " | ".join(
            f"{_option(f)} {'N' if i.annotation is int else 'XX'}" for f, i in roles.target_fields().items()
        )
        return f"ROLE [{targets}] [--priority P] [--platform NAME]"

    def short_desc(self) -> str:
        return "Queue an on-demand task (an identical queued task is reused)"

    def long_desc(self) -> str:
        return "Roles: " + ", ".join(f"{r.name} ({r.needs})" for r in roles.all_roles().values())

    def add_options(self, parser: ArgumentParser) -> None:
        super().add_options(parser)
        for field, info in roles.target_fields().items():
            # the value as typed; the role's target validates it
            parser.add_argument(_option(field), type=int if info.annotation is int else str, default=None)
        parser.add_argument("--priority", type=int, default=roles.ON_DEMAND_PRIORITY)
        parser.add_argument("--platform", default=roles.PLATFORMS[0], help=f"one of {', '.join(roles.PLATFORMS)}")

    def execute(self, args: list[str], opts: Namespace) -> None:
        if len(args) != 1:
            raise roles.TaskInputError(f"give one role ({', '.join(roles.names())})")
        role = roles.get(args[0])
        platform = roles.platform(opts.platform)
        target: dict[str, Any] = {field: getattr(opts, field) for field in roles.target_fields()}
        role.target(**target)  # fail early, before connecting
        done = self.on_db(
            lambda conn: queue.enqueue(conn, role.name, platform=platform, priority=opts.priority, **target)
        )
        print(("queued " if done.created else "already queued: ") + describe(done.task))
