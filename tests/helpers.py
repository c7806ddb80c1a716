"""Helpers the tests import (fixtures live in conftest.py): where the project is, `scrapy` run as
a subprocess exactly as users run it, a client for the sandbox's control API, and shortcuts that
put sandbox stores in the test database without running discovery each time."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import psycopg

from cannaspider.sandbox.server import Sandbox, SandboxURLs

ROOT = Path(__file__).resolve().parent.parent
TEST_DATA_DIR = ROOT / ".data" / "test"
TEST_PGDATA = TEST_DATA_DIR / "postgres"


def run_scrapy(*args: str, env: dict, timeout: float = 180, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "scrapy", *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout
    )


def with_dbname(url: str, name: str) -> str:
    """The same server as `url`, another database."""
    conninfo = psycopg.conninfo.conninfo_to_dict(url)
    conninfo["dbname"] = name
    return psycopg.conninfo.make_conninfo(**conninfo)


class SandboxClient:
    """The sandbox's control API (/_sandbox/…): faults, menu epochs, catalog views, counters."""

    def __init__(self, server: Sandbox):
        self.server = server
        assert server.urls is not None, "start the sandbox first"
        self.urls: SandboxURLs = server.urls

    def call(self, method: str, path: str, body: object | None = None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(
            self.urls.base + path, data=data, method=method, headers={"content-type": "application/json"}
        )
        with urllib.request.urlopen(req, timeout=30) as resp:
            return json.loads(resp.read())

    def reset(self) -> None:
        self.call("POST", "/_sandbox/reset", {})

    def faults(self, *rules: dict) -> None:
        self.call("POST", "/_sandbox/faults", {"rules": list(rules)})

    def epoch(self, n: int) -> None:
        self.call("POST", "/_sandbox/epoch", {"epoch": n})

    def stores(self, state: str | None = None) -> list[dict]:
        return self.call("GET", "/_sandbox/stores" + (f"?state={state}" if state else ""))

    def menu(self, store: str, epoch: int) -> list[str]:
        return self.call("GET", f"/_sandbox/menu/{store}?epoch={epoch}")["product_ids"]

    def requests(self) -> dict:
        return self.call("GET", "/_sandbox/state")["requests"]


def scrapy_environment(db_url: str, urls: SandboxURLs, tmp_path: Path) -> dict:
    """The environment of a `scrapy` subprocess aimed at the test database and the sandbox."""
    return {
        **os.environ,
        "DATABASE_URL": db_url,
        "DUTCHIE_GRAPHQL_URL": urls.graphql,
        "CANNASPIDER_DATA_DIR": str(tmp_path / "data"),
        "CANNASPIDER_FEED_DIR": str(tmp_path / "feeds"),
    }


def add_store(db_url: str, store: dict, *, resolved: bool = True, menu_url: str | None = None) -> int:
    """A sandbox store (as /_sandbox/stores lists it) as a dispensaries row; returns its id."""
    with psycopg.connect(db_url, autocommit=True) as conn:
        row = conn.execute(
            "INSERT INTO dispensaries (name, slug, menu_url, state, city, platform_dispensary_id) "
            "VALUES (%s, %s, %s, %s, %s, %s) RETURNING id",
            (
                store["name"],
                store["cName"],
                store["menu_url"] if menu_url is None else menu_url,
                store["state"],
                store["city"],
                store["id"] if resolved else None,
            ),
        ).fetchone()
    assert row is not None
    return row[0]


def products_of(db_url: str, dispensary_id: int) -> dict[str, tuple]:
    with psycopg.connect(db_url) as conn:
        rows = conn.execute(
            "SELECT provider_product_id, consecutive_misses, stock_status, is_in_stock FROM store_products "
            "WHERE dispensary_id = %s",
            (dispensary_id,),
        ).fetchall()
    return {r[0]: r[1:] for r in rows}


def runs_of(db_url: str, dispensary_id: int) -> list[tuple]:
    with psycopg.connect(db_url) as conn:
        return conn.execute(
            "SELECT status, error, products_seen, products_new, products_missed, products_marked_oos, pages_fetched "
            "FROM crawl_runs WHERE dispensary_id = %s ORDER BY id",
            (dispensary_id,),
        ).fetchall()
