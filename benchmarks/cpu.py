"""CPU seconds spent by each process a benchmark's crawl runs beside: the crawl itself, from its
spider's open to its close (CrawlCpu, an extension: the process's start, its imports, is not the
crawl's), and, read from /proc, the PostgreSQL server (the postmaster, its live children and
those it has reaped: the crawl's backends end with the crawl) and the sandbox.

On the 2-core machine these benchmarks run on, all three share the cores, so a crawl's wall time
is not its own CPU alone: what the database spends on a crawl's writes is time the crawl waits
for a core (docs/images.md, "Ingest benchmark"). None where a figure is not readable here (a
DATABASE_URL server on another machine)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import psycopg
from scrapy import signals
from scrapy.crawler import Crawler

TICK = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def own_cpu_s(pid: int) -> float:
    """utime + stime of a process (fields 14-15 of /proc/pid/stat)."""
    fields = _stat(pid)
    return (int(fields[11]) + int(fields[12])) / TICK


def reaped_cpu_s(pid: int) -> float:
    """cutime + cstime: the CPU of the children a process has reaped (fields 16-17)."""
    fields = _stat(pid)
    return (int(fields[13]) + int(fields[14])) / TICK


def parent_pid(pid: int) -> int:
    return int(_stat(pid)[1])


def postmaster_pid(url: str) -> int | None:
    with psycopg.connect(url, autocommit=True) as conn:
        backend = conn.execute("SELECT pg_backend_pid()").fetchone()
    try:
        return parent_pid(backend[0]) if backend else None  # a backend's parent is the postmaster
    except OSError:
        return None


def database_cpu_s(postmaster: int) -> float | None:
    """The whole server's CPU so far: the postmaster's, its live children's, its reaped ones'."""
    try:
        total = own_cpu_s(postmaster) + reaped_cpu_s(postmaster)
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    if parent_pid(int(entry.name)) == postmaster:
                        total += own_cpu_s(int(entry.name))
                except OSError:  # ended meanwhile: its CPU is in the postmaster's reaped figure
                    continue
        return total
    except OSError:
        return None


CRAWL_CPU_STAT = "benchmark/crawl_cpu_s"


class CrawlCpu:
    """The crawl's process CPU (every thread's) from spider_opened to spider_closed, as a stat."""

    def __init__(self, crawler: Crawler):
        self.crawler = crawler
        self.start = 0.0
        crawler.signals.connect(self.opened, signal=signals.spider_opened)
        crawler.signals.connect(self.closed, signal=signals.spider_closed)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> CrawlCpu:
        return cls(crawler)

    def opened(self) -> None:
        self.start = time.process_time()

    def closed(self) -> None:
        assert self.crawler.stats is not None
        self.crawler.stats.set_value(CRAWL_CPU_STAT, round(time.process_time() - self.start, 3))


class CpuMeter:
    """Cumulative CPU seconds of the database and the sandbox (the crawl's own: CrawlCpu)."""

    def __init__(self, url: str, sandbox_pid: int):
        self.postmaster = postmaster_pid(url)
        self.sandbox_pid = sandbox_pid

    def read(self) -> dict[str, float | None]:
        try:
            sandbox: float | None = own_cpu_s(self.sandbox_pid) + reaped_cpu_s(self.sandbox_pid)
        except OSError:
            sandbox = None
        return {
            "database": database_cpu_s(self.postmaster) if self.postmaster else None,
            "sandbox": sandbox,
        }

    @staticmethod
    def spent(before: dict[str, float | None], after: dict[str, float | None]) -> dict[str, float | None]:
        return {
            k: (after[k] - b) if (b := before[k]) is not None and after[k] is not None else None  # type: ignore[operator]
            for k in before
        }
