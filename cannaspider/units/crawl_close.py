"""Closing a store's crawl: one unit of a product crawl (units/lifecycle.py closes it once, when
none of its requests or items is outstanding, through the spider's unit_outcome), from what the
crawl learned (`StoreOutcome`) to what its close recorded (`StoreVerdict`), its SQL included.

Only a complete crawl (every page arrived and parsed, and every row it yielded committed) may
apply the seed's out-of-stock rules: a product that is merely not written yet would count as
missing. So the close first waits until the store's rows are committed (the writer batches them
with other stores' rows, and flushes early when the crawl goes idle); a crawl whose rows did not
all arrive in time, or were refused by the database, is incomplete: it keeps what it stored,
marks nothing missing, and records why.

Then one transaction records the close and completes the crawl's task: the seed's out-of-stock
rules and the task's completion commit together or not at all. A complete crawl applies the
seed's rules (misses reset for products in the feed, +1 for the others, up to 3, 'oos' at 3)
unless the OOS guard finds it suspect or its menu is empty (then it records the store's empty
menu instead), writes the product events and sets dispensaries.last_crawl_at; an incomplete one
marks nothing missing. Either way the crawl_runs row gets its figures. A complete crawl checks
its task's lease first, in the transaction: a crawl whose lease expired (its task went back to
the queue, maybe to another worker) must not mark misses that the task's next crawl will mark
again. A lost lease, or a run that is no longer 'running' (failed by the queue, closed by a
stop), rolls all of it back: the run gets an incomplete close's figures instead, which change
nothing of a run closed already, so a close runs once.

An incomplete crawl fails its task, which retries after a backoff (docs/operations.md); a close
that fails never raises, it fails the task too, whose lease otherwise expires and puts it back
in the queue. What the close recorded is reported last (`report_close`), from the verdict only:
what is counted and logged is what the transaction recorded.

Read top to bottom: the SQL, what the close goes by and concludes, its transaction, its report,
and `CrawlClose`, the crawler's component that runs them.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import orjson
import psycopg
from psycopg_pool import AsyncConnectionPool
from scrapy import signals
from scrapy.crawler import Crawler
from scrapy.statscollectors import StatsCollector

from cannaspider.crawl_outcome import UNITS_INCOMPLETE_STAT
from cannaspider.db.crawl_database import CrawlDatabase, RunLedger
from cannaspider.db.errors import OUTAGE_ERRORS, DatabaseSetupError, first_line
from cannaspider.extensions import extension
from cannaspider.tasks import queue
from cannaspider.tasks.drain import TaskDrain
from cannaspider.tasks.queue import LeaseLost, Task, TaskResult

logger = logging.getLogger(__name__)


# -- the SQL ----------------------------------------------------------------------------------------
# The seed's out-of-stock rules, the OOS guard and the product events of a complete crawl, in one
# statement; an incomplete crawl's figures. Both leave a run that is no longer 'running' as it is
# (closed already: its lease expired and the queue failed it, or the crawl stopped).

OOS_AFTER_MISSES = 3

# One statement per store (one round trip, atomic). The seed's three updates, folded together:
# products in the feed get their misses reset and are back in stock; the others get one more
# miss (up to 3), and those reaching 3 are marked 'oos' in the same update. The ids seen in the
# feed travel as one JSON array: one string parameter, exact for any id.
# The OOS guard (README, "Crawl correctness"): of the products that were in stock before this crawl
# started (rows it inserted are newer than its run), how many did it see? Below OOS_GUARD_MIN_SHARE
# of them the crawl is an incident, not evidence: no misses, and the run is flagged suspect. A store
# with nothing in stock yet (its first crawl) is not guarded; a share of 0 turns the guard off.
# The guard lets go (migrations/013_oos_guard_expiry.sql): a suspect crawl still counts, per product,
# the suspect crawls in a row that missed it (suspect_misses), and numbers itself in its store's
# streak of suspect crawls (suspect_streak, from the previous complete run that saw a menu). The
# %(limit)s-th suspect crawl in a row confirms the collapse: the misses of the whole streak count (a
# product missing from all three reaches 3 and is 'oos'), the streak ends, and the next crawl is
# judged against the menu that is left. A crawl that is not suspect ends a streak too: a product it
# sees is back with no miss (a collapse of one or two crawls that recovers marks nothing), and a
# product it misses as well carries the streak's suspect misses into its count (a product that
# really left during a short collapse is 'oos' at its third miss in a row, as the seed would have it).
# An empty menu (migrations/025_empty_menus.sql: complete, not one product seen) is no evidence at
# all: it counts no miss, touches no product's stock or suspect misses, is skipped by the streak,
# writes no product event, and records the store's state instead: dispensaries.menu_empty_since
# (set by the first empty crawl, cleared by the next crawl that sees a product) and one
# store_events row when the menu empties and one when it returns.
# Events (migrations/014_product_events.sql, docs/analytics.md "Events"): the same statement writes
# one product_events row per change, judged against the state the product had at the last crawl
# that wrote events (product_event_state, which only this statement writes: no lock taken on
# store_products rows that the image pipeline updates; the writer's upsert has overwritten those
# rows by now). A crawl that is not suspect writes them all; a suspect one only what it concludes,
# the out_of_stock of a confirmed collapse, and leaves the other changes for the next crawl to
# report. ON CONFLICT: a run's events exist once, whatever retries its close.
# A store's products are those of its platform (`provider` is the store's `dispensaries.platform`,
# read in store_was).
CLOSE_COMPLETE = """
WITH seen AS MATERIALIZED (SELECT jsonb_array_elements_text(%(seen)s::jsonb) AS id),
store_was AS MATERIALIZED (SELECT menu_empty_since, platform FROM dispensaries WHERE id = %(d)s),
guard AS MATERIALIZED (
    SELECT count(*) AS in_stock,
           count(*) FILTER (WHERE provider_product_id IN (SELECT id FROM seen)) AS seen_in_stock
      FROM store_products
     WHERE dispensary_id = %(d)s AND provider = (SELECT platform FROM store_was) AND stock_status = 'in_stock'
       AND first_seen_at < coalesce((SELECT started_at FROM crawl_runs WHERE id = %(run)s), now())),
