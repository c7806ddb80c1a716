"""Spiders that drain their role's queue when run without a target (docs/operations.md, "Draining
spiders"): `scrapy crawl product_resync` claims tasks in batches through TaskDrain, crawls each
task's target beside the others, and completes or fails each task when its own crawl is over.

Product crawls end with a CrawlCompletion item: the completion pipeline completes the task in
the transaction that applies misses/OOS (pipelines/crawl_completion.py). The discovery spiders
have no such item, so `TaskTracking` follows each task's work instead: the requests in flight
for it and the items still in the pipelines. When both reach zero the task's crawl is over and
the spider decides its outcome (`task_outcome`).
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import scrapy
from scrapy import signals
from scrapy.crawler import Crawler

from cannaspider.db.connection import database_url
from cannaspider.db.errors import first_line
from cannaspider.middlewares.unit_errors import describe
from cannaspider.tasks.drain import TaskDrain
from cannaspider.tasks.queue import LeaseLost, Task, TaskResult

logger = logging.getLogger(__name__)

TASK_META = "cannaspider_task_id"  # request meta: the id of the task a request works for


async def open_drain(spider: scrapy.Spider, role: str, follow: bool) -> TaskDrain:
    """The crawler's TaskDrain for `role` (released when the spider closes)."""
    crawler = spider.crawler
    assert crawler is not None
    url = await asyncio.to_thread(database_url, crawler.settings)
    drain = TaskDrain.from_crawler(crawler, role, url, follow=follow)
    spider.logger.info(
        "draining the %s queue (%d at once%s)", role, drain.config.slots, ", until stopped" if follow else ""
    )
    return drain


async def refuse_queue(spider: scrapy.Spider, role: str, reason: str) -> None:
    """A spider that cannot work (no Firecrawl configured) fails one batch of its queue with
    `reason` (retried after the backoff, the attempts counted) instead of leaving it silent."""
    try:
        drain = await open_drain(spider, role, follow=False)
        failed = await drain.fail_claimable(reason)
    except Exception as exc:  # noqa: BLE001 - the refusal itself must still happen
        spider.logger.warning("could not fail the queued %s tasks: %s", role, first_line(exc))
    else:
        spider.logger.info("%d queued %s task(s) failed: %s", failed, role, reason)


def log_drained(spider: scrapy.Spider, drain: TaskDrain) -> None:
    spider.logger.info(
        "%s queue: %d task(s) claimed, %d completed, %d failed",
        drain.role,
        drain.claimed,
        drain.completed,
        drain.failed,
    )


async def finish_task(
    drain: TaskDrain, task: Task, outcome: TaskResult | str, *, final: bool = False, run_id: int | None = None
) -> None:
    """Complete (a TaskResult) or fail (an error) a held task; a lost lease is logged, not raised."""
    try:
        if isinstance(outcome, TaskResult):
            await drain.complete(task, outcome)
        else:
            await drain.fail(task, outcome, run_id, final=final)
    except LeaseLost as exc:
        logger.warning("task %s (%s): %s: its outcome is not recorded", task.id, task.role, exc)
    except Exception as exc:  # noqa: BLE001 - the database is gone: the lease expires and the task runs again
        logger.error("task %s (%s): could not record its outcome: %s", task.id, task.role, first_line(exc))


@dataclass
class TaskWork:
    """What one task's crawl still has in flight, and what the spider learned from it."""

    task: Task
    requests: int = 0  # scheduled, not yet through their callback or errback
    items: int = 0  # yielded, not yet through the item pipelines
    errors: list[str] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)
    finished: bool = False


def task_callback(method: Callable) -> Callable:
    """Wrap a callback or errback so that its output counts for the task its request works for.
    Outside a drained task (explicit targets, `scrapy check`) it is the method as it is."""

    @functools.wraps(method)
    def wrapper(self: TaskTracking, arg: Any) -> Any:
        request = getattr(arg, "request", None)
        task_id = request.meta.get(TASK_META) if request is not None else None
        work = self.task_work.get(task_id) if task_id is not None else None
        if work is None:
            return method(self, arg)
        # called inside track_output: an exception, even before the first output, ends the request
        return self.track_output(work, lambda: method(self, arg), from_request=True, source=method.__name__)

    return wrapper


