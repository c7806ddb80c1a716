"""Closes a store's crawl. Only a complete crawl (every page arrived and parsed) applies the
seed's out-of-stock rules: misses reset for products in the feed, +1 for the others (up to 3),
'oos' at 3, unless the OOS guard finds the crawl suspect (see CLOSE_COMPLETE); it also sets
dispensaries.last_crawl_at. An incomplete crawl keeps what it stored,
marks nothing missing, and records why. Either way the crawl_runs row gets its figures.

A crawl that does a queue task (a draining spider: CrawlCompletion.task) completes the task in
the very transaction that applies misses/OOS, after checking the task's lease: a crawl whose
lease expired (its task went back to the queue, maybe to another worker) rolls back and marks
nothing. An incomplete crawl fails its task, which retries after a backoff (docs/operations.md).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import orjson
import psycopg
from scrapy import signals
from scrapy.crawler import Crawler
from scrapy.exceptions import DropItem

from cannaspider.db.crawl_store import UNITS_INCOMPLETE_STAT, CrawlStore
from cannaspider.db.errors import DatabaseSetupError, first_line
from cannaspider.items import CrawlCompletion
from cannaspider.pipelines.batch_writer import OUTAGE_ERRORS
from cannaspider.tasks import queue
from cannaspider.tasks.drain import TaskDrain
from cannaspider.tasks.queue import LeaseLost, TaskResult

logger = logging.getLogger(__name__)

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
# streak of suspect crawls (suspect_streak, from the previous complete run). The %(limit)s-th suspect
# crawl in a row confirms the collapse: the misses of the whole streak count (a product missing
# from all three reaches 3 and is 'oos'), the streak ends, and the next crawl is judged against the
# menu that is left. A crawl that is not suspect ends a streak too, discarding its suspect misses:
# a collapse of one or two crawls marks nothing.
# Events (migrations/014_product_events.sql, docs/analytics.md "Events"): the same statement writes
# one product_events row per change, judged against the state the product had at the last crawl
# that wrote events (product_event_state, which only this statement writes: no lock taken on
# store_products rows that the image pipeline updates; the writer's upsert has overwritten those
# rows by now). A crawl that is not suspect writes them all; a suspect one only what it concludes,
# the out_of_stock of a confirmed collapse, and leaves the other changes for the next crawl to
# report. ON CONFLICT: a run's events exist once, whatever retries its close.
CLOSE_COMPLETE = """
WITH seen AS MATERIALIZED (SELECT jsonb_array_elements_text(%(seen)s::jsonb) AS id),
guard AS MATERIALIZED (
    SELECT count(*) AS in_stock,
           count(*) FILTER (WHERE provider_product_id IN (SELECT id FROM seen)) AS seen_in_stock
      FROM store_products
     WHERE dispensary_id = %(d)s AND provider = 'dutchie' AND stock_status = 'in_stock'
       AND first_seen_at < coalesce((SELECT started_at FROM crawl_runs WHERE id = %(run)s), now())),
previous AS MATERIALIZED (  -- the store's last complete crawl before this one
    SELECT suspect, suspect_streak FROM crawl_runs
     WHERE dispensary_id = %(d)s AND status = 'complete' AND id <> %(run)s
       AND started_at <= coalesce((SELECT started_at FROM crawl_runs WHERE id = %(run)s), now())
     ORDER BY started_at DESC LIMIT 1),
judged AS MATERIALIZED (
    SELECT %(min_share)s::float8 > 0 AND in_stock > 0
           AND seen_in_stock < %(min_share)s::float8 * in_stock AS suspect, in_stock, seen_in_stock
      FROM guard),
verdict AS MATERIALIZED (
    SELECT j.*, s.streak, coalesce(s.streak >= %(limit)s, false) AS confirmed,
           NOT j.suspect OR coalesce(s.streak >= %(limit)s, false) AS counts,
           %(events)s AND NOT j.suspect AS writes_events, %(events)s::boolean AS writes_oos
      FROM judged j
     CROSS JOIN LATERAL (
            SELECT CASE WHEN j.suspect THEN 1 + coalesce(
                       (SELECT p.suspect_streak FROM previous p
                         WHERE p.suspect AND p.suspect_streak BETWEEN 1 AND %(limit)s - 1), 0) END AS streak) s),
reset AS (
    UPDATE store_products
       SET consecutive_misses = 0, suspect_misses = 0, last_seen_at = now(), is_in_stock = true,
           stock_status = 'in_stock'
     WHERE dispensary_id = %(d)s AND provider = 'dutchie' AND provider_product_id IN (SELECT id FROM seen)
       AND (consecutive_misses <> 0 OR suspect_misses <> 0 OR stock_status <> 'in_stock')
    RETURNING 1),