previous AS MATERIALIZED (  -- the store's last complete crawl before this one that saw a menu
    SELECT suspect, suspect_streak FROM crawl_runs
     WHERE dispensary_id = %(d)s AND status = 'complete' AND NOT empty AND id <> %(run)s
       AND started_at <= coalesce((SELECT started_at FROM crawl_runs WHERE id = %(run)s), now())
     ORDER BY started_at DESC LIMIT 1),
judged AS MATERIALIZED (
    SELECT NOT %(empty)s AND %(min_share)s::float8 > 0 AND in_stock > 0
           AND seen_in_stock < %(min_share)s::float8 * in_stock AS suspect, %(empty)s::boolean AS empty,
           in_stock, seen_in_stock,
           -- a run closed already (failed by the queue, or by a stop) is not this close's to judge
           EXISTS (SELECT 1 FROM crawl_runs WHERE id = %(run)s AND status = 'running') AS live
      FROM guard),
verdict AS MATERIALIZED (
    SELECT j.*, s.streak, coalesce(s.streak >= %(limit)s, false) AS confirmed,
           NOT j.empty AND (NOT j.suspect OR coalesce(s.streak >= %(limit)s, false)) AS counts,
           %(events)s AND NOT j.suspect AND NOT j.empty AND j.live AS writes_events,
           %(events)s AND j.live AS writes_oos
      FROM judged j
     CROSS JOIN LATERAL (
            SELECT CASE WHEN j.suspect THEN 1 + coalesce(
                       (SELECT p.suspect_streak FROM previous p
                         WHERE p.suspect AND p.suspect_streak BETWEEN 1 AND %(limit)s - 1), 0) END AS streak) s),
reset AS (
    UPDATE store_products
       SET consecutive_misses = 0, suspect_misses = 0, last_seen_at = now(), is_in_stock = true,
           stock_status = 'in_stock'
     WHERE dispensary_id = %(d)s AND provider = (SELECT platform FROM store_was)
       AND provider_product_id IN (SELECT id FROM seen)
       AND (consecutive_misses <> 0 OR suspect_misses <> 0 OR stock_status <> 'in_stock')
       AND (SELECT live FROM verdict)
    RETURNING 1),