class TaskTracking:
    """Mixin for a spider whose task's crawl has no completion item (see the module docstring)."""

    crawler: Crawler
    drain: TaskDrain | None = None

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.task_work: dict[int, TaskWork] = {}
        self._item_task: dict[int, int] = {}  # id(item) → task id, while the item is in the pipelines
        self._finishing: set[asyncio.Future] = set()

    def start_tracking(self) -> None:
        for handler, signal in (
            (self._item_done, signals.item_scraped),
            (self._item_done, signals.item_dropped),
            (self._item_failed, signals.item_error),
        ):
            self.crawler.signals.connect(handler, signal=signal)

    def begin_task(self, task: Task) -> TaskWork:
        work = self.task_work[task.id] = TaskWork(task)
        return work

    def track_output(
        self,
        work: TaskWork,
        output: Iterable | Callable[[], Iterable | None] | None,
        *,
        from_request: bool = False,
        source: str = "start",
    ):
        """Count every request and item of `output` (or of what calling it returns) for `work`;
        with from_request, the request whose callback produced it is done once the output is
        exhausted. An exception is the task's error (it fails, the attempt counted) and goes on
        to the caller (middlewares/unit_errors.py logs it)."""
        try:
            for out in (output() if callable(output) else output) or ():
                if isinstance(out, scrapy.Request):
                    out.meta[TASK_META] = work.task.id
                    work.requests += 1
                else:
                    work.items += 1
                    self._item_task[id(out)] = work.task.id
                yield out
        except Exception as exc:
            work.errors.append(f"{source} raised {describe(exc)}")
            raise
        finally:
            if from_request:
                work.requests -= 1
            self.check_finished(work)

    def _item_done(self, item: Any, **_: Any) -> None:
        self._settle(item, None)

    def _item_failed(self, item: Any, failure: Any, **_: Any) -> None:
        self._settle(item, f"storing an item failed: {failure.getErrorMessage()}")

    def _settle(self, item: Any, error: str | None) -> None:
        task_id = self._item_task.pop(id(item), None)
        work = self.task_work.get(task_id) if task_id is not None else None
        if work is None:
            return
        work.items -= 1
        if error:
            work.errors.append(error)
        else:
            self.task_item(work, item)
        self.check_finished(work)

    def check_finished(self, work: TaskWork) -> None:
        if work.finished or work.requests > 0 or work.items > 0:
            return
        work.finished = True
        self.task_work.pop(work.task.id, None)
        job = asyncio.ensure_future(self._finish(work))
        self._finishing.add(job)
        job.add_done_callback(self._finishing.discard)

    async def _finish(self, work: TaskWork) -> None:
        assert self.drain is not None
        try:
            outcome, final = await self.task_outcome(work)
        except Exception as exc:  # noqa: BLE001 - e.g. the database is gone: the attempt failed
            outcome, final = f"{type(exc).__name__}: {first_line(exc)}", False
        await finish_task(self.drain, work.task, outcome, final=final)

    def track_start(self, work: TaskWork, output: Iterable | Callable[[], Iterable | None]):
        """track_output for what start() yields for a task: an exception fails that task and
        the drain goes on with the next one."""
        try:
            yield from self.track_output(work, output)
        except Exception:
            logger.exception("task %s (%s): starting its crawl failed", work.task.id, work.task.role)

    def unit_failed(self, response: Any, reason: str) -> list | None:
        """A callback raised (middlewares/unit_errors.py): track_output has recorded it on the
        task; outside a drained task there is no unit to close (Scrapy logs it)."""
        return [] if response.meta.get(TASK_META) is not None else None

    # -- what each spider says ---------------------------------------------------------------------
    def task_item(self, work: TaskWork, item: Any) -> None:
        """An item of the task went through the pipelines (they may have set fields on it)."""

    async def task_outcome(self, work: TaskWork) -> tuple[TaskResult | str, bool]:
        """The task's result, or the error that fails it (and whether retrying cannot help)."""
        if work.errors:
            return work.errors[0], False
        return TaskResult(), False

    async def drained_tasks(self, role: str, follow: bool) -> AsyncIterator[Task]:
        self.start_tracking()
        self.drain = await open_drain(self, role, follow)  # type: ignore[arg-type]
        async for task in self.drain.tasks():
            yield task
        log_drained(self, self.drain)  # type: ignore[arg-type]
