"""Shared fixtures: a real PostgreSQL database per test worker, the sandbox over loopback, and
a helper that runs `scrapy` commands as subprocesses exactly as users do."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import psycopg
import pytest

from cannaspider.db import embedded, migrations
from cannaspider.sandbox.catalog import CatalogConfig
from cannaspider.sandbox.server import Sandbox

ROOT = Path(__file__).resolve().parent.parent
TEST_DATA_DIR = ROOT / ".data" / "test"
TABLES = (
    "store_product_snapshots",
    "store_products",
    "crawl_runs",
    "dutchie_discovery_locations",
    "worker_tasks",
    "dispensaries",
    "proxies",
    "keywords",
)


def _admin_url() -> str:
    """The server tests create their databases on: DATABASE_URL's, else an embedded one."""
    if os.environ.get("DATABASE_URL"):
        return os.environ["DATABASE_URL"]
    return embedded.ensure_running(TEST_DATA_DIR / "postgres")


def _with_dbname(url: str, name: str) -> str:
    conninfo = psycopg.conninfo.conninfo_to_dict(url)
    conninfo["dbname"] = name
    return psycopg.conninfo.make_conninfo(**conninfo)


@pytest.fixture(scope="session")
def admin_url() -> str:
    return _admin_url()


@pytest.fixture(scope="session")
def db_url(admin_url, worker_id) -> str:
    """A migrated database of this test worker's own (dropped at the end)."""
    name = f"cannaspider_test_{worker_id}"
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    url = _with_dbname(admin_url, name)
    migrations.apply(url, log=lambda _: None)
    yield url
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def empty_database(admin_url, worker_id, request):
    """A brand-new, unmigrated database for this test (dropped afterwards); returns its URL."""
    name = f"cannaspider_test_{worker_id}_{request.node.name}"[:63].lower()
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    yield _with_dbname(admin_url, name)
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def db(db_url) -> str:
    """The worker's database, emptied."""
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute(f"TRUNCATE {', '.join(TABLES)} RESTART IDENTITY CASCADE")
    return db_url


@pytest.fixture
def sql(db):
    """Run a query on the test database and get its rows."""

    def run(query: str, params=None):
        with psycopg.connect(db, autocommit=True) as conn:
            cur = conn.execute(query, params)
            return cur.fetchall() if cur.description else cur.rowcount

    return run


# Dutchie is only crawled through proxies: the sandbox's forward proxy, with credentials (an "@"
# in the password: it must be percent-encoded in the proxy URL), is the pool of every crawl.
SANDBOX_PROXY_AUTH = ("scout", "pa55@w0rd")


@pytest.fixture(scope="session")
def sandbox_server():
    # the default catalog (seed 42, AZ/MI/NV): spider contracts name its stores
    sb = Sandbox(CatalogConfig(), proxy=True, proxy_auth=SANDBOX_PROXY_AUTH)
    sb.start()
    yield sb
    sb.stop()


class SandboxClient:
    def __init__(self, server: Sandbox):
        self.server = server
        self.urls = server.urls

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


@pytest.fixture
def sandbox(sandbox_server) -> SandboxClient:
    client = SandboxClient(sandbox_server)
    client.reset()
    yield client
    client.reset()


def register_proxy(db_url: str, proxy_url: str, auth: tuple[str, str] | None) -> int:
    """A row in `proxies` for a forward proxy at `proxy_url` (http://127.0.0.1:port)."""
    host, port = proxy_url.rsplit("//", 1)[1].split(":")
    user, password = auth or (None, None)
    with psycopg.connect(db_url, autocommit=True) as conn:
        return conn.execute(
            "INSERT INTO proxies (host, port, username, password, protocol) VALUES (%s, %s, %s, %s, 'http') "
            "RETURNING id",
            (host, int(port), user, password),
        ).fetchone()[0]


@pytest.fixture
def sandbox_proxy(db, sandbox) -> int:
    """The sandbox's proxy registered in the (emptied) test database; returns its id."""
    return register_proxy(db, sandbox.urls.proxy, SANDBOX_PROXY_AUTH)


@pytest.fixture
def scrapy_env(db, sandbox, sandbox_proxy, tmp_path) -> dict:
    return {
        **os.environ,
        "DATABASE_URL": db,
        "DUTCHIE_GRAPHQL_URL": sandbox.urls.graphql,
        "CANNASPIDER_DATA_DIR": str(tmp_path / "data"),
        "CANNASPIDER_FEED_DIR": str(tmp_path / "feeds"),
    }


def run_scrapy(*args: str, env: dict, timeout: float = 180, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "scrapy", *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout
    )


@pytest.fixture
def crawl(scrapy_env):
    """`scrapy crawl SPIDER -a k=v ...` against the sandbox and the test database."""

    def run(spider: str, *extra: str, **spider_args) -> subprocess.CompletedProcess:
        argv = ["crawl", spider]
        for key, value in spider_args.items():
            argv += ["-a", f"{key}={value}"]
        result = run_scrapy(*argv, *extra, env=scrapy_env)
        assert "Traceback" not in result.stderr, result.stderr[-4000:]
        return result

    return run
