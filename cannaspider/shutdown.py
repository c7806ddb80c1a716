"""Work to finish when the reactor stops, even on a forced shutdown.

A second SIGINT/SIGTERM (Scrapyd's second cancel.json) makes Scrapy stop the reactor at once,
without spider_closed: the tasks a drain holds and the crawl runs a process opened would stay
'running' until their lease expired or the next crawl found the process dead (issue 16). Twisted
runs its "before shutdown" triggers when the reactor stops, forced or not, and waits for the
Deferreds they return while the event loop still runs: the components that hold something give
it back there too (README, "Exits and errors").
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from scrapy.utils.reactor import is_reactor_installed
from twisted.internet.defer import Deferred


def on_reactor_shutdown(close: Callable[[], Awaitable[Any]]) -> None:
    """Run `close` (idempotent: on a clean stop spider_closed has already run it) when the running
    reactor stops. Without a running reactor (in-process tests) nothing is registered."""
    if not is_reactor_installed():
        return
    from twisted.internet import reactor as installed  # noqa: PLC0415 - installed by now: importing it installs none

    reactor: Any = installed  # twisted's module attribute is typed as the default reactor's module
    if not reactor.running:
        return

    def trigger() -> Deferred[Any]:
        return Deferred.fromFuture(asyncio.ensure_future(close()))

    reactor.addSystemEventTrigger("before", "shutdown", trigger)
