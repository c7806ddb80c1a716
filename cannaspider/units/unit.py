"""A unit of work and the words the lifecycle speaks of it (docs/architecture.md, "Unit
lifecycle"): the Unit itself, what a spider whose units are tracked says (UnitSpider), what a
node that cannot work waits for (Wait), an outcome, and the request meta keys."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from cannaspider.db.errors import first_line
from cannaspider.tasks.queue import Task, TaskResult

UNIT_META = "cannaspider_unit"  # request meta: the Unit a request works for
ERRBACK_META = "cannaspider_unit_errback"  # request meta: its errback ran (its output is counted there)
UNITS_CLOSED_STAT = "cannaspider/units_closed"

Outcome = tuple[TaskResult | str, bool]  # a result, or the error that fails the task (and if for good)
# what unit_outcome says: an Outcome, or None when the spider's close recorded the task's outcome
Closing = Outcome | None


def describe(exception: BaseException) -> str:
    """The one-line reason a unit fails with (secrets redacted, no traceback)."""
    return f"{type(exception).__name__}: {first_line(exception)}"


@dataclass(eq=False)
class Unit:
    """One unit's work in this crawl: what it has outstanding, and what the spider learned."""

    task: Task | None = None  # None: a target named by -a (nothing to complete in the queue)
    requests: int = 0  # scheduled, not yet through their callback or errback
    items: int = 0  # yielded, not yet through the item pipelines
    started: bool = False  # everything start() had for it is out
    errors: list[str] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)
    closed: bool = False
    failed: bool = False  # closed with an error


@dataclass(frozen=True)
class Wait:
    """What a follow drainer that cannot work waits for (UnitLifecycle.cannot_work): `ready()`
    asked every `poll_s` (it logs its own answer, and a failure to find out is a "not yet")."""

    until: str  # the end of "the ROLE queue waits until …"
    ready: Callable[[], Awaitable[bool]]
    poll_s: float


class UnitSpider(Protocol):
    """What a spider whose units are tracked says (both have defaults in UnitLifecycle)."""

    def unit_item(self, unit: Unit, item: Any) -> None: ...
    async def unit_outcome(self, unit: Unit) -> Closing: ...


def unit_name(unit: Unit) -> str:
    return f"task {unit.task.id} ({unit.task.role})" if unit.task is not None else "a target of the crawl"


def default_outcome(unit: Unit) -> Outcome:
    """The first error fails the task (to be retried); without one it completes."""
    return (unit.errors[0], False) if unit.errors else (TaskResult(), False)
