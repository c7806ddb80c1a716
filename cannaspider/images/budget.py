"""A pixel budget shared by concurrent image work: `/img`'s renders (IMG_RENDER_BUDGET_PIXELS)
and the pipeline's conversions (IMAGES_CONVERT_BUDGET_PIXELS). The memory and CPU an image costs
go with its pixels, so the work in flight is bounded by their sum (docs/images.md, "Bounds").

Waiters are served in order of arrival, except that one which fits goes ahead of one which does
not: a thumbnail is not held up behind a large render waiting for room. A waiter passed over
MAX_OVERTAKES times holds back everyone behind it from then on, so a large image is never starved
by a stream of small ones. One larger than the whole budget runs alone.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

MAX_OVERTAKES = 32


@dataclass(eq=False)
class _Waiter:
    share: int
    granted: asyncio.Future[None] = field(default_factory=lambda: asyncio.get_running_loop().create_future())
    overtaken: int = 0


class PixelBudget:
    def __init__(self, capacity: int, max_overtakes: int = MAX_OVERTAKES) -> None:
        if capacity < 1:
            raise ValueError("a pixel budget is at least 1 pixel")
        self.capacity = capacity
        self.max_overtakes = max_overtakes
        self.held = 0  # pixels of the work in flight (the tests and the stats read it)
        self.peak = 0
        self._waiting: list[_Waiter] = []

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    @asynccontextmanager
    async def hold(self, pixels: int) -> AsyncIterator[None]:
        """Hold `pixels` of the budget (at most all of it) while the block runs."""
        waiter = _Waiter(min(max(pixels, 1), self.capacity))
        self._waiting.append(waiter)
        self._grant()
        try:
            await waiter.granted
        except asyncio.CancelledError:
            if waiter.granted.done() and not waiter.granted.cancelled():
                self._release(waiter.share)  # granted as it was cancelled: hand it on
            else:
                if waiter in self._waiting:
                    self._waiting.remove(waiter)
                self._grant()  # those behind it may go now
            raise
        try:
            yield
        finally:
            self._release(waiter.share)

    def _release(self, share: int) -> None:
        self.held -= share
        self._grant()

    def _grant(self) -> None:
        passed: list[_Waiter] = []  # waiters that did not fit, ahead of the one granted
        for waiter in list(self._waiting):
            if waiter.granted.done():  # cancelled, its task not run yet
                self._waiting.remove(waiter)
                continue
            if self.held + waiter.share <= self.capacity:
                self._waiting.remove(waiter)
                self.held += waiter.share
                self.peak = max(self.peak, self.held)
                waiter.granted.set_result(None)
                for ahead in passed:
                    ahead.overtaken += 1
                continue
            passed.append(waiter)
            if waiter.overtaken >= self.max_overtakes:
                return  # its turn: nobody behind it goes first any more
