"""A pixel budget shared by concurrent image work: `/img`'s renders (IMG_RENDER_BUDGET_PIXELS)
and the pipeline's conversions (IMAGES_CONVERT_BUDGET_PIXELS). The memory and CPU an image costs
go with its pixels, so the work in flight is bounded by their sum (docs/images.md, "Bounds").

Waiters are served in order of arrival: one that does not fit holds back those behind it, so a
large image is never starved by a stream of small ones. One larger than the whole budget runs
alone, once everything before it is done.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager


class PixelBudget:
    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError("a pixel budget is at least 1 pixel")
        self.capacity = capacity
        self.held = 0  # pixels of the work in flight (the tests and the stats read it)
        self.peak = 0
        self._waiting: deque[tuple[int, asyncio.Future[None]]] = deque()

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    @asynccontextmanager
    async def hold(self, pixels: int) -> AsyncIterator[None]:
        """Hold `pixels` of the budget (at most all of it) while the block runs."""
        share = min(max(pixels, 1), self.capacity)
        if self._waiting or self.held + share > self.capacity:
            granted: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiting.append((share, granted))
            try:
                await granted
            except asyncio.CancelledError:
                if granted.done() and not granted.cancelled():
                    self._release(share)  # granted as it was cancelled: hand it on
                else:
                    if (share, granted) in self._waiting:
                        self._waiting.remove((share, granted))
                    self._grant()  # those behind it may fit now
                raise
        else:
            self._take(share)
        try:
            yield
        finally:
            self._release(share)

    def _take(self, share: int) -> None:
        self.held += share
        self.peak = max(self.peak, self.held)

    def _release(self, share: int) -> None:
        self.held -= share
        self._grant()

    def _grant(self) -> None:
        while self._waiting:
            share, granted = self._waiting[0]
            if granted.done():  # its waiter was cancelled and has not run yet
                self._waiting.popleft()
                continue
            if self.held + share > self.capacity:
                return
            self._waiting.popleft()
            self._take(share)
            granted.set_result(None)