changed AS MATERIALIZED (  -- seen products whose state differs from the last event-writing crawl's
    SELECT sp.id, sp.price_rec, sp.price_med, sp.price_rec_special, sp.price_med_special, sp.is_on_special,
           es.price_rec AS old_rec, es.price_med AS old_med, es.is_on_special AS old_special,
           es.oos_since AS old_oos_since
      FROM store_products sp
      LEFT JOIN product_event_state es ON es.store_product_id = sp.id
     WHERE sp.dispensary_id = %(d)s AND sp.provider = (SELECT platform FROM store_was)
       AND sp.provider_product_id IN (SELECT id FROM seen)
       AND (SELECT writes_events FROM verdict)
       AND (es.is_on_special IS NULL OR es.oos_since IS NOT NULL OR es.is_on_special <> sp.is_on_special
            OR es.price_rec IS DISTINCT FROM sp.price_rec OR es.price_med IS DISTINCT FROM sp.price_med)),
moved_on AS (
    INSERT INTO product_event_state AS es (store_product_id, price_rec, price_med, is_on_special, oos_since)
    SELECT id, price_rec, price_med, is_on_special, NULL FROM changed
    ON CONFLICT (store_product_id) DO UPDATE
       SET price_rec = EXCLUDED.price_rec, price_med = EXCLUDED.price_med, is_on_special = EXCLUDED.is_on_special,
           oos_since = NULL
    RETURNING 1),
missed AS (
    UPDATE store_products
       SET consecutive_misses = CASE WHEN NOT v.counts THEN consecutive_misses
               ELSE least(%(limit)s, consecutive_misses + 1 + suspect_misses) END,
           suspect_misses = CASE WHEN v.counts THEN 0 ELSE suspect_misses + 1 END,
           stock_status = CASE WHEN v.counts AND consecutive_misses + 1 + suspect_misses >= %(limit)s THEN 'oos'
               ELSE stock_status END,
           is_in_stock = CASE WHEN v.counts AND consecutive_misses + 1 + suspect_misses >= %(limit)s THEN false
               ELSE is_in_stock END,
           updated_at = now()
      FROM verdict v
     WHERE v.live AND NOT v.empty AND dispensary_id = %(d)s AND provider = (SELECT platform FROM store_was)
       AND provider_product_id NOT IN (SELECT id FROM seen) AND consecutive_misses < %(limit)s
    RETURNING store_products.id, store_products.consecutive_misses, v.counts AS counted,
              store_products.price_rec, store_products.price_med, store_products.price_rec_special,
              store_products.price_med_special),
went_oos AS MATERIALIZED (  -- marked now (a missed row had fewer misses), unless an interval is open
    -- already (an incomplete crawl, which writes no event, saw the product in between)
    SELECT m.* FROM missed m LEFT JOIN product_event_state es ON es.store_product_id = m.id
     WHERE m.counted AND m.consecutive_misses >= %(limit)s AND (SELECT writes_oos FROM verdict)
       AND es.oos_since IS NULL),
oos_opened AS (
    INSERT INTO product_event_state AS es (store_product_id, oos_since)
    SELECT id, now() FROM went_oos
    ON CONFLICT (store_product_id) DO UPDATE SET oos_since = EXCLUDED.oos_since
    RETURNING 1),
events AS (
    INSERT INTO product_events (occurred_at, crawl_run_id, dispensary_id, store_product_id, type, price_rec_old,
                                price_med_old, price_rec, price_med, price_rec_special, price_med_special)
    SELECT cr.started_at, cr.id, %(d)s, e.id, e.type, e.rec_old, e.med_old, e.price_rec, e.price_med,
           e.price_rec_special, e.price_med_special
      FROM crawl_runs cr
     CROSS JOIN (
            SELECT r.id, t.type, CASE WHEN t.type = 'price_changed' THEN r.old_rec END AS rec_old,
                   CASE WHEN t.type = 'price_changed' THEN r.old_med END AS med_old,
                   r.price_rec, r.price_med, r.price_rec_special, r.price_med_special
              FROM changed r
             CROSS JOIN LATERAL (VALUES
                    ('listed', r.old_special IS NULL),
                    ('back_in_stock', r.old_oos_since IS NOT NULL),
                    ('price_changed', r.old_special IS NOT NULL
                        AND (r.old_rec IS DISTINCT FROM r.price_rec OR r.old_med IS DISTINCT FROM r.price_med)),
                    ('special_started', r.old_special IS NOT NULL AND r.is_on_special AND NOT r.old_special),
                    ('special_ended', r.old_special IS NOT NULL AND NOT r.is_on_special AND r.old_special)
                   ) AS t(type, happened)
             WHERE t.happened
            UNION ALL
            SELECT m.id, 'out_of_stock', NULL, NULL, m.price_rec, m.price_med, m.price_rec_special,
                   m.price_med_special
              FROM went_oos m) e
     WHERE cr.id = %(run)s
    ON CONFLICT ON CONSTRAINT product_events_once DO NOTHING
    RETURNING 1),
