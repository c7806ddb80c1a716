"""Values that could not be kept (or were cut to their limit: limits.py): counted per product, warned
about without flooding the log.

The helpers of this package add what the product being normalized lost to `LOST` (`degrade`);
the normalizer reports it with the product's id once the product is done (`report`). The
normalizer runs on the reactor's thread only, one product at a time.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from math import inf

logger = logging.getLogger(__name__)


class DegradationLog:
    """Warns about products that lost values, without flooding the log: at most `burst` lines per
    `interval` seconds; the next line logged says how many products went unlogged meanwhile.
    `products` counts every degraded product of this process."""

    def __init__(self, burst: int = 10, interval: float = 60.0, clock: Callable[[], float] = time.monotonic):
        self.burst, self.interval, self.clock = burst, interval, clock
        self.products = 0
        self.unlogged = 0
        self.window_start = -inf
        self.logged_in_window = 0

    def report(self, pid: str, what: list[str]) -> None:
        self.products += 1
        now = self.clock()
        if now - self.window_start >= self.interval:
            self.window_start, self.logged_in_window = now, 0
        if self.logged_in_window >= self.burst:
            self.unlogged += 1
            return
        self.logged_in_window += 1
        more = f" ({self.unlogged} more degraded products not logged)" if self.unlogged else ""
        self.unlogged = 0
        logger.warning(
            "product %s: values PostgreSQL cannot hold were degraded (stored as NULL, cleaned or cut short): %s%s",
            pid,
            ", ".join(what),
            more,
        )


class Tally:
    """A running total of this process (values refused or cut, …): the normalize pipeline turns
    the difference over a product into a stat."""

    def __init__(self) -> None:
        self.count = 0


DEGRADATIONS = DegradationLog()
LOST: list[str] = []  # what the product being normalized lost so far


def degrade(what: str, value: object) -> None:
    text = repr(value)  # repr: escapes NUL and surrogates, so the log line itself stays valid
    LOST.append(f"{what}={text if len(text) <= 40 else text[:37] + '...'}")


def report(pid: str) -> None:
    """The product is done: warn about what it lost (rate limited), and start afresh."""
    DEGRADATIONS.report(pid, LOST.copy())
    LOST.clear()
