"""The ledger of crawl processes (migrations/044): one row of crawl_jobs per `scrapy crawl`, written
at its exit by the crawl command (cannaspider/commands/crawl.py) with the exit code and the reason it
printed, so that a Scrapyd job that exited 2 is seen as failed, and why, from any node's dashboard
(GET /api/jobs, /dashboard/jobs) — Scrapyd's listjobs.json shows every job as finished alike.

The Scrapyd job id is the crawl's `_job` spider argument (Scrapyd 1.5 passes `-a _job=<id>`; it sets
no SCRAPY_JOB environment variable). A crawl outside Scrapyd (cron, a shell) is recorded too, its
job NULL.

The row is written after the crawl, with a connection of its own (the crawl's pool is closed by
then). It never changes the crawl's outcome: a database that cannot take it (away, not migrated to
044) loses only this row, said in one WARNING line. Without DATABASE_URL the embedded server is
used only when it is already running: a crawl that failed before its database opened (a bad
argument) does not start a server to say so.
"""

from __future__ import annotations

import json
import logging
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
from scrapy.settings import BaseSettings

from cannaspider import env
from cannaspider.db import embedded
from cannaspider.db.connection import configured_url, connect, embedded_pgdata
from cannaspider.db.errors import DatabaseSetupError, first_line, redact

logger = logging.getLogger(__name__)

JOB_ARGUMENT = "_job"  # the spider argument Scrapyd names its job with

INSERT = """
INSERT INTO crawl_jobs (job, spider, host, pid, arguments, started_at, finished_at, exit_code, finish_reason,
                        error, log_file)
VALUES (%(job)s, %(spider)s, %(host)s, %(pid)s, %(arguments)s, %(started_at)s, now(), %(exit_code)s,
        %(finish_reason)s, %(error)s, %(log_file)s)
"""


@dataclass(frozen=True)
class CrawlJob:
    """What the crawl command knows of its crawl when it exits."""

    spider: str
    arguments: Mapping[str, str]  # as given with -a, _job included
    exit_code: int
    error: str | None  # the `error:` line's text, None when it printed none
    started_at: datetime | None
    finish_reason: str | None
    log_file: str | None

    @property
    def job(self) -> str | None:
        return self.arguments.get(JOB_ARGUMENT) or None

    def row(self) -> dict[str, Any]:
        arguments = {key: redact(str(value)) for key, value in self.arguments.items() if key != JOB_ARGUMENT}
        return {
            "job": self.job,
            "spider": self.spider,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "arguments": json.dumps(arguments),
            "started_at": self.started_at,
            "exit_code": self.exit_code,
            "finish_reason": self.finish_reason,
            "error": redact(self.error) if self.error else None,
            "log_file": self.log_file,
        }


def _url(settings: BaseSettings) -> str | None:
    url = configured_url(settings)
    if url:
        return url
    pgdata = embedded_pgdata(env.configured(settings, "CANNASPIDER_DATA_DIR"))
    if embedded.running_pid(pgdata) is None:
        return None
    return embedded.ensure_running(pgdata)  # running: its URL, nothing started


def record(settings: BaseSettings, job: CrawlJob) -> bool:
    """The crawl as a row of crawl_jobs; False (one WARNING line, or nothing when there is no
    database to write to) when it could not be written."""
    try:
        url = _url(settings)
        if url is None:
            return False
        with connect(url, autocommit=True) as conn:
            conn.execute(INSERT, job.row())
    except (psycopg.Error, DatabaseSetupError, OSError) as exc:
        logger.warning("crawl jobs: this crawl's exit (code %d) was not recorded (%s)", job.exit_code, first_line(exc))
        return False
    return True