store AS (  -- an empty menu is the store's state from its first empty crawl until a menu returns
    UPDATE dispensaries
       SET last_crawl_at = now(), updated_at = now(),
           menu_empty_since = CASE WHEN %(empty)s
               THEN coalesce(menu_empty_since, (SELECT started_at FROM crawl_runs WHERE id = %(run)s)) END
     WHERE id = %(d)s AND (SELECT live FROM verdict) RETURNING 1),
store_event AS (  -- one when the menu empties, one when it returns: never one per empty crawl
    INSERT INTO store_events (occurred_at, crawl_run_id, dispensary_id, type, products)
    SELECT cr.started_at, cr.id, %(d)s, CASE WHEN v.empty THEN 'menu_emptied' ELSE 'menu_returned' END,
           CASE WHEN v.empty THEN v.in_stock ELSE %(seen_n)s END
      FROM crawl_runs cr CROSS JOIN verdict v
     WHERE cr.id = %(run)s AND v.live
       AND v.empty = ((SELECT menu_empty_since FROM store_was) IS NULL)
    ON CONFLICT ON CONSTRAINT store_events_once DO NOTHING
    RETURNING type),
run AS (
    UPDATE crawl_runs
       SET status = 'complete', finished_at = now(),
           duration_ms = (extract(epoch FROM now() - started_at) * 1000)::integer,
           pages_fetched = %(pages)s, products_seen = %(seen_n)s, products_new = %(new)s,
           products_missed = (SELECT count(*) FROM missed WHERE counted),
           products_marked_oos = (SELECT count(*) FROM missed WHERE counted AND consecutive_misses >= %(limit)s),
           errors = %(errors)s, error = NULL,
           suspect = v.suspect, suspect_streak = v.streak, empty = v.empty,
           suspect_reason = CASE WHEN v.suspect THEN
               'saw ' || v.seen_in_stock || ' of the ' || v.in_stock || ' products in stock before this crawl '
               || '(below OOS_GUARD_MIN_SHARE = ' || %(min_share)s::float8 || '): '
               || CASE WHEN v.confirmed THEN
                      'suspect crawl ' || v.streak || ' in a row, which confirms the collapse: the misses of the '
                      || v.streak || ' crawls count, '
                      || (SELECT count(*) FROM missed WHERE counted AND consecutive_misses >= %(limit)s)
                      || ' products marked out of stock; the next crawl is judged against this menu'
                  ELSE 'no product counted missing (suspect crawl ' || v.streak || ' of the ' || %(limit)s
                      || ' in a row that confirm a collapse)' END
           END
      FROM verdict v
     WHERE id = %(run)s AND v.live
    RETURNING 1)
SELECT (SELECT count(*) FROM missed WHERE counted),
       (SELECT count(*) FROM missed WHERE counted AND consecutive_misses >= %(limit)s),
       (SELECT count(*) FROM reset), (SELECT count(*) FROM store), (SELECT count(*) FROM run),
       v.suspect, v.seen_in_stock, v.in_stock, v.streak, v.confirmed, (SELECT count(*) FROM events),
       (SELECT count(*) FROM moved_on) + (SELECT count(*) FROM oos_opened),
       v.empty, (SELECT type FROM store_event),
       coalesce((SELECT menu_empty_since FROM store_was),
                CASE WHEN v.empty THEN (SELECT started_at FROM crawl_runs WHERE id = %(run)s) END)
  FROM verdict v
