"""Store discovery: the platform's area search over a state (and optionally one city); for Dutchie,
DispensarySearch around points that cover it (cannaspider/platforms/geography.py). A queued task
names its platform (`worker_tasks.platform`); an explicit `-a state` searches `-a platform`, else
the default platform.

    scrapy crawl store_discovery -a state=AZ [-a city=Phoenix] [-a platform=jane]
    scrapy crawl store_discovery [-a follow=1]       drain the store_discovery queue (one state per task)

Writes discovery_locations and creates or updates dispensaries (keyed by the platform
id, so rediscovery updates and never duplicates).

A state's discovery is one unit of units/lifecycle.py, a queued task's or the `-a` target's, by the
same start path: one whose search points failed fails (its task retried; an `-a` target's crawl
exits 3, "a unit did not complete").
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

from scrapy import Request
from scrapy.http import Response
from twisted.python.failure import Failure

from cannaspider.items import DispensaryRecord
from cannaspider.platforms.interface import PlatformFailure
from cannaspider.spiders.base import PlatformSpider, SpiderArgumentError, SpiderParams
from cannaspider.tasks import roles
from cannaspider.tasks.queue import TaskResult
from cannaspider.units.lifecycle import UNIT_META, Outcome, Unit, UnitLifecycle


class StoreDiscoverySpider(PlatformSpider):
    name = "store_discovery"
    role = roles.get(name)  # its target, schedule and chain: cannaspider/tasks/roles.py

    arguments = frozenset({"state", "city", "platform"})

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.seen: set[str] = set()  # a search's stores outside any unit (`scrapy check`'s contracts)
        self.targets: list[Unit] = []  # the `-a` target's unit (none: draining)

    def require_target(self, params: SpiderParams) -> None:
        if params.city and not params.state:
            raise SpiderArgumentError("store_discovery: -a city needs -a state=XX")
        if params.platform and not params.state:
            raise SpiderArgumentError("store_discovery: -a platform needs -a state=XX (a task names its own)")

    @property
    def state(self) -> str | None:
        return self.params.state

    @property
    def city(self) -> str | None:
        return self.params.city

    async def start(self) -> AsyncIterator[Any]:
        units = UnitLifecycle.of(self.crawler)
        if not self.draining:
            assert self.state is not None  # require_target
            target = {"state": self.state, "city": self.city, "platform": self.params.platform}
            self.targets = [Unit(target=target)]
        async for unit in units.units(self.name, self.params.follow, None if self.draining else self.targets):
            unit.data.update({"seen": set(), "ids": [], "failed_points": 0, "points": 0})
            async for out in units.start(unit, self._searches(unit)):
                yield out

    def _searches(self, unit: Unit) -> Iterator[Request]:
        state: str = unit.target["state"]  # the role's target (StateTarget)
        city: str | None = unit.target.get("city")
        chosen = self.platform(unit.target.get("platform"))
        meta = {"state": state, "platform": chosen.name}
        requests = chosen.area_requests(state, city, callback=self.parse_search, errback=self.on_error, meta=meta)
        self.logger.info(
            "store discovery in %s%s: %d search points", state, f" ({city})" if city else "", len(requests)
        )
        unit.data["points"] = len(requests)
        yield from requests

    def _point_failed(self, meta: dict[str, Any]) -> None:
        unit: Unit | None = meta.get(UNIT_META)
        if unit is not None:
            unit.data["failed_points"] += 1

    def parse_search(self, response: Response) -> Iterator[DispensaryRecord]:
        """Dispensaries near one point of the state.

        @graphql DispensarySearch near=sandbox:AZ:0 state=AZ distance=50
        @returns items 1
        @returns requests 0 0
        @scrapes platform_dispensary_id name slug menu_url state lat lng
        """
        found = self.counted(self.platform(response.meta.get("platform")).read_stores(response))
        if isinstance(found, PlatformFailure):
            self._point_failed(response.meta)
            self.logger.error("search around %s failed: %s", response.meta.get("point"), found.message)
            return
        if found.malformed is not None:
            self.logger.error("search around %s: %s", response.meta.get("point"), found.malformed)
            return
        for _ in range(found.skipped):
            self.logger.warning("search around %s: skipped a dispensary without id or name", response.meta.get("point"))
        unit: Unit | None = response.meta.get(UNIT_META)
        seen: set[str] = unit.data["seen"] if unit is not None else self.seen
        # under `scrapy check` there is no -a state: the contract's search names the state
        state = response.meta.get("state") or self.state
        city: str | None = unit.target.get("city") if unit is not None else self.city
        for record in found.records:
            if state and record.state and record.state.upper() != state:
                continue
            if city and (record.city or "").lower() != city.lower():
                continue
            if record.platform_dispensary_id in seen:
                continue
            seen.add(record.platform_dispensary_id)
            yield record

    def on_error(self, failure: Failure) -> None:
        request = getattr(failure, "request", None)
        self._point_failed(request.meta if request is not None else {})
        kind = failure.type.__name__ if failure.type is not None else "error"
        self.logger.error("search request failed: %s: %s", kind, failure.getErrorMessage())

    # -- a drained task's outcome (units/lifecycle.py) ----------------------------------------------
    def unit_item(self, unit: Unit, item: Any) -> None:
        if isinstance(item, DispensaryRecord) and item.dispensary_id is not None:
            unit.data["ids"].append(item.dispensary_id)

    async def unit_outcome(self, unit: Unit) -> Outcome:
        data = unit.data
        if data["failed_points"]:
            # what was found is stored; the retry finds the same stores and chains the new ones
            return f"{data['failed_points']} of {data['points']} search points failed", False
        if unit.errors:
            return unit.errors[0], False
        if unit.task is None:  # an `-a` target: nothing chains from it (closed() logs its figures)
            return TaskResult(
                pages=data["points"], products=len(data["ids"]), extra={"stores": len(data["ids"])}
            ), False
        # new: created since the task was first queued (an earlier failed attempt may have made them)
        pool = await self.store.open()
        async with pool.connection() as conn:
            rows = await (
                await conn.execute(
                    "SELECT id FROM dispensaries WHERE id = ANY(%s) AND created_at >= %s ORDER BY id",
                    (data["ids"], unit.task.created_at),
                )
            ).fetchall()
        new = [row[0] for row in rows]
        self.logger.info(
            "store discovery in %s (task %s): %d dispensaries found, %d new",
            unit.task.state,
            unit.task.id,
            len(data["ids"]),
            len(new),
        )
        return (
            TaskResult(
                pages=data["points"],
                products=len(data["ids"]),
                new=len(new),
                new_dispensary_ids=new,
                extra={"stores": len(data["ids"])},
            ),
            False,
        )

    def closed(self, reason: str) -> None:
        for unit in self.targets:  # each drained task logged its own figures
            self.logger.info(
                "store discovery in %s: %d dispensaries found, %d search points failed",
                unit.target["state"],
                len(unit.data.get("seen", ())),
                unit.data.get("failed_points", 0),
            )
