"""Rendered pages read off the event loop, each within a deadline (docs/onpage.md, "Hostile pages").

Reading a page (lxml, the challenge check, the on-page parser, trafilatura) is CPU that a hostile
page can stretch to minutes (40,000 headings: 68 s; a 9.4 MB page: 350 s) and memory it can
stretch to gigabytes. A thread cannot be stopped, so pages are read in processes of their own: up
to `workers` of them, started on first use from a 'forkserver' (a fresh interpreter that preloaded
the parser, never a fork of the crawl process, whose Twisted reactor, threads and database
connections must not be copied), each capped at `max_memory_mb` of address space. A page goes to
an idle process; one that has not answered within `timeout_s` is killed and replaced, and the page
is `empty` with that reason. A page that fails its process (a MemoryError past the cap, an
exception, a crash in C) is `empty` with its reason as well, and that process is replaced too. The
event loop only awaits: sending a page and waiting for its answer happen in threads of the pool's
own, one per process.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import resource
import signal
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Any

from cannaspider.firecrawl import classify
from cannaspider.firecrawl.corpus import CorpusLimits, positive_setting

if TYPE_CHECKING:  # what the parser processes import is kept to the parser itself
    from scrapy.settings import BaseSettings

logger = logging.getLogger(__name__)

READY = "ready"
# A new process answers READY once it is set up (a fork of the fork server, which has imported
# the parser already; the very first start also starts that server, an interpreter's import).
STARTUP_S = 120.0


@dataclass(frozen=True)
class ParseBounds:
    workers: int  # ONPAGE_PARSE_WORKERS: parser processes of one crawl process
    timeout_s: float  # ONPAGE_PARSE_TIMEOUT_S: one page's reading
    max_memory_mb: int  # ONPAGE_PARSE_MAX_MEMORY_MB: one parser process's address space

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> ParseBounds:
        """ValueError naming the setting when one is not positive."""
        timeout = settings.getfloat("ONPAGE_PARSE_TIMEOUT_S")
        if not timeout > 0:
            got = settings.get("ONPAGE_PARSE_TIMEOUT_S")
            raise ValueError(f"ONPAGE_PARSE_TIMEOUT_S must be a positive number, got {got!r}")
        return cls(
            workers=positive_setting(settings, "ONPAGE_PARSE_WORKERS"),
            timeout_s=timeout,
            max_memory_mb=positive_setting(settings, "ONPAGE_PARSE_MAX_MEMORY_MB"),
        )


class ParserUnavailable(Exception):
    """A parser process could not be started: the environment's failure, not a page's."""


def _serve(conn: Connection, min_words: int, limits: CorpusLimits, max_memory_bytes: int) -> None:
    """A parser process: documents in, (True, verdict) or (False, why it failed) out."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the crawl's to handle: it kills us
    resource.setrlimit(resource.RLIMIT_AS, (max_memory_bytes, max_memory_bytes))
    conn.send(READY)
    while True:
        try:
            doc = conn.recv()
        except EOFError:
            return
        if doc is None:
            return
        reply: tuple[bool, Any]
        try:
            reply = (True, classify.read(doc, min_words=min_words, limits=limits))
        except MemoryError:
            reply = (False, "memory")
        except Exception as exc:  # noqa: BLE001 - a page's failure is its verdict, never the process's end
            reply = (False, f"{type(exc).__name__}: {' '.join(str(exc).split())}".rstrip(": "))
        conn.send(reply)


def _ended(code: int | None) -> str:
    if code is None:
        return "ended"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with status {code}"


class _Worker:
    """One parser process and our end of its pipe (blocking calls: run in the pool's threads)."""

    def __init__(self, min_words: int, limits: CorpusLimits, bounds: ParseBounds):
        ctx = multiprocessing.get_context("forkserver")
        # the server imports the parser and loads its language model, and the main script once (as
        # Python's own default does), so a new process does not run the script again; no effect
        # once the server runs
        ctx.set_forkserver_preload(["__main__", __name__, "cannaspider.firecrawl.language_loaded"])
        ours, theirs = ctx.Pipe()
        self.conn = ours
        self.process = ctx.Process(
            target=_serve,
            args=(theirs, min_words, limits, bounds.max_memory_mb * 1024 * 1024),
            name="onpage-parser",
            daemon=True,
        )
        self.process.start()
        theirs.close()
        try:
            ready = ours.poll(STARTUP_S) and ours.recv() == READY
        except (EOFError, OSError):
            ready = False
        if not ready:
            self.kill()
            raise ParserUnavailable(f"a page parser process did not start ({_ended(self.process.exitcode)})")

    def call(self, doc: classify.Document, timeout_s: float) -> tuple[bool, Any] | None:
        """Its answer for `doc`; None when there is none within `timeout_s`. EOFError or
        OSError: the process is gone."""
        self.conn.send(doc)
        if not self.conn.poll(timeout_s):
            return None
        reply: tuple[bool, Any] = self.conn.recv()
        return reply

    def kill(self) -> None:
        # the pipe is left to be closed with the last reference to it: a thread of the pool may
        # still be waiting on it (a cancelled read), and wakes up at the process's end
        self.process.kill()
        self.process.join(5)