"""
CLOSE_INCOMPLETE = """
UPDATE crawl_runs
   SET status = 'incomplete', finished_at = now(),
       duration_ms = (extract(epoch FROM now() - started_at) * 1000)::integer,
       pages_fetched = %(pages)s, products_seen = %(seen_n)s, products_new = %(new)s,
       errors = %(errors)s, error = %(error)s
 WHERE id = %(run)s AND status = 'running'  -- a run already closed (failed: its lease expired) stays so
"""


# -- what the close goes by, and what it concluded ---------------------------------------------------
# The spider hands the close a StoreOutcome: what the crawl learned. The close's transaction answers
# with a StoreVerdict: complete or incomplete, and for a complete crawl whether its menu was empty,
# whether the OOS guard found it suspect and whether the suspect crawls in a row confirm a collapse
# (the SQL above decides all three).


@dataclass
class StoreOutcome:
    """What a store's crawl learned, for its close."""

    dispensary_id: int
    crawl_run_id: int | None
    complete: bool
    products_yielded: int
    pages_fetched: int
    seen_product_ids: list[str] = field(default_factory=list, repr=False)
    errors: int = 0
    error: str | None = None
    task: Task | None = field(default=None, repr=False)  # the queue's task this crawl did, if any


@dataclass
class StoreVerdict:
    """What a store's close recorded. `figures` are the close statement's parameters, with the
    misses and 'oos' the statement counted (0 unless the crawl was recorded complete)."""

    complete: bool
    error: str | None
    figures: dict[str, Any]
    suspect: bool = False
    confirmed: bool = False  # the suspect crawl that confirms a collapse
    seen_in_stock: int = 0
    in_stock: int = 0
    streak: int = 0
    events: int = 0
    # an empty menu (complete, no product seen): no miss counted, the store's state recorded instead
    empty: bool = False
    store_event: str | None = None  # 'menu_emptied' / 'menu_returned' when this crawl wrote one
    empty_since: datetime | None = None  # the store's menu empty since (this crawl's, or the state it ended)
    # the crawl's task was lost or its run closed already: nothing recorded, and its task is not
    # ours to fail either
    lost: bool = False


# -- the transaction -----------------------------------------------------------------------------


class RunClosed(Exception):
    """The store's run was closed already (failed by the queue, closed by a stop): its close
    records nothing (the statement changed nothing; the transaction rolls back the task's part)."""


def close_figures(
    item: StoreOutcome, ledger: RunLedger | None, error: str | None, min_share: float, events: bool
) -> dict[str, Any]:
    """The close statement's parameters."""
    return {
        "d": item.dispensary_id,
        "seen": orjson.dumps(item.seen_product_ids).decode(),
        "limit": OOS_AFTER_MISSES,
        "run": item.crawl_run_id,
        "pages": item.pages_fetched,
        "seen_n": len(item.seen_product_ids),
        # a complete crawl that saw no product: an empty menu, no evidence (migrations/025_empty_menus.sql)
        "empty": not item.seen_product_ids,
        "new": ledger.inserted if ledger else 0,
        "errors": item.errors + (ledger.refused if ledger else 0),  # rows refused for their values count too
        "missed": 0,
        "oos": 0,
        "error": error,
        "min_share": min_share,
        "events": events,
    }


def task_result(item: StoreOutcome, figures: dict[str, Any]) -> TaskResult:
    return TaskResult(
        pages=item.pages_fetched,
        products=figures["seen_n"],
        new=figures["new"],
        missed=figures["missed"],
        oos=figures["oos"],
        crawl_run_id=item.crawl_run_id,
    )


