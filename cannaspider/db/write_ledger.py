"""What each store's crawl has written, so that its close can wait for its rows.

The spider yields a store's products long before the product writer has committed them: it
buffers rows and writes them in the background (pipelines/batch_writer.py). The completion step
(units/crawl_close.py) waits on this ledger until every product the spider yielded is accounted for
(written or rejected) and every accounted row is settled, and only then calls the crawl complete;
only a complete crawl has its misses judged (units/crawl_close.py's rules, run by
units/crawl_close.py). Judging earlier would mark missing the products still in a buffer.
One ledger per crawler, held by its CrawlDatabase (db/crawl_database.py), since the pipelines that write
and the unit that closes are different components.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class RunLedger:
    accounted: int = 0  # products written to the buffers or rejected by normalization
    written: int = 0  # rows the product writer has settled: committed, or refused for good
    inserted: int = 0  # of which were new
    rejected: int = 0
    refused: int = 0  # of the written rows, those the database refused for their values (not stored)
    refused_reason: str = ""  # the first refusal's reason: the incomplete crawl's error
    # set when a waiter's condition may have become true; account() only wakes the waiter once the
    # count it waits for is reached (it runs once per product: waking on each would cost more)
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    accounted_target: int | None = None


class WriteLedger:
    def __init__(self) -> None:
        self.runs: dict[object, RunLedger] = defaultdict(RunLedger)
        # (dispensary_id, run id) whose rows a batch lost, with the reason its crawl is incomplete
        self.failed_runs: dict[tuple[Any, ...], str] = {}
        self.flushers: list[Callable[[], Awaitable[None]]] = []  # writers register their flush here
        # a product writer is in ITEM_PIPELINES: without one no store's rows ever arrive to wait for
        self.products_writer = False

    def account(self, run_key: object, n: int = 1, *, rejected: bool = False) -> None:
        ledger = self.runs[run_key]
        ledger.accounted += n
        if rejected:
            ledger.rejected += n
        if ledger.accounted_target is not None and ledger.accounted >= ledger.accounted_target:
            ledger.changed.set()

    def refuse(self, run_key: object, rows: int, reason: str) -> None:
        """Settled rows of the run that were not stored: its crawl cannot be complete."""
        ledger = self.runs[run_key]
        ledger.refused += rows
        ledger.refused_reason = ledger.refused_reason or reason

    def written(self, run_key: object, rows: int, inserted: int) -> None:
        ledger = self.runs[run_key]
        ledger.written += rows
        ledger.inserted += inserted
        ledger.changed.set()

    async def wait_accounted(self, run_key: object, expected: int, timeout: float) -> bool:
        self.runs[run_key].accounted_target = expected
        return await self._wait(run_key, lambda ledger: ledger.accounted >= expected, timeout)

    async def wait_written(self, run_key: object, timeout: float) -> bool:
        """Until every accounted product of the run that was not rejected is committed."""
        return await self._wait(run_key, lambda ledger: ledger.written >= ledger.accounted - ledger.rejected, timeout)

    async def _wait(self, run_key: object, done: Callable[[RunLedger], bool], timeout: float) -> bool:
        ledger = self.runs[run_key]
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not done(ledger):
            ledger.changed.clear()
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            try:
                await asyncio.wait_for(ledger.changed.wait(), remaining)
            except TimeoutError:
                return done(ledger)
        return True

    async def flush_all(self) -> None:
        for flush in self.flushers:
            await flush()
