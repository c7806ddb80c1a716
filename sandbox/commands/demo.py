"""`scrapy demo`: the whole chain against the sandbox, end to end, on both platforms (Dutchie and Jane).

It runs in a database of its own (`--database`, default cannaspider_demo, on DATABASE_URL's
server or the embedded one), dropped and created anew each run: a second run prints the same
figures as the first, and no crawl of an operator's database is touched.

migrate → sandbox → store_discovery (each platform) → entry_point_discovery → a month of product
crawls (product_discovery on day 1, product_resync on each of the 29 days after, the sandbox's
menus moving from day to day: sandbox/month.py) → the analytics refresh → a JSON feed (the last
day's menus) and a summary: each figure per platform, the month's events, the market's 4-week
change and movers as the dashboard shows them, and the store that collapsed. The chain and the
month run in one process with a clock of the demo's own: sandbox/demo_month.py says how and why.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import subprocess
import sys
from pathlib import Path

import psycopg
from psycopg import sql
from scrapy.exceptions import UsageError

from cannaspider.command_base import CannaspiderCommand
from cannaspider.db import connect, database_url, migrations
from cannaspider.db.connection import with_dbname
from cannaspider.db.errors import redact
from cannaspider.images.backends import images_store_uri
from sandbox import month
from sandbox.catalog import CatalogConfig
from sandbox.pool_rows import sandbox_proxy_row

DEMO_PROXY_USER = "cannaspider-demo"
# the summary's figures per platform: stores, products, in stock, out of stock, complete runs
PER_PLATFORM = """
SELECT d.platform, count(DISTINCT d.id), count(sp.id), count(sp.id) FILTER (WHERE sp.is_in_stock),
       count(sp.id) FILTER (WHERE sp.stock_status = 'oos'),
       (SELECT count(*) FROM crawl_runs r JOIN dispensaries rd ON rd.id = r.dispensary_id
         WHERE rd.platform = d.platform AND rd.state = %(state)s AND r.status = 'complete')
  FROM dispensaries d LEFT JOIN store_products sp ON sp.dispensary_id = d.id
 WHERE d.state = %(state)s
 GROUP BY d.platform ORDER BY d.platform
"""
DEMO_DATABASE = "cannaspider_demo"
COMPARE_DAYS = 28  # the dashboard's 4-week change (cannaspider/web/dashboard.py, HISTORY_DAYS)
# the month's days with a complete product crawl of every store, and its events by type
MONTH = """
SELECT min(day), max(day), count(*) FROM (
    SELECT (r.started_at AT TIME ZONE 'UTC')::date AS day FROM crawl_runs r
     WHERE r.status = 'complete' GROUP BY 1
    HAVING count(DISTINCT r.dispensary_id) = (SELECT count(*) FROM dispensaries WHERE state = %s)) d
"""
EVENTS = "SELECT type, count(*) FROM product_events GROUP BY 1"
EVENT_TYPES = ("listed", "price_changed", "special_started", "special_ended", "out_of_stock", "back_in_stock")
# each store that collapsed (suspect crawls, the OOS guard's: docs/architecture.md), and the
# products marked out of stock there from its first suspect crawl to the day after its last
COLLAPSES = """
SELECT d.name, count(*) AS suspect_days, min(r.started_at)::date AS first_day, max(r.started_at)::date AS last_day,
       max(r.products_seen),
       (SELECT count(*) FROM product_events e
         WHERE e.dispensary_id = d.id AND e.type = 'out_of_stock'
           AND e.occurred_at >= min(r.started_at) AND e.occurred_at < max(r.started_at) + interval '2 days')
  FROM crawl_runs r JOIN dispensaries d ON d.id = r.dispensary_id
 WHERE r.suspect AND d.state = %s
 GROUP BY d.id, d.name ORDER BY d.name
