"""What the queue commands (enqueue, tasks, schedule) share: a database connection that fails
with one line, and bad task input turned into one line on stderr and a non-zero exit."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import psycopg

from cannaspider.command_base import CannaspiderCommand
from cannaspider.db import database_url
from cannaspider.db.connection import CONNECT_TIMEOUT_S
from cannaspider.db.errors import DatabaseSetupError, first_line, redact
from cannaspider.tasks.queue import Task
from cannaspider.tasks.roles import TaskInputError

T = TypeVar("T")


class TaskCommand(CannaspiderCommand):
    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        try:
            super().run(args, opts)
        except TaskInputError as exc:
            print(f"error: {exc}", file=sys.stderr)
            self.exitcode = 2

    def on_db(self, fn: Callable[[psycopg.AsyncConnection], Awaitable[T]]) -> T:
        """Run fn on a connection to the project's database."""
        result: T = asyncio.run(with_connection(database_url(self.settings), fn))
        return result


async def with_connection(url: str, fn: Callable[[psycopg.AsyncConnection], Awaitable[Any]]) -> Any:
    try:
        conn = await psycopg.AsyncConnection.connect(url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S)
    except psycopg.OperationalError as exc:
        raise DatabaseSetupError(f"cannot connect to PostgreSQL at {redact(url)}: {first_line(exc)}") from exc
    async with conn:
        try:
            return await fn(conn)
        except psycopg.errors.UndefinedFunction as exc:
            raise DatabaseSetupError(f"the task queue is not set up ({first_line(exc)}): run `scrapy migrate`") from exc


def describe(task: Task) -> str:
    target = (
        f"dispensary {task.dispensary_id}"
        if task.dispensary_id is not None
        else ", ".join(f"{k} {v}" for k, v in task.payload.items()) or "-"
    )
    return f"task {task.id} ({task.role}, {target}, priority {task.priority}, {task.status})"
