"""`scrapy proxies add|import|list|check|enable|disable`: the `proxies` table, which is the pool
of every Dutchie crawl (docs/stealth.md). Passwords are stored, never printed: `user:***`.

    scrapy proxies add http://user:password@host:port [URL …]
    scrapy proxies add --pool images URL  a proxy of another pool (IMAGES_PROXY_POOL; default `crawl`)
    scrapy proxies import FILE          one proxy URL a line (`#` comments); `-` reads stdin
    scrapy proxies list
    scrapy proxies check [ID …]         one GraphQL request through each proxy, by the crawl's own
                                        download path (stealth middleware, HttpProxyMiddleware)
    scrapy proxies enable|disable ID …
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import scrapy
from scrapy.http import Response
from twisted.python.failure import Failure

from cannaspider import platforms
from cannaspider.command_base import CannaspiderCommand
from cannaspider.db import connect, database_url
from cannaspider.platforms.interface import PlatformFailure
from cannaspider.stealth.proxies import (
    CRAWL_POOL,
    FAILURE,
    FLUSH_HEALTH,
    SUCCESS,
    FailureRule,
    HealthBatch,
    ProxyInputError,
    ProxyRecord,
    ProxySpec,
    health_params,
    parse_proxy_url,
    record_of,
)
from cannaspider.stealth.routing import PIN_META

ACTIONS = ("add", "import", "list", "check", "enable", "disable")
# an operator's decision (add, enable, disable) ends re-probing: a disabled proxy stays disabled
NOT_PROBED = "deactivated_at = NULL, next_probe_at = NULL, probe_failures = 0"
LIST_QUERY = """
SELECT id, protocol, host, port, username, password, failure_count, recent_attempts, is_active, success_count,
       avg_response_time_ms, last_used_at, last_failure_at, last_error, pool
  FROM proxies ORDER BY id