changed AS MATERIALIZED (  -- seen products whose state differs from the last event-writing crawl's
    SELECT sp.id, sp.price_rec, sp.price_med, sp.price_rec_special, sp.price_med_special, sp.is_on_special,
           es.price_rec AS old_rec, es.price_med AS old_med, es.is_on_special AS old_special,
           es.oos_since AS old_oos_since
      FROM store_products sp
      LEFT JOIN product_event_state es ON es.store_product_id = sp.id
     WHERE sp.dispensary_id = %(d)s AND sp.provider = 'dutchie' AND sp.provider_product_id IN (SELECT id FROM seen)
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
               ELSE least(%(limit)s, consecutive_misses + 1 + CASE WHEN v.confirmed THEN suspect_misses ELSE 0 END) END,
           suspect_misses = CASE WHEN v.counts THEN 0 ELSE suspect_misses + 1 END,
           stock_status = CASE WHEN v.counts AND consecutive_misses + 1
                   + CASE WHEN v.confirmed THEN suspect_misses ELSE 0 END >= %(limit)s THEN 'oos'
               ELSE stock_status END,
           is_in_stock = CASE WHEN v.counts AND consecutive_misses + 1
                   + CASE WHEN v.confirmed THEN suspect_misses ELSE 0 END >= %(limit)s THEN false
               ELSE is_in_stock END,
           updated_at = now()
      FROM verdict v
     WHERE dispensary_id = %(d)s AND provider = 'dutchie' AND provider_product_id NOT IN (SELECT id FROM seen)
       AND consecutive_misses < %(limit)s
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
store AS (
    UPDATE dispensaries SET last_crawl_at = now(), updated_at = now() WHERE id = %(d)s RETURNING 1),
run AS (
    UPDATE crawl_runs
       SET status = 'complete', finished_at = now(),
           duration_ms = (extract(epoch FROM now() - started_at) * 1000)::integer,
           pages_fetched = %(pages)s, products_seen = %(seen_n)s, products_new = %(new)s,
           products_missed = (SELECT count(*) FROM missed WHERE counted),
           products_marked_oos = (SELECT count(*) FROM missed WHERE counted AND consecutive_misses >= %(limit)s),
           errors = %(errors)s, error = NULL,
           suspect = v.suspect, suspect_streak = v.streak,
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
     WHERE id = %(run)s
    RETURNING 1)
SELECT (SELECT count(*) FROM missed WHERE counted),
       (SELECT count(*) FROM missed WHERE counted AND consecutive_misses >= %(limit)s),
       (SELECT count(*) FROM reset), (SELECT count(*) FROM store), (SELECT count(*) FROM run),
       v.suspect, v.seen_in_stock, v.in_stock, v.streak, v.confirmed, (SELECT count(*) FROM events),
       (SELECT count(*) FROM moved_on) + (SELECT count(*) FROM oos_opened)
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


class CrawlCompletionPipeline:
    def __init__(self, crawler: Crawler):
        self.crawler = crawler
        self.store = CrawlStore.for_crawler(crawler)
        self.wait_timeout = crawler.settings.getfloat("CRAWL_COMPLETION_WAIT_S")
        self.batch_grace = crawler.settings.getfloat("CRAWL_COMPLETION_BATCH_GRACE_S")
        self.pending: set[asyncio.Future[None]] = set()
        self.oos_guard_min_share = crawler.settings.getfloat("OOS_GUARD_MIN_SHARE")
        self.events = crawler.settings.getbool("PRODUCT_EVENTS_ENABLED")
        if not 0 <= self.oos_guard_min_share <= 1:
            raise ValueError(f"OOS_GUARD_MIN_SHARE must be within [0, 1], got {self.oos_guard_min_share}")

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> CrawlCompletionPipeline:
        pipeline = cls(crawler)
        crawler.signals.connect(pipeline.spider_idle, signal=signals.spider_idle)
        return pipeline

    def _crawl_is_draining(self) -> bool:
        """No request left to download or schedule: no batch will fill up any more."""
        try:
            engine = self.crawler.engine
        except RuntimeError:  # not crawling (a pipeline driven directly, as in tests)
            return True
        scheduler = engine.scheduler  # public since Scrapy 2.19; None before the spider opens
        if scheduler is None:
            return True
        return not engine.downloader.active and not scheduler.has_pending_requests()

    def process_item(self, item: Any) -> Any:
        if not isinstance(item, CrawlCompletion):
            return item
        # Closing a store waits for its rows to be committed; doing that inline would hold the
        # response's slot in the scraper and stall downloads, so it runs beside the crawl.
        task = asyncio.ensure_future(self._close_store(item))
        self.pending.add(task)
        task.add_done_callback(self.pending.discard)
        # a control message, not data: keep it out of feeds (which `-O` would otherwise fill with it)
        raise DropItem(f"dispensary {item.dispensary_id}: crawl closing", log_level="DEBUG")

    async def close_spider(self) -> None:
        while self.pending:
            await asyncio.gather(*list(self.pending), return_exceptions=True)

    async def _close_store(self, item: CrawlCompletion) -> None:
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

    def _drain(self, item: CrawlCompletion) -> TaskDrain | None:
        if item.task is None:
            return None
        drain = TaskDrain.of(self.crawler)
        if drain is None:  # a task without the drain that claimed it: nothing can be recorded for it
            logger.error("task %s: no task drain in this crawl: its outcome is not recorded", item.task.id)
        return drain

    async def _fail_task(self, item: CrawlCompletion, error: str) -> None:
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
            await self.store.flush_all()
        if await self.store.wait_written(key, self.batch_grace):
            return True
        await self.store.flush_all()
        return await self.store.wait_written(key, self.wait_timeout)

    @staticmethod
    def _result(item: CrawlCompletion, figures: dict[str, Any]) -> TaskResult:
        return TaskResult(
            pages=item.pages_fetched,
            products=figures["seen_n"],
            new=figures["new"],
            missed=figures["missed"],
            oos=figures["oos"],
            crawl_run_id=item.crawl_run_id,
        )

    def spider_idle(self) -> None:
        # Nothing left to download: no batch will fill up any more, so stores waiting for their
        # rows get them written now. (spider_idle handlers cannot be coroutines: schedule it.)
        if self.pending:
            flush = asyncio.ensure_future(self.store.flush_all())
            self.pending.add(flush)
            flush.add_done_callback(self._flushed)

    def _flushed(self, flush: asyncio.Future[None]) -> None:
        self.pending.discard(flush)
        # An outage is logged by the writer, which keeps its rows for the next flush. spider_idle
        # comes again while another component keeps the spider open (the image downloads): each
        # failed flush must not end as an unretrieved task's traceback.
        if not flush.cancelled():
            flush.exception()

    async def _apply(self, item: CrawlCompletion) -> None:
        key = (item.dispensary_id, item.crawl_run_id)
        complete, error = item.complete, item.error
        if not await self.store.wait_accounted(key, item.products_yielded, self.wait_timeout):
            complete = False
            error = f"only {self.store.ledgers[key].accounted} of {item.products_yielded} products were written"
        try:
            if not await self._wait_committed(key):
                complete, error = False, "the store's products were not all committed in time"
        except psycopg.Error as exc:
            complete, error = False, f"writing products failed: {first_line(exc)}"
        except DatabaseSetupError as exc:
            complete, error = False, f"writing products failed: {exc}"
        if key in self.store.failed_runs:
            complete, error = False, "a batch of this store's rows was refused by the database"
            self.store.failed_runs.discard(key)
        ledger = self.store.ledgers.pop(key, None)
        figures = {
            "d": item.dispensary_id,
            "seen": orjson.dumps(item.seen_product_ids).decode(),
            "limit": OOS_AFTER_MISSES,
            "run": item.crawl_run_id,
            "pages": item.pages_fetched,
            "seen_n": len(item.seen_product_ids),
            "new": ledger.inserted if ledger else 0,
            "errors": item.errors + (ledger.refused if ledger else 0),  # rows refused for their values count too
            "missed": 0,
            "oos": 0,
            "error": error,
            "min_share": self.oos_guard_min_share,
            "events": self.events,
        }
        suspect = confirmed = False
        events = 0
        drain = self._drain(item)
        pool = await self.store.open()
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
                        suspect, seen_in_stock, in_stock, streak, confirmed, events = row[5:11]
                        if drain is not None and item.task is not None:
                            await drain.complete(item.task, self._result(item, figures), conn=conn)
                except LeaseLost as exc:
                    complete, error = False, f"the crawl's task was lost ({exc}): nothing recorded"
                    figures["error"], figures["missed"], figures["oos"] = error, 0, 0
                    suspect = confirmed = False
                    events = 0
                    await conn.execute(CLOSE_INCOMPLETE, figures)
                    drain = None  # not ours to fail either
            elif item.crawl_run_id is not None:
                await conn.execute(CLOSE_INCOMPLETE, figures)
        if not complete and drain is not None and item.task is not None:
            await self._fail_task(item, f"crawl incomplete: {error}")
        stats = self.crawler.stats
        stats.inc_value("cannaspider/stores_complete" if complete else "cannaspider/stores_incomplete")
        if not complete:
            stats.inc_value(UNITS_INCOMPLETE_STAT)
        if events:
            stats.inc_value("cannaspider/product_events", events)
        if suspect:
            stats.inc_value("cannaspider/stores_suspect")
            if confirmed:
                stats.inc_value("cannaspider/stores_collapse_confirmed")
                logger.warning(
                    "dispensary %s: crawl complete but SUSPECT: it saw %d of the %d products in stock before it "
                    "(below OOS_GUARD_MIN_SHARE = %g), suspect crawl %d in a row: the collapse is confirmed, "
                    "%d products missing from these crawls marked oos",
                    item.dispensary_id,
                    seen_in_stock,
                    in_stock,
                    self.oos_guard_min_share,
                    streak,
                    figures["oos"],
                )
            else:
                logger.warning(
                    "dispensary %s: crawl complete but SUSPECT: it saw %d of the %d products in stock before it "
                    "(below OOS_GUARD_MIN_SHARE = %g): counted none missing (suspect crawl %d of the %d in a row "
                    "that confirm a collapse); if the store really emptied its menu, crawl it again with "
                    "-s OOS_GUARD_MIN_SHARE=0",
                    item.dispensary_id,
                    seen_in_stock,
                    in_stock,
                    self.oos_guard_min_share,
                    streak,
                    OOS_AFTER_MISSES,
                )
        elif complete:
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
                error,
                figures["seen_n"],
            )