async def record_close(
    pool: AsyncConnectionPool,
    item: StoreOutcome,
    figures: dict[str, Any],
    complete: bool,
    error: str | None,
    drain: TaskDrain | None,
) -> StoreVerdict:
    """Record the store's close (and complete its task, if it is complete and has one)."""
    verdict = StoreVerdict(complete, error, figures)
    async with pool.connection() as conn:
        if complete:
            try:
                async with conn.transaction():
                    if drain is not None and item.task is not None:
                        # the lease first: a crawl whose task is no longer ours records nothing
                        await queue.check_lease(conn, drain.lease(item.task))
                    row = await (await conn.execute(CLOSE_COMPLETE, figures)).fetchone()
                    assert row is not None  # the statement always returns its one row of figures
                    figures["missed"], figures["oos"] = row[0], row[1]
                    (
                        verdict.suspect,
                        verdict.seen_in_stock,
                        verdict.in_stock,
                        verdict.streak,
                        verdict.confirmed,
                        verdict.events,
                    ) = row[5:11]
                    verdict.empty, verdict.store_event, verdict.empty_since = row[12:15]
                    if not row[4]:
                        raise RunClosed(f"crawl run {item.crawl_run_id} is no longer running")
                    if drain is not None and item.task is not None:
                        await drain.complete(item.task, task_result(item, figures), conn=conn)
            except (LeaseLost, RunClosed) as exc:
                lost = "task was lost" if isinstance(exc, LeaseLost) else "run was closed already"
                error = f"the crawl's {lost} ({exc}): nothing recorded"
                verdict = StoreVerdict(False, error, figures, lost=True)
                figures["error"], figures["missed"], figures["oos"] = error, 0, 0
                await conn.execute(CLOSE_INCOMPLETE, figures)
        elif item.crawl_run_id is not None:
            await conn.execute(CLOSE_INCOMPLETE, figures)
    return verdict


# -- the report --------------------------------------------------------------------------------------
# A suspect crawl gets a warning either way: it looks complete, so without one an emptied menu or a
# broken feed would pass unnoticed, and the operator needs the share and the streak to judge it (the
# warning says how to accept a menu that really collapsed). An empty menu gets one too: it marks
# nothing, and a store whose menu went dark, or an API change that empties every store, must not pass
# unnoticed either (the crawl-health checks "no store menu empty" and "no fleet-wide emptying" read
# what the close recorded: docs/health.md).


def report_close(stats: StatsCollector, item: StoreOutcome, verdict: StoreVerdict, min_share: float) -> None:
    figures = verdict.figures
    stats.inc_value("cannaspider/stores_complete" if verdict.complete else "cannaspider/stores_incomplete")
    if not verdict.complete:
        stats.inc_value(UNITS_INCOMPLETE_STAT)
    if verdict.events:
        stats.inc_value("cannaspider/product_events", verdict.events)
    if verdict.store_event == "menu_returned":
        stats.inc_value("cannaspider/stores_menu_returned")
        since = verdict.empty_since.isoformat(timespec="seconds") if verdict.empty_since else "?"
        logger.info("dispensary %s: its menu returned (empty since %s)", item.dispensary_id, since)
    if verdict.empty:
        stats.inc_value("cannaspider/stores_empty")
        if verdict.store_event == "menu_emptied":
            stats.inc_value("cannaspider/stores_menu_emptied")
        since = verdict.empty_since.isoformat(timespec="seconds") if verdict.empty_since else "now"
        logger.warning(
            "dispensary %s: crawl complete but its menu is EMPTY (no product, totalCount 0) since %s: "
            "no product counted missing, the stock of its %d products in stock left as it was",
            item.dispensary_id,
            since,
            verdict.in_stock,
        )
    elif verdict.suspect:
        stats.inc_value("cannaspider/stores_suspect")
        if verdict.confirmed:
            stats.inc_value("cannaspider/stores_collapse_confirmed")
            logger.warning(
                "dispensary %s: crawl complete but SUSPECT: it saw %d of the %d products in stock before it "
                "(below OOS_GUARD_MIN_SHARE = %g), suspect crawl %d in a row: the collapse is confirmed, "
                "%d products missing from these crawls marked oos",
                item.dispensary_id,
                verdict.seen_in_stock,
                verdict.in_stock,
                min_share,
                verdict.streak,
                figures["oos"],
            )
        else:
            logger.warning(
                "dispensary %s: crawl complete but SUSPECT: it saw %d of the %d products in stock before it "
                "(below OOS_GUARD_MIN_SHARE = %g): counted none missing (suspect crawl %d of the %d in a row "
                "that confirm a collapse); if the store really dropped most of its menu, crawl it again with "
                "-s OOS_GUARD_MIN_SHARE=0",
                item.dispensary_id,
                verdict.seen_in_stock,
                verdict.in_stock,
                min_share,
                verdict.streak,
                OOS_AFTER_MISSES,
            )
    elif verdict.complete:
        logger.info(
            "dispensary %s: crawl complete: %d products, %d new, %d missed, %d marked oos",
            item.dispensary_id,
            figures["seen_n"],
            figures["new"],
            figures["missed"],
            figures["oos"],
        )
    else:
        logger.warning(
            "dispensary %s: crawl INCOMPLETE (%s): stored %d products, marked none missing",
            item.dispensary_id,
            verdict.error,
            figures["seen_n"],
        )


