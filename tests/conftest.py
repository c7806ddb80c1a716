"""Shared fixtures: a real PostgreSQL database per test worker, the sandbox over loopback, and
`scrapy` subprocesses aimed at both. Helpers that tests import live in tests/helpers.py.

Every test is marked `unit` or `integration` at collection (tests/tiers.py): `./dev test -m unit`
runs the in-process tier.

The suite stops what it started: when no DATABASE_URL is given, the first test worker starts the
embedded PostgreSQL under .data/test (the workers share it), and the session's controlling
process stops it after the last worker finished, unless it was already running before.
"""

from __future__ import annotations

import os
import subprocess

import psycopg
import pytest

from cannaspider.db import embedded, migrations
from sandbox.catalog import CatalogConfig
from sandbox.server import Sandbox
from tests import tiers
from tests.helpers import (
    SANDBOX_PROXY_AUTH,
    TEST_PGDATA,
    SandboxClient,
    register_proxy,
    run_scrapy,
    scrapy_environment,
    with_dbname,
)

TABLES = (
    "product_snapshots",
    "product_events",
    "store_products",
    "crawl_runs",
    "dutchie_discovery_locations",
    "worker_tasks",
    "dispensaries",
    "proxies",
    "keywords",
    "brand_aliases",  # canonical brands and products (migration 016)
    "canonical_products",
    "brands",
)


_STARTED_BY_US = pytest.StashKey[bool]()  # did this session start the embedded server?


def _is_xdist_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    # In the controlling process (xdist's controller, or the only process without xdist), before
    # any worker exists: was the embedded server already up? Then it is not ours to stop.
    config = session.config
    if not _is_xdist_worker(config):
        config.stash[_STARTED_BY_US] = not os.environ.get("DATABASE_URL") and embedded.running_pid(TEST_PGDATA) is None


def pytest_sessionfinish(session: pytest.Session) -> None:
    # Runs in the controller after every worker has torn down its session fixtures (their
    # databases are dropped by then), so this is the one place that knows the server is idle.
    config = session.config
    if not _is_xdist_worker(config) and config.stash.get(_STARTED_BY_US, False):
        embedded.stop(TEST_PGDATA)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if isinstance(item, pytest.Function):
            qualname = item.originalname if item.cls is None else f"{item.cls.__name__}.{item.originalname}"
            integration = tiers.is_integration(item.path, qualname, item.fixturenames)
            item.add_marker(pytest.mark.integration if integration else pytest.mark.unit)


@pytest.fixture(scope="session")
def worker_id(request) -> str:
    """xdist's worker name ("gw0"…), or "master"; also under `-p no:xdist`, where xdist's own
    fixture of this name does not exist."""
    workerinput = getattr(request.config, "workerinput", None)
    return workerinput["workerid"] if workerinput else "master"


@pytest.fixture(scope="session")
def admin_url() -> str:
    """The server tests create their databases on: DATABASE_URL's, else the embedded one."""
    if os.environ.get("DATABASE_URL"):
        return os.environ["DATABASE_URL"]
    return embedded.ensure_running(TEST_PGDATA)


@pytest.fixture(scope="session")
def db_url(admin_url, worker_id) -> str:
    """A migrated database of this test worker's own (dropped at the end)."""
    name = f"cannaspider_test_{worker_id}"
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    url = with_dbname(admin_url, name)
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
    yield with_dbname(admin_url, name)
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


@pytest.fixture(scope="session")
def sandbox_server():
    # the default catalog (AZ/MI/NV): spider contracts name its stores; Dutchie only through its proxy
    sb = Sandbox(CatalogConfig(), proxy=True, proxy_auth=SANDBOX_PROXY_AUTH)
    sb.start()
    yield sb
    sb.stop()


@pytest.fixture
def sandbox(sandbox_server) -> SandboxClient:
    client = SandboxClient(sandbox_server)
    client.reset()
    yield client
    client.reset()


@pytest.fixture
def sandbox_proxy(db, sandbox) -> int:
    """The sandbox's proxy registered in the (emptied) test database; returns its id."""
    return register_proxy(db, sandbox.urls.proxy, SANDBOX_PROXY_AUTH)


@pytest.fixture
def scrapy_env(db, sandbox, sandbox_proxy, tmp_path) -> dict:
    return scrapy_environment(db, sandbox.urls, tmp_path)


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
