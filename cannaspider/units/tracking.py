"""What each unit has outstanding (docs/architecture.md, "Unit lifecycle"): the requests and
items start() yields for it, what its responses' callbacks yield (the spider middleware,
units/middleware.py, calls track()) and what its failures' errbacks yield (an errback wrapper);
the item signals say when an item has left the pipelines. Each change asks `check` (closing.py)
whether the unit can close."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterable
from typing import Any

from scrapy import Request, signals
from scrapy.crawler import Crawler
from scrapy.http import Response
from twisted.python.failure import Failure

from cannaspider.units.unit import ERRBACK_META, UNIT_META, Unit, describe, unit_name

logger = logging.getLogger("cannaspider.units.lifecycle")  # one logger for the lifecycle's lines


class UnitTracking:
    def __init__(self, crawler: Crawler, check: Callable[[Unit], None]):
        self.crawler = crawler
        self.check = check
        # id(item) → its unit, for start()'s items while they are in the pipelines (a callback's items
        # are found by their response: the pipelines may hand on another object, a StoreProduct
        # for a RawProduct)
        self._items: dict[int, Unit] = {}
        for handler, signal in (
            (self._item_done, signals.item_scraped),
            (self._item_done, signals.item_dropped),
            (self._item_failed, signals.item_error),
            (self._request_dropped, signals.request_dropped),
        ):
            crawler.signals.connect(handler, signal=signal)

    async def start(self, unit: Unit, output: Iterable[Any] | Callable[[], Iterable[Any]]) -> AsyncIterator[Any]:
        """What start() yields for `unit` (a new Unit(task)), counted for it; an exception fails
        the unit (and the drain goes on with the next one). Iterate it even for no output: the
        unit closes once it is exhausted and nothing of it is outstanding."""
        try:
            async for out in self.track(unit, output() if callable(output) else output, source="start"):
                yield out
        except Exception:
            logger.exception("%s: starting its crawl failed", unit_name(unit))
        finally:
            unit.started = True
            self.check(unit)

    async def track(
        self, unit: Unit, output: Iterable[Any] | AsyncIterable[Any] | None, *, source: str, request: bool = False
    ) -> AsyncIterator[Any]:
        """Count every request and item of `output` for `unit`; with `request`, the request whose
        callback or errback produced it is done once the output is exhausted. An exception is the
        unit's error (it fails, the attempt counted) and goes on to the caller."""
        try:
            if isinstance(output, AsyncIterable):
                async for out in output:
                    self.count(unit, out, by_id=not request)
                    yield out
            else:
                for out in output or ():
                    self.count(unit, out, by_id=not request)
                    yield out
        except Exception as exc:
            unit.errors.append(f"{source} raised {describe(exc)}")
            raise
        finally:
            if request:
                unit.requests -= 1
            self.check(unit)

    def count(self, unit: Unit, out: Any, *, by_id: bool = False) -> None:
        if isinstance(out, Request):
            if out.meta.get(UNIT_META) is None:
                out.meta[UNIT_META] = unit
                out.errback = _Errback(self, unit, out.errback)
                unit.requests += 1
        else:
            unit.items += 1
            if by_id:
                self._items[id(out)] = unit

    def failed(self, unit: Unit, reason: str) -> None:
        """A callback of the unit raised (units/middleware.py): the unit fails with that reason."""
        unit.errors.append(reason)

    def _item_done(self, item: Any, response: Response | Failure | None = None, **_: Any) -> None:
        self._settle(item, response, None)

    def _item_failed(self, item: Any, failure: Failure, response: Response | Failure | None = None, **_: Any) -> None:
        self._settle(item, response, f"storing an item failed: {failure.getErrorMessage()}")

    def _request_dropped(self, request: Request, **_: Any) -> None:
        unit = request.meta.get(UNIT_META)
        if isinstance(unit, Unit):  # never downloaded (the scheduler refused it): never called back
            unit.requests -= 1
            self.check(unit)

    def _settle(self, item: Any, response: Response | Failure | None, error: str | None) -> None:
        # a callback's item: its response's unit; an errback's: its failed request's; start()'s: by id
        request = response.request if isinstance(response, Response) else getattr(response, "request", None)
        unit = request.meta.get(UNIT_META) if isinstance(request, Request) else None
        if not isinstance(unit, Unit):
            unit = self._items.pop(id(item), None)
        if unit is None:
            return
        unit.items -= 1
        if error:
            unit.errors.append(error)
        else:
            hook = getattr(self.crawler.spider, "unit_item", None)
            if hook is not None:
                hook(unit, item)
        self.check(unit)


class _Errback:
    """A unit's request errback: the original's output counted for the unit, the request done."""

    def __init__(self, lifecycle: UnitTracking, unit: Unit, errback: Callable[[Failure], Any] | None):
        self.lifecycle, self.unit, self.errback = lifecycle, unit, errback
        self.__name__ = getattr(errback, "__name__", "errback")

    def __call__(self, failure: Failure) -> Any:
        request = getattr(failure, "request", None)
        if isinstance(request, Request):
            request.meta[ERRBACK_META] = True  # its output does not go through the middleware again
        if self.errback is None:
            self.unit.requests -= 1
            self.lifecycle.check(self.unit)
            return failure  # Scrapy logs it, as for any request without an errback
        try:
            output = self.errback(failure)
        except Exception as exc:
            self.unit.errors.append(f"{self.__name__} raised {describe(exc)}")
            self.unit.requests -= 1
            self.lifecycle.check(self.unit)
            raise
        return self.lifecycle.track(self.unit, output, source=self.__name__, request=True)