# -- the component ------------------------------------------------------------------------------------


class CrawlClose:
    def __init__(self, crawler: Crawler):
        self.crawler = crawler
        self.wait_timeout = crawler.settings.getfloat("CRAWL_COMPLETION_WAIT_S")
        self.batch_grace = crawler.settings.getfloat("CRAWL_COMPLETION_BATCH_GRACE_S")
        self.oos_guard_min_share = crawler.settings.getfloat("OOS_GUARD_MIN_SHARE")
        self.events = crawler.settings.getbool("PRODUCT_EVENTS_ENABLED")
        if not 0 <= self.oos_guard_min_share <= 1:
            raise ValueError(f"OOS_GUARD_MIN_SHARE must be within [0, 1], got {self.oos_guard_min_share}")
        self.closing = 0  # closes in progress
        self._flushes: set[asyncio.Future[None]] = set()

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> CrawlClose:
        """A Scrapy extension (EXTENSIONS, settings.py): its settings checked when the crawler is built."""
        close = cls(crawler)
        crawler.signals.connect(close.spider_idle, signal=signals.spider_idle)
        return close

    @classmethod
    def for_crawler(cls, crawler: Crawler) -> CrawlClose:
        """The crawler's store close."""
        return extension(crawler, cls)

    @property
    def database(self) -> CrawlDatabase:
        # found at run time: an extension cannot look another up while the manager builds them
        return CrawlDatabase.for_crawler(self.crawler)

    def _stopped(self) -> bool:
        """The crawl was stopped (SIGTERM, Scrapyd's cancel): Crawler.stop_async clears `crawling`
        before it closes the engine (a crawl that finishes is still `crawling` while it closes)."""
        try:
            engine = self.crawler.engine
        except RuntimeError:  # not crawling at all (a close driven directly, as in tests)
            return False
        return engine is not None and not self.crawler.crawling

    def _crawl_is_draining(self) -> bool:
        """No request left to download or schedule: no batch will fill up any more."""
        try:
            engine = self.crawler.engine
        except RuntimeError:  # not crawling (a close driven directly, as in tests)
            return True
        scheduler = engine.scheduler  # public since Scrapy 2.19; None before the spider opens
        if scheduler is None:
            return True
        return not engine.downloader.active and not scheduler.has_pending_requests()

    async def close(self, item: StoreOutcome) -> None:
        """Close the store's crawl run (and its task); never raises (a failure is logged and fails
        the task, whose lease otherwise expires and puts it back in the queue)."""
        self.closing += 1
        try:
            await self._apply(item)
        except OUTAGE_ERRORS as exc:  # the database is down: one line, the store's close says the rest
            logger.error(
                "dispensary %s: could not close crawl run %s, the database is unavailable: %s (the run stays "
                "'running' until the next crawl marks it failed; nothing was marked missing)",
                item.dispensary_id,
                item.crawl_run_id,
                first_line(exc),
            )
            await self._fail_task(item, f"closing the crawl failed: {first_line(exc)}")
        except Exception as exc:
            logger.exception(
                "dispensary %s: could not close crawl run %s (it stays 'running' until the next "
                "crawl process marks it abandoned)",
                item.dispensary_id,
                item.crawl_run_id,
            )
            await self._fail_task(item, f"closing the crawl failed: {type(exc).__name__}: {first_line(exc)}")
        finally:
            self.closing -= 1

    def _drain(self, item: StoreOutcome) -> TaskDrain | None:
        if item.task is None:
            return None
        drain = TaskDrain.of(self.crawler)
        if drain is None:  # a task without the drain that claimed it: nothing can be recorded for it
            logger.error("task %s: no task drain in this crawl: its outcome is not recorded", item.task.id)
        return drain

    async def _fail_task(self, item: StoreOutcome, error: str) -> None:
        """Fail the crawl's task, if it has one (retried after a backoff). Never raises: a task whose
        outcome cannot be written is left to its lease, which expires and puts it back in the queue."""
        drain = self._drain(item)
        if drain is None or item.task is None:
            return
        try:
            await drain.fail(item.task, error, item.crawl_run_id)
        except LeaseLost as exc:
            logger.warning("dispensary %s: %s: the failure is not recorded", item.dispensary_id, exc)
        except Exception as exc:  # noqa: BLE001 - see the docstring
            logger.error(
                "dispensary %s: task %s: could not record its failure (%s): it returns to the queue when its lease "
                "expires",
                item.dispensary_id,
                item.task.id,
                first_line(exc),
            )

    async def _wait_committed(self, key: tuple[Any, ...]) -> bool:
        """Until the store's rows are committed. Batches fill up with other stores' rows while the
        crawl is busy; when it goes idle (spider_idle, see spider_idle()) or after a grace period,
        the buffers are flushed early."""
        if self._crawl_is_draining():
            await self.database.ledger.flush_all()
        if await self.database.ledger.wait_written(key, self.batch_grace):
            return True
        await self.database.ledger.flush_all()
        return await self.database.ledger.wait_written(key, self.wait_timeout)

    def spider_idle(self) -> None:
        # Nothing left to download: no batch will fill up any more, so stores waiting for their
        # rows get them written now. (spider_idle handlers cannot be coroutines: schedule it.)
        if self.closing:
            flush = asyncio.ensure_future(self.database.ledger.flush_all())
            self._flushes.add(flush)
            flush.add_done_callback(self._flushed)

    def _flushed(self, flush: asyncio.Future[None]) -> None:
        self._flushes.discard(flush)
        # An outage is logged by the writer, which keeps its rows for the next flush. spider_idle
        # comes again while the lifecycle keeps the spider open: each failed flush must not end as
        # an unretrieved task's traceback.
        if not flush.cancelled():
            flush.exception()

    async def _apply(self, item: StoreOutcome) -> None:
        key = (item.dispensary_id, item.crawl_run_id)
        complete, error = item.complete, item.error
        if not self.database.ledger.products_writer:
            # pipelines switched off (`-s ITEM_PIPELINES={}`, the ingest benchmark's ceiling): no row
            # was written, so nothing may be concluded from the store's rows, and none will come to
            # wait CRAWL_COMPLETION_WAIT_S for
            complete, error = False, "no product writer in ITEM_PIPELINES: the store's products were not written"
        elif not await self.database.ledger.wait_accounted(key, item.products_yielded, self.wait_timeout):
            complete = False
            error = f"only {self.database.ledger.runs[key].accounted} of {item.products_yielded} products were written"
        try:
            if self.database.ledger.products_writer and not await self._wait_committed(key):
                complete, error = False, "the store's products were not all committed in time"
        except psycopg.Error as exc:
            complete, error = False, f"writing products failed: {first_line(exc)}"
        except DatabaseSetupError as exc:
            complete, error = False, f"writing products failed: {exc}"
        if key in self.database.ledger.failed_runs:
            complete, error = False, self.database.ledger.failed_runs.pop(key)
        ledger = self.database.ledger.runs.pop(key, None)
        if complete and ledger is not None and ledger.refused:  # never a complete run with rows lost
            complete = False
            error = f"{ledger.refused} of this store's rows were not stored: {ledger.refused_reason}"
        figures = close_figures(item, ledger, error, self.oos_guard_min_share, self.events)
        drain = self._drain(item)
        pool = await self.database.open()
        verdict = await record_close(pool, item, figures, complete, error, drain)
        self.database.runs.forget(item.crawl_run_id)
        # a stopped crawl's task goes back to the queue uncounted (the lifecycle releases it)
        if (
            not verdict.complete
            and not verdict.lost
            and drain is not None
            and item.task is not None
            and not self._stopped()
        ):
            await self._fail_task(item, f"crawl incomplete: {verdict.error}")
        report_close(self.crawler.stats, item, verdict, self.oos_guard_min_share)