class ParserPool:
    """`await pool.read(document)`: its verdict, from one of the pool's parser processes."""

    def __init__(self, bounds: ParseBounds, *, min_words: int, limits: CorpusLimits):
        self.bounds = bounds
        self.min_words = min_words
        self.limits = limits
        self._idle: list[_Worker] = []
        self._all: set[_Worker] = set()
        self._slots = asyncio.Semaphore(bounds.workers)
        self._threads = ThreadPoolExecutor(bounds.workers, thread_name_prefix="onpage-parser")
        self._lock = threading.Lock()  # _all and _closed, also written by the threads that start processes
        self._closed = False
        self._warming: asyncio.Future[None] | None = None

    def _start(self) -> _Worker:
        worker = _Worker(self.min_words, self.limits, self.bounds)
        with self._lock:
            if not self._closed:
                self._all.add(worker)
                return worker
        worker.kill()  # started while the pool closed
        raise ParserUnavailable("the page parser pool is closed")

    def warm_up(self) -> None:
        """Start a parser process in the background, while Firecrawl renders the pages: the first
        one also starts the fork server, which imports the parser (a second or two)."""
        if self._warming is None and not self._closed:
            self._warming = asyncio.ensure_future(self._warm())

    async def _warm(self) -> None:
        async with self._slots:
            if self._idle or self._closed:
                return
            try:
                worker = await asyncio.get_running_loop().run_in_executor(self._threads, self._start)
            except (ParserUnavailable, OSError):
                return  # the first read tries again, and says why
            self._idle.append(worker)

    def _retire(self, worker: _Worker) -> None:
        with self._lock:
            self._all.discard(worker)
        worker.kill()

    async def read(self, doc: classify.Document) -> classify.Verdict:
        """The document's verdict; `empty` with the reason when its process took longer than
        the deadline, ran out of memory, failed or died. ParserUnavailable when no process starts
        (or the pool is closed)."""
        loop = asyncio.get_running_loop()
        async with self._slots:
            worker = self._idle.pop() if self._idle else None
            if worker is not None and not worker.process.is_alive():
                # it died while idle (the kernel's OOM killer): not this page's doing, it gets another
                self._retire(worker)
                worker = None
            if worker is None:
                worker = await loop.run_in_executor(self._threads, self._start)
            try:
                reply = await loop.run_in_executor(self._threads, worker.call, doc, self.bounds.timeout_s)
            except (EOFError, OSError):
                self._retire(worker)
                return self._unread(doc, f"the parser process {_ended(worker.process.exitcode)}")
            except BaseException:  # cancelled: its answer would go to the next page
                self._retire(worker)
                raise
            if reply is None:
                self._retire(worker)
                return self._unread(doc, f"parsing took longer than {self.bounds.timeout_s:g} s")
            done, value = reply
            if not done:
                self._retire(worker)  # whatever it holds now (a failed allocation, half a tree) goes with it
                if value == "memory":
                    return self._unread(doc, f"parsing needed more than {self.bounds.max_memory_mb} MB")
                return self._unread(doc, f"the parser failed: {value}")
            self._idle.append(worker)
            verdict: classify.Verdict = value
            return verdict

    def _unread(self, doc: classify.Document, why: str) -> classify.Verdict:
        reason = f"not read: {why}"
        logger.warning("%s: %s (%d characters of HTML)", doc.url, reason, len(doc.html))
        return classify.Verdict(classify.EMPTY, doc.http_status, reason)

    def close(self) -> None:
        """Kill every parser process (they hold nothing but the page they read); for good."""
        with self._lock:
            self._closed = True
            workers = list(self._all)
        for worker in workers:
            self._retire(worker)
        self._idle.clear()
        if self._warming is not None:
            self._warming.cancel()
        self._threads.shutdown(wait=False, cancel_futures=True)
