"""Starting draining jobs on Scrapyd nodes (`scrapy schedule --scrapyd URL[,URL…]`).

Every node runs the deployed egg; the queue in PostgreSQL coordinates them. For each role with
claimable tasks, a draining job (`schedule.json`, the role's spider, no target) is started on as
many nodes as the pending work needs (one job drains TASK_SLOTS stores at once: the job is given the
schedule's own TASK_SLOTS, so the count of jobs and what each takes agree), skipping nodes
that already have a job of that spider pending or running (`listjobs.json`), so a busy node does
not pile up jobs. A job without `follow` ends when the queue is empty; the next tick starts
another when work comes back. Nodes are reached over their HTTP API with basic auth from
SCRAPYD_USERNAME / SCRAPYD_PASSWORD (env.scrapyd_credentials), which never appear in a log line.
"""

from __future__ import annotations

import asyncio
import base64
import json
import math
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg

from cannaspider.db.errors import first_line
from cannaspider.tasks import roles

PROJECT = "cannaspider"
TIMEOUT_S = 15.0
# schedule.json lists the project's spiders first: on a node that has not yet done so for this
# egg version, Scrapyd runs `scrapy list` in a subprocess (the whole project imported), which took
# over 15 s on a loaded 2-core machine
SCHEDULE_TIMEOUT_S = 90.0

PENDING = """
SELECT role, count(*) FROM worker_tasks
 WHERE status = 'pending' AND run_after <= now() AND role = ANY(%s)
 GROUP BY role
"""


class ScrapydError(RuntimeError):
    """A node could not be reached or refused a call. str() is one line without credentials."""


@dataclass(frozen=True)
class ScrapydNode:
    url: str
    username: str | None = None
    password: str | None = field(default=None, repr=False)

    def _call(self, path: str, data: dict[str, Any] | None = None, timeout: float = TIMEOUT_S) -> dict[str, Any]:
        headers = {}
        if self.username is not None:
            token = base64.b64encode(f"{self.username}:{self.password or ''}".encode()).decode()
            headers["Authorization"] = f"Basic {token}"
        body = urllib.parse.urlencode(data).encode() if data is not None else None
        request = urllib.request.Request(self.url.rstrip("/") + "/" + path, data=body, headers=headers)  # noqa: S310 - the operator's Scrapyd URL
        try:
            with urllib.request.urlopen(request, timeout=timeout) as resp:  # noqa: S310 - the operator's Scrapyd URL
                answer: dict[str, Any] = json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            raise ScrapydError(f"{self.node_label}: {path} answered HTTP {exc.code}") from None
        except (OSError, ValueError) as exc:
            raise ScrapydError(f"{self.node_label}: {path} failed: {first_line(exc)}") from None
        if answer.get("status") != "ok":
            message = " ".join(str(answer.get("message", answer)).split())[:300]
            raise ScrapydError(f"{self.node_label}: {path}: {message}")
        return answer

    @property
    def node_label(self) -> str:
        parts = urllib.parse.urlsplit(self.url)
        host = parts.hostname or "?"
        return f"{parts.scheme}://{host}" + (f":{parts.port}" if parts.port else "")

    def busy_spiders(self, project: str = PROJECT) -> set[str]:
        """Spiders with a job pending or running on this node."""
        jobs = self._call(f"listjobs.json?project={urllib.parse.quote(project)}")
        return {job["spider"] for key in ("pending", "running") for job in jobs.get(key, [])}

    def schedule(self, spider: str, project: str = PROJECT, **args: str) -> str:
        data = {"project": project, "spider": spider, **args}
        return str(self._call("schedule.json", data, timeout=SCHEDULE_TIMEOUT_S)["jobid"])


def parse_nodes(value: str, username: str | None, password: str | None) -> list[ScrapydNode]:
    urls = [u.strip() for u in value.split(",") if u.strip()]
    if not urls:
        raise roles.TaskInputError("--scrapyd needs one or more node URLs (http://host:6800)")
    nodes = []
    for url in urls:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise roles.TaskInputError(f"--scrapyd: not an http(s) URL: {parts.scheme}://{parts.hostname or ''}")
        if parts.username or parts.password:
            raise roles.TaskInputError("--scrapyd: put credentials in SCRAPYD_USERNAME/SCRAPYD_PASSWORD, not the URL")
        nodes.append(ScrapydNode(url, username, password))
    return nodes


@dataclass(frozen=True)
class Dispatch:
    started: list[tuple[str, str, str]]  # (node, spider, job id)
    busy: list[tuple[str, str]]  # (node, spider) skipped: a job of that spider is already there
    errors: list[str]


async def dispatch(
    conn: psycopg.AsyncConnection,
    nodes: Sequence[ScrapydNode],
    spiders: Iterable[str],
    slots: int,
    project: str = PROJECT,
) -> Dispatch:
    """Start draining jobs where pending work needs them (see the module docstring)."""
    drainable = [name for name in roles.names() if name in set(spiders)]
    pending: dict[str, int] = dict(await (await conn.execute(PENDING, (drainable,))).fetchall())
    started: list[tuple[str, str, str]] = []
    busy: list[tuple[str, str]] = []
    errors: list[str] = []
    if not pending:
        return Dispatch(started, busy, errors)
    states: dict[ScrapydNode, set[str]] = {}
    for node in nodes:
        try:
            states[node] = await asyncio.to_thread(node.busy_spiders, project)
        except ScrapydError as exc:
            errors.append(str(exc))
    for role, count in sorted(pending.items()):
        spider = roles.get(role).name
        running = [node for node, spiders_there in states.items() if spider in spiders_there]
        busy += [(node.node_label, spider) for node in running]
        wanted = math.ceil(count / max(slots, 1)) - len(running)
        for node in [n for n in states if n not in running][: max(wanted, 0)]:
            try:
                job = await asyncio.to_thread(node.schedule, spider, project, setting=f"TASK_SLOTS={slots}")
            except ScrapydError as exc:
                errors.append(str(exc))
                continue
            started.append((node.node_label, spider, job))
    return Dispatch(started, busy, errors)
