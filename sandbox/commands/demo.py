"""`scrapy demo`: the whole chain against the sandbox, end to end, on both platforms (Dutchie and Jane).

It runs in a database of its own (`--database`, default cannaspider_demo, on DATABASE_URL's
server or the embedded one), dropped and created anew each run: a second run prints the same
figures as the first, and no crawl of an operator's database is touched.

migrate → sandbox → store_discovery (each platform) → entry_point_discovery → product_discovery →
(menus evolve) → product_resync ×3 → a JSON feed and a summary, with each figure per platform.
Every crawl runs as a real `scrapy crawl` subprocess, exactly as an operator or Scrapyd would run it.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import urllib.request
from pathlib import Path

import psycopg
from psycopg import sql

from cannaspider.command_base import CannaspiderCommand
from cannaspider.commands.crawl import EXIT_INCOMPLETE
from cannaspider.db import connect, database_url, migrations
from cannaspider.db.connection import with_dbname
from cannaspider.db.errors import redact
from cannaspider.images.backends import images_store_uri
from sandbox.catalog import CatalogConfig
from sandbox.pool_rows import sandbox_proxy_row
from sandbox.server import Sandbox

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
        parser.add_argument("--resyncs", type=int, default=3, help="menu epochs to advance and resync")
        parser.add_argument("--output", default=None, help="feed of the last resync (default DATA_DIR/demo)")
        parser.add_argument(
            "--database", default=DEMO_DATABASE, help="the demo's own database, dropped and created anew each run"
        )

    def execute(self, args, opts) -> None:
        url = fresh_database(database_url(self.settings), opts.database)
        print(f"database: {redact(url)} (created anew)")
        migrations.apply(url, log=lambda line: print(f"  {line}"))
        assert self.settings is not None  # Scrapy sets it before running a command
        out = Path(opts.output or Path(self.settings.get("CANNASPIDER_DATA_DIR")) / "demo" / "products.json")
        out.parent.mkdir(parents=True, exist_ok=True)
        state = opts.state.upper()
        auth = (DEMO_PROXY_USER, secrets.token_urlsafe(12))
        with Sandbox(CatalogConfig(states=(state,), stores_per_state=8), proxy=True, proxy_auth=auth) as sandbox:
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

                def crawl(*argv: str, only_browser_missing: bool = False) -> None:
                    cmd = [sys.executable, "-m", "scrapy", "crawl", *argv, "-s", "LOG_LEVEL=WARNING"]
                    print("$ scrapy crawl " + " ".join(argv), flush=True)
                    result = subprocess.run(cmd, env=env)
                    if result.returncode == 0:
                        return
                    # without Chromium only the stores whose menu is on their own website fail (exit 3:
                    # units incomplete): the demo goes on with the others, and says so
                    if only_browser_missing and result.returncode == EXIT_INCOMPLETE:
                        unresolved = _browser_missing(url, state)
                        if unresolved:
                            print(
                                f"({len(unresolved)} store(s) whose menu is on their own website not resolved: "
                                f"{unresolved[0]}; the demo goes on with the others)",
                                flush=True,
                            )
                            return
                    raise SystemExit(f"error: `scrapy crawl {' '.join(argv)}` exited with {result.returncode}")

                def set_epoch(epoch: int) -> None:
                    for path in ("/_sandbox/epoch", "/_sandbox/jane/epoch"):  # both platforms' menus
                        req = urllib.request.Request(
                            f"{base}{path}",
                            data=json.dumps({"epoch": epoch}).encode(),
                            method="POST",
                            headers={"content-type": "application/json"},
                        )
                        urllib.request.urlopen(req, timeout=10).read()

                crawl("store_discovery", "-a", f"state={state}")
                crawl("store_discovery", "-a", f"state={state}", "-a", "platform=jane")
                crawl("entry_point_discovery", "-a", f"state={state}", only_browser_missing=True)
                crawl("product_discovery", "-a", f"state={state}")
                for epoch in range(1, opts.resyncs + 1):
                    set_epoch(epoch)
                    print(f"(sandbox menus advanced to epoch {epoch})")
                    extra = ["-O", str(out)] if epoch == opts.resyncs else []
                    crawl("product_resync", "-a", f"state={state}", *extra)
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
        print(f"  feed            {feed} ({items} items)")
        assert self.settings is not None
        host, port = self.settings.get("API_HOST"), self.settings.getint("API_PORT")
        print(
            f"  dashboard       http://{host}:{port}/dashboard/   "
            f"(start it with `DATABASE_URL='{redact(url)}' scrapy serve`)"
        )


def _browser_missing(url: str, state: str) -> list[str]:
    """The state's resolution errors when every one is for want of Chromium (stealth/browser_pages.py's
    reason); [] when a store failed for another reason. (A store that discovery found with its platform
    id keeps it: without a browser its entry point is not verified, and it is still crawled.)"""
    with connect(url) as conn:
        query = "SELECT resolution_error FROM dispensaries WHERE state = %s AND resolution_error IS NOT NULL"
        errors = [row[0] for row in conn.execute(query, (state,)).fetchall()]
    if errors and all(error.startswith("Chromium not found at CHROMIUM_PATH") for error in errors):
        return errors
    return []


def _counts(conn, query: str, params: tuple = ()) -> tuple[int, ...]:
    """The one row of an aggregate query (count(*) without GROUP BY always returns one)."""
    row = conn.execute(query, params).fetchone()
    assert row is not None
    return tuple(row)
