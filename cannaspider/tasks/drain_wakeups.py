"""What wakes a waiting task drain: a slot freed, stop(), a task of its role announced by the
queue (LISTEN on its NOTIFY channel, migration 007), or the end of a timeout.

The drain (cannaspider/tasks/drain.py) waits on one `Wakeup` whatever it waits for, so a wait
for a slot also ends on an announcement and the reverse. The LISTEN connection is the drain's
second, apart from the one its operations share: it sits in `notifies()` for as long as the drain
follows the queue, and is reopened (polling meanwhile) when the server drops it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import psycopg

from cannaspider.db.errors import first_line
from cannaspider.tasks import queue

logger = logging.getLogger(__name__)


class Wakeup:
    """An event that a waiting drain wakes on; `wait` ends on it or on its timeout."""

    def __init__(self) -> None:
        self._event = asyncio.Event()

    def set(self) -> None:
        self._event.set()

    def clear(self) -> None:
        self._event.clear()

    async def wait(self, timeout: float | None) -> None:
        """Until set, or `timeout` seconds (None: no timeout)."""
        try:
            await asyncio.wait_for(self._event.wait(), timeout)
        except TimeoutError:
            pass

    async def listen(self, url: str, role: str, listening: Callable[[], bool], retry_max_s: float) -> None:
        """Set on every announcement of a task of `role`, while `listening()`."""
        delay = 0.5
        while listening():
            try:
                async with await psycopg.AsyncConnection.connect(url, autocommit=True, connect_timeout=10) as conn:
                    await conn.execute(f"LISTEN {queue.NOTIFY_CHANNEL}")
                    self.set()  # anything queued while we were not listening
                    delay = 0.5
                    async for note in conn.notifies():
                        if note.payload == role:
                            self.set()
            except psycopg.OperationalError as exc:
                logger.warning("task queue: LISTEN connection lost (%s): polling until it is back", first_line(exc))
                await asyncio.sleep(delay)
                delay = min(delay * 2, retry_max_s)