"""


def demo_catalog(state: str) -> CatalogConfig:
    """The demo's sandbox: 8 Dutchie stores and 4 Jane stores in the state, 40 to 100 products
    each (a third of the catalog's default: 30 days of crawls of the default menus took three times as long)."""
    return CatalogConfig(states=(state,), stores_per_state=8, min_products=40, max_products=100)


def fresh_database(server_url: str, name: str) -> str:
    """`name` on the server of `server_url`, dropped if it was there and created empty; its URL.
    Never the database `server_url` names itself: that one may be an operator's."""
    own = psycopg.conninfo.conninfo_to_dict(server_url).get("dbname")
    if name == own:
        raise SystemExit(f"error: the demo's database ({name}) must not be DATABASE_URL's own: give another --database")
    with connect(server_url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return with_dbname(server_url, name)


class Command(CannaspiderCommand):
    def short_desc(self) -> str:
        return "Run the whole chain (Dutchie and Jane) against the sandbox and print a summary"

    def add_options(self, parser) -> None:
        super().add_options(parser)
        parser.add_argument("--state", default="AZ")
        parser.add_argument("--days", type=int, default=month.DAYS, help="days of product crawls (sandbox/month.py)")
        parser.add_argument("--output", default=None, help="feed of the last resync (default DATA_DIR/demo)")
        parser.add_argument(
            "--database", default=DEMO_DATABASE, help="the demo's own database, dropped and created anew each run"
        )

    def execute(self, args, opts) -> None:
        # the sandbox's servers (aiohttp, Pillow) load when the demo runs, not with every `scrapy`
        from sandbox.server import Sandbox  # noqa: PLC0415 - a command's start-up time

        if not 1 <= opts.days <= month.DAYS:
            raise UsageError(f"--days must be 1 to {month.DAYS} (the sandbox's month: sandbox/month.py)")
        url = fresh_database(database_url(self.settings), opts.database)
        print(f"database: {redact(url)} (created anew)")
        migrations.apply(url, log=lambda line: print(f"  {line}"))
        assert self.settings is not None  # Scrapy sets it before running a command
        out = Path(opts.output or Path(self.settings.get("CANNASPIDER_DATA_DIR")) / "demo" / "products.json")
        out.parent.mkdir(parents=True, exist_ok=True)
        state = opts.state.upper()
        auth = (DEMO_PROXY_USER, secrets.token_urlsafe(12))
        with Sandbox(demo_catalog(state), proxy=True, proxy_auth=auth) as sandbox:
            assert sandbox.urls is not None
            base = sandbox.urls.base
            env = {
                **os.environ,
                "DUTCHIE_GRAPHQL_URL": sandbox.urls.graphql,
                "JANE_ALGOLIA_URL": sandbox.urls.jane,
                "DATABASE_URL": url,
            }
            print(f"sandbox: {sandbox.urls.graphql} (Dutchie), {sandbox.urls.jane} (Jane)")
            # the proxy dies with the sandbox: it is in the pool (the table) only while this runs
            with sandbox_proxy_row(url, sandbox.urls.proxy or "", auth) as masked:
                print(f"proxy:   {masked} (every Dutchie and Jane request)")

                # the chain and the month in one process (sandbox/demo_month.py says why)
                month_cmd = [sys.executable, "-m", "sandbox.demo_month", "--state", state, "--sandbox", base]
                month_cmd += ["--output", str(out), "--days", str(opts.days)]
                result = subprocess.run(month_cmd, env=env)
                if result.returncode != 0:
                    raise SystemExit(f"error: the demo's month exited with {result.returncode}")
        self._summary(url, state, out)

    def _summary(self, url: str, state: str, feed: Path) -> None:
        with connect(url) as conn:
            stores, resolved, unresolved = _counts(
                conn,
                "SELECT count(*), count(platform_dispensary_id), count(resolution_error) FROM dispensaries "
                "WHERE state = %s",
                (state,),
            )
            products, in_stock, oos, missing = _counts(
                conn,
                "SELECT count(*), count(*) FILTER (WHERE is_in_stock), count(*) FILTER (WHERE stock_status = 'oos'),"
                " count(*) FILTER (WHERE consecutive_misses > 0) FROM store_products sp "
                "JOIN dispensaries d ON d.id = sp.dispensary_id WHERE d.state = %s",
                (state,),
            )
            runs: dict[str, int] = dict(
                conn.execute("SELECT status, count(*) FROM crawl_runs GROUP BY status").fetchall()
            )
            (snapshots,) = _counts(conn, "SELECT count(*) FROM store_product_snapshots")
            images, with_image_url = _counts(
                conn,
                "SELECT count(local_image_path), count(image_url) FROM store_products sp "
                "JOIN dispensaries d ON d.id = sp.dispensary_id WHERE d.state = %s",
                (state,),
            )
            per_platform = conn.execute(PER_PLATFORM, {"state": state}).fetchall()
        items = len(json.loads(feed.read_text())) if feed.exists() else 0
        assert self.settings is not None  # Scrapy sets it before running a command
        print()
        print(f"Summary for {state}")
        print(f"  stores          {stores} ({resolved} resolved, {unresolved} with a resolution error)")
        print(f"  products        {products}")
        print(f"  in stock        {in_stock}")
        print(f"  out of stock    {oos}   (missing from 3 consecutive complete crawls)")
        print(f"  missing 1-2x    {missing - oos}")
        print(f"  snapshots       {snapshots}")
        print(f"  images          {images} of {with_image_url} stored as webp in {images_store_uri(self.settings)}")
        print("  crawl runs      " + ", ".join(f"{n} {s}" for s, n in sorted(runs.items())))
        print("  per platform    stores  products  in stock  out of stock  complete runs")
        for platform, p_stores, p_products, p_in_stock, p_oos, p_complete in per_platform:
            print(f"    {platform:<13} {p_stores:>6}  {p_products:>8}  {p_in_stock:>8}  {p_oos:>12}  {p_complete:>13}")
        for line in _month_lines(url, state):
            print(line)
        print(f"  feed            {feed} ({items} items)")
        assert self.settings is not None
        host, port = self.settings.get("API_HOST"), self.settings.getint("API_PORT")
        print(
            f"  dashboard       http://{host}:{port}/dashboard/   "
            f"(start it with `DATABASE_URL='{redact(url)}' scrapy serve`)"
        )


def _month_lines(url: str, state: str) -> list[str]:
    """The month: its days, its events, the market's 4-week change and movers (the figures the
    dashboard's market page shows: market_queries.market) and the collapse."""
    # the dashboard's queries read the history's cold tier too (pyarrow, DuckDB)
    from cannaspider.web import market_queries  # noqa: PLC0415 - a command's start-up time

    with connect(url) as conn:
        first, last, days = _counts(conn, MONTH, (state,))
        events = dict(conn.execute(EVENTS).fetchall())
        collapses = conn.execute(COLLAPSES, (state,)).fetchall()

    async def market() -> dict | None:
        async with await psycopg.AsyncConnection.connect(url) as aconn:
            return await market_queries.market(
                aconn, state=state, day=None, compare_days=COMPARE_DAYS, city="", limit=100, movers=10
            )

    m = asyncio.run(market()) or {}
    changed = [b for b in m.get("brands", []) if b["change"] is not None]
    gains, losses = m.get("brand_movers", {}).get("gains", []), m.get("brand_movers", {}).get("losses", [])
    drops, rises = m.get("price_movers", {}).get("drops", []), m.get("price_movers", {}).get("rises", [])
    lines = [
        f"  month           {days} days with every store's product crawl complete, {first} to {last}",
        "  events          " + ", ".join(f"{t} {events.get(t, 0)}" for t in EVENT_TYPES),
        f"  4-week change   {len(changed)} brands, {m.get('day')} against {m.get('compared_with')}"
        + "".join(f"; {b['name']} {b['change']:+.0%}" for b in (gains[:1] + losses[:1])),
        f"  movers          brands {len(gains)} up, {len(losses)} down; prices {len(drops)} drops,"
        f" {len(rises)} rises on {m.get('day')}",
    ]
    for name, suspect_days, first_day, last_day, seen, marked in collapses:
        lines.append(
            f"  collapse        {name}: {suspect_days} suspect crawls ({first_day} to {last_day}, {seen} products"
            f" seen), {marked} products marked out of stock by it"
        )
    return lines


def _counts(conn, query: str, params: tuple = ()) -> tuple[int, ...]:
    """The one row of an aggregate query (count(*) without GROUP BY always returns one)."""
    row = conn.execute(query, params).fetchone()
    assert row is not None
    return tuple(row)