"""


class Command(CannaspiderCommand):
    requires_crawler_process = True

    def syntax(self) -> str:
        return "add URL… | import FILE | list | check [ID…] | enable ID… | disable ID…"

    def short_desc(self) -> str:
        return "Manage the proxy pool (the proxies table) of Dutchie crawls"

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument(
            "--pool",
            default=CRAWL_POOL,
            help="add/import: the proxies' pool (`crawl`, every Dutchie request's; another, e.g. `images`, "
            "for IMAGES_PROXY_POOL)",
        )

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        try:
            super().run(args, opts)
        except ProxyInputError as exc:
            print(f"error: {exc}", file=sys.stderr)
            self.exitcode = 2

    def execute(self, args: list[str], opts: argparse.Namespace) -> None:
        if not args or args[0] not in ACTIONS:
            raise ProxyInputError(f"give an action: {', '.join(ACTIONS)}")
        action, rest = args[0], args[1:]
        url = database_url(self.settings)
        if action == "add":
            if not rest:
                raise ProxyInputError("proxies add needs at least one URL: http://user:password@host:port")
            specs = [parse_proxy_url(text) for text in rest]  # all or nothing
            for spec in specs:
                print(self._add(url, spec, opts.pool))
        elif action == "import":
            self._import(url, rest, opts.pool)
        elif action == "list":
            self._list(url)
        elif action == "check":
            self._check(url, _ids(rest))
        else:
            self._set_active(url, _ids(rest, required=True), action == "enable")

    # -- actions -------------------------------------------------------------------------------
    @staticmethod
    def _add(url: str, spec: ProxySpec, pool: str = CRAWL_POOL) -> str:
        with connect(url, autocommit=True) as conn:
            row = conn.execute(
                "SELECT id FROM proxies WHERE protocol = %s AND host = %s AND port = %s "
                "AND username IS NOT DISTINCT FROM %s",
                (spec.protocol, spec.host, spec.port, spec.username),
            ).fetchone()
            if row:
                # the same proxy and user: a new password or a comeback, not a second row
                conn.execute(
                    f"UPDATE proxies SET password = %s, is_active = true, recent_attempts = '', pool = %s, "
                    f"{NOT_PROBED} WHERE id = %s",
                    (spec.password, pool, row[0]),
                )
                return f"updated #{row[0]} {spec.masked}{_in_pool(pool)} (active)"
            inserted = conn.execute(
                "INSERT INTO proxies (host, port, username, password, protocol, pool) "
                "VALUES (%s, %s, %s, %s, %s, %s) RETURNING id",
                (spec.host, spec.port, spec.username, spec.password, spec.protocol, pool),
            ).fetchone()
            assert inserted is not None
            pid = inserted[0]
        return f"added #{pid} {spec.masked}{_in_pool(pool)}"

    def _import(self, url: str, rest: list[str], pool: str = CRAWL_POOL) -> None:
        if len(rest) != 1:
            raise ProxyInputError("proxies import needs one file (or - for standard input)")
        try:
            text = sys.stdin.read() if rest[0] == "-" else Path(rest[0]).read_text()
        except OSError as exc:
            raise ProxyInputError(f"cannot read {rest[0]}: {exc.strerror}") from None
        bad = 0
        for n, line in enumerate(text.splitlines(), 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            try:
                print(self._add(url, parse_proxy_url(line), pool))
            except ProxyInputError as exc:
                bad += 1
                print(f"error: line {n}: {exc}", file=sys.stderr)
        if bad:
            print(f"error: {bad} line(s) refused, the others imported", file=sys.stderr)
            self.exitcode = 2

    @staticmethod
    def _list(url: str) -> None:
        with connect(url) as conn:
            rows = conn.execute(LIST_QUERY).fetchall()
        if not rows:
            print("no proxies: add one with `scrapy proxies add http://user:password@host:port`")
            return
        print(
            f"{'id':>4}  {'active':6}  {'proxy':44}  {'ok':>6}  {'fails':>5}  {'recent':>6}  {'avg ms':>6}  "
            "last used / last error"
        )
        for row in rows:
            record = record_of(row[:8])
            active, ok, avg, used, failed_at, error, pool = row[8:]
            recent = f"{record.recent_attempts.count(FAILURE)}/{len(record.recent_attempts)}"
            when = used.strftime("%Y-%m-%d %H:%M") if used else "-"
            tail = f"{when}" + (f" / {error[:60]}" if error else "") + _in_pool(pool)
            print(
                f"{record.id:>4}  {'yes' if active else 'no':6}  {record.masked:44}  {ok or 0:>6}  "
                f"{record.failure_count:>5}  {recent:>6}  {avg if avg is not None else '-':>6}  {tail}"
            )

    def _check(self, url: str, ids: list[int]) -> None:
        with connect(url) as conn:
            where = "WHERE id = ANY(%s) ORDER BY id" if ids else "WHERE is_active ORDER BY id"
            query = LIST_QUERY.replace("ORDER BY id", where)
            rows = conn.execute(query, (ids,) if ids else None).fetchall()
        missing = set(ids) - {r[0] for r in rows}
        if missing:
            raise ProxyInputError(f"no proxy with id {', '.join(map(str, sorted(missing)))}")
        if not rows:
            raise ProxyInputError("no active proxy to check: add one with `scrapy proxies add`")
        records = [record_of(r[:8]) for r in rows]
        results: dict[int, str] = {}
        health: dict[int, HealthBatch] = {}
        assert self.crawler_process is not None
        self.crawler_process.crawl(ProxyCheckSpider, records=records, results=results, health=health)
        self.crawler_process.start()
        # the crawl's pool records the health of active proxies only: an inactive one's check is
        # written here (the same UPDATE; it leaves an inactive row inactive: enabling is `enable`'s)
        inactive = {r[0] for r in rows if not r[8]}
        self._record(url, {pid: h for pid, h in health.items() if pid in inactive})
        failed = 0
        for record in records:
            outcome = results.get(record.id, "error: no answer")
            failed += not outcome.startswith("ok")
            print(f"#{record.id} {record.masked}: {outcome}")
        if failed:
            self.exitcode = 1

    def _record(self, url: str, health: dict[int, HealthBatch]) -> None:
        if not health:
            return
        assert self.settings is not None
        rule = FailureRule.from_settings(self.settings)
        reprobe_after_s = self.settings.getfloat("PROXY_REPROBE_AFTER_S")
        with connect(url, autocommit=True) as conn, conn.cursor() as cur:
            cur.executemany(
                FLUSH_HEALTH,
                [health_params(pid, h, rule, reprobe_after_s) for pid, h in sorted(health.items())],
            )

    @staticmethod
    def _set_active(url: str, ids: list[int], active: bool) -> None:
        with connect(url, autocommit=True) as conn:
            done = conn.execute(
                "UPDATE proxies SET is_active = %s, recent_attempts = CASE WHEN %s THEN '' ELSE recent_attempts END, "
                f"{NOT_PROBED} WHERE id = ANY(%s) RETURNING id",
                (active, active, ids),
            ).fetchall()
        missing = set(ids) - {r[0] for r in done}
        for pid in sorted(r[0] for r in done):
            print(f"#{pid} {'enabled' if active else 'disabled'}")
        if missing:
            raise ProxyInputError(f"no proxy with id {', '.join(map(str, sorted(missing)))}")


def _ids(values: list[str], required: bool = False) -> list[int]:
    if required and not values:
        raise ProxyInputError("give the id(s) of the proxies (see `scrapy proxies list`)")
    try:
        return [int(v) for v in values]
    except ValueError:
        raise ProxyInputError(f"proxy ids are numbers, got {' '.join(values)!r}") from None


class ProxyCheckSpider(scrapy.Spider):
    """One ConsumerDispensaries request through each proxy (pinned: no rotation, no retry)."""

    name = "proxy_check"
    custom_settings = {"RETRY_ENABLED": False, "LOG_ENABLED": False, "FEEDS": {}, "ITEM_PIPELINES": {}}

    def __init__(
        self, records: list[ProxyRecord], results: dict[int, str], health: dict[int, HealthBatch], **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.records, self.results, self.health = records, results, health

    async def start(self) -> AsyncIterator[scrapy.Request]:
        # the default platform's API is what the proxies carry (its probe: a cheap request)
        url = self.settings.get("DUTCHIE_GRAPHQL_URL")
        platform = platforms.build(platforms.DEFAULT, self.settings)
        for record in self.records:
            yield platform.probe_request(
                url,
                callback=self.parse,
                errback=self.failed,
                meta={PIN_META: record, "check_started": time.monotonic(), "dispensary_id": f"check-{record.id}"},
            )

    def parse(self, response: Response) -> None:
        record: ProxyRecord = response.meta[PIN_META]
        result = platforms.get(platforms.DEFAULT).classify(response)
        ms = (time.monotonic() - response.meta["check_started"]) * 1000
        latency_ms = response.meta.get("download_latency", ms / 1000) * 1000
        # the proxy carried the request (the stealth middleware judged its answer no block)
        self.health[record.id] = HealthBatch(
            successes=1, total_ms=latency_ms, attempts=SUCCESS, last_used_at=datetime.now(UTC)
        )
        if isinstance(result, PlatformFailure):
            self.results[record.id] = f"failed: {result.message} ({ms:.0f} ms)"
        else:
            self.results[record.id] = f"ok ({ms:.0f} ms, HTTP {response.status})"

    def failed(self, failure: Failure) -> None:
        request = getattr(failure, "request", None)
        record = request.meta.get(PIN_META) if request is not None else None
        if record is not None:
            kind = failure.type.__name__ if failure.type else "error"
            error = f"{kind}: {failure.getErrorMessage()}"
            self.results[record.id] = f"failed: {error}"
            now = datetime.now(UTC)
            self.health[record.id] = HealthBatch(
                failures=1, attempts=FAILURE, last_used_at=now, last_failure_at=now, last_error=error[:500]
            )


def _in_pool(pool: str) -> str:
    """How a listing names a proxy's pool: nothing for the crawl's."""
    return "" if pool == CRAWL_POOL else f" [pool {pool}]"
