"""The fleet's crawl jobs, every node's (crawl_jobs, migrations/044, written by each `scrapy crawl` at
its exit: cannaspider/db/crawl_jobs.py): which jobs failed, with their exit code and the reason
they printed, and each node's count of jobs and failures. Scrapyd's own listjobs.json shows a job
that exited 2 as finished like any other; this is where it is seen as failed.

GET /api/jobs?host=&spider=&status=&exit_code=&job=&since=&until=&limit=   newest first, with the
                                                                          nodes' summary
/dashboard/jobs (same filters)                                            the same as a page

A bad filter is a 422 with the reason (an unknown status, an exit code out of 0–255, a date that
is not ISO 8601).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from fastapi import APIRouter, Depends, Query, Request
from psycopg import AsyncConnection
from psycopg.rows import dict_row
from pydantic import BaseModel, Field

from cannaspider.analytics.events import EventQueryError, parse_since
from cannaspider.web.events import SINCE_SCHEMA, unprocessable
from cannaspider.web.models import NO_NUL

JobStatus = Literal["succeeded", "failed"]

# what each exit code of `scrapy crawl` means (cannaspider/commands/crawl.py)
EXIT_MEANINGS = {
    0: "did its work",
    1: "could not start (a bug: its traceback is in its log)",
    2: "bad arguments or no usable database",
    3: "a unit of work it took did not complete",
    4: "a feed file could not be written",
}
NODES_DAYS = 7  # a node that ran no job for this long drops off the summary (a node retired)


class JobOut(BaseModel):
    id: int
    job: str | None = Field(description="Scrapyd's job id (its `_job` argument); null: a crawl outside Scrapyd")
    spider: str
    host: str = Field(description="the node that ran it")
    pid: int
    arguments: dict[str, str] = Field(description="its spider arguments but _job, passwords masked")
    started_at: datetime | None = Field(description="null: the crawl never started (a bad argument)")
    finished_at: datetime
    exit_code: int = Field(description="0 did its work, 1 a bug, 2 arguments or database, 3 incomplete, 4 feed")
    status: JobStatus = Field(description="failed: any exit code but 0")
    meaning: str = Field(description="what its exit code means")
    finish_reason: str | None = Field(description="Scrapy's finish reason; null: the spider never opened")
    error: str | None = Field(description="the `error:` line it printed (also in its own log), without the prefix")
    log_file: str | None = Field(description="its log on that node (Scrapyd's job log)")


class NodeOut(BaseModel):
    host: str
    jobs: int = Field(description=f"jobs it ran in the last {NODES_DAYS} days")
    failed: int
    last_finished_at: datetime
    last_exit_code: int


class JobsOut(BaseModel):
    nodes: list[NodeOut] = Field(description=f"every node that ran a job in the last {NODES_DAYS} days, by name")
    jobs: list[JobOut] = Field(description="the jobs matching the filters, newest first")


JOBS = """
SELECT id, job, spider, host, pid, arguments, started_at, finished_at, exit_code, finish_reason, error, log_file
  FROM crawl_jobs
 WHERE (%(host)s::text IS NULL OR host = %(host)s)
   AND (%(spider)s::text IS NULL OR spider = %(spider)s)
   AND (%(job)s::text IS NULL OR job = %(job)s)
   AND (%(exit_code)s::int IS NULL OR exit_code = %(exit_code)s)
   AND (%(status)s::text IS NULL OR (exit_code = 0) = (%(status)s = 'succeeded'))
   AND (%(since)s::timestamptz IS NULL OR finished_at >= %(since)s)
   AND (%(until)s::timestamptz IS NULL OR finished_at < %(until)s)
 ORDER BY finished_at DESC, id DESC
 LIMIT %(limit)s
"""
NODES = """
SELECT DISTINCT ON (host) host, count(*) OVER w AS jobs, count(*) FILTER (WHERE exit_code <> 0) OVER w AS failed,
       finished_at AS last_finished_at, exit_code AS last_exit_code
  FROM crawl_jobs
 WHERE finished_at > now() - make_interval(days => %s)
WINDOW w AS (PARTITION BY host)
 ORDER BY host, finished_at DESC, id DESC
"""


async def jobs(conn: AsyncConnection, **filters: Any) -> list[dict[str, Any]]:
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(JOBS, filters)
        rows = await cur.fetchall()
    for row in rows:
        row["status"] = "succeeded" if row["exit_code"] == 0 else "failed"
        row["meaning"] = EXIT_MEANINGS.get(row["exit_code"], "unknown exit code")
    return rows


async def nodes(conn: AsyncConnection) -> list[dict[str, Any]]:
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(NODES, (NODES_DAYS,))
        return await cur.fetchall()


def _moment(description: str) -> Any:
    """A time filter as GET /api/events' `since` takes it, its schema saying so (web/events.py)."""
    return Query(None, max_length=40, description=description, json_schema_extra=SINCE_SCHEMA)


def _parsed(field: str, text: str | None) -> datetime | None:
    try:
        return parse_since(text) if text is not None else None
    except EventQueryError as exc:
        raise unprocessable(field, str(exc)) from None


def job_filters(
    host: str | None = Query(None, max_length=255, pattern=NO_NUL, description="the node's host name"),
    spider: str | None = Query(None, max_length=100, pattern=NO_NUL),
    status: JobStatus | None = Query(None, description="succeeded (exit code 0) or failed (any other)"),
    exit_code: int | None = Query(None, ge=0, le=255),
    job: str | None = Query(None, max_length=100, pattern=NO_NUL, description="a Scrapyd job id"),
    since: str | None = _moment("finished at or after: a date (UTC midnight) or an ISO 8601 time"),
    until: str | None = _moment("finished before: a date (UTC midnight) or an ISO 8601 time"),
    limit: int = Query(100, ge=1, le=1000),
) -> dict[str, Any]:
    """The filters of the API and of the page (a dependency: one declaration, one schema). Every
    rule is in the schema (a 422 by FastAPI's validation): `until` before `since` is no error, an
    empty window."""
    return {
        "since": _parsed("since", since),
        "until": _parsed("until", until),
        "host": host or None,
        "spider": spider or None,
        "status": status,
        "exit_code": exit_code,
        "job": job or None,
        "limit": limit,
    }


async def read(request: Request, filters: dict[str, Any]) -> dict[str, Any]:
    async with request.app.state.pool.connection() as conn:
        return {"nodes": await nodes(conn), "jobs": await jobs(conn, **filters)}


router = APIRouter(prefix="/api", tags=["dashboard"])


@router.get("/jobs", response_model=JobsOut)
async def list_jobs(request: Request, filters: dict[str, Any] = Depends(job_filters)) -> dict[str, Any]:
    return await read(request, filters)
