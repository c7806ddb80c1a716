"""Shared fixtures: a real PostgreSQL database per test worker, the sandbox over loopback, and
`scrapy` subprocesses aimed at both. Helpers that tests import live in tests/helpers.py.

Every test is `unit` or `integration`: integration is declared on the test, checked at collection against
tests/tiers.py; the rest is marked `unit` (`./dev test -m unit`)
runs the in-process tier.

The suite stops what it started: when no DATABASE_URL is given, the first test worker starts the
embedded PostgreSQL under .data/test (the workers share it), and the session's controlling
process stops it after the last worker finished, unless it was already running before or another
pytest session still has its databases on it.

Each pytest session's databases are its own: their names carry the controlling process's pid
(`cannaspider_test_<pid>_<worker>`), so two sessions in one checkout (or on one DATABASE_URL) do
not empty each other's tables; a session drops its databases at the end, and the databases of a
session that died (its pid gone) are dropped by the next one.
"""

from __future__ import annotations

import os
import subprocess

import psycopg
import pytest
from scrapy.utils.reactor import install_reactor, is_reactor_installed

from cannaspider import settings as project_settings
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
    "discovery_locations",  # renamed from dutchie_discovery_locations (migration 040)
    "worker_tasks",
    "dispensaries",
    "proxies",
    "keywords",
    "brand_aliases",  # canonical brands and products (migration 016)
    "canonical_products",
    "brands",
    "image_paths",  # image sources and the per-store paths mapped to them (migration 029)
    "image_sources",
    "history_archive",  # the months in the cold tier (migration 032)
    "crawl_health_reports",  # every node's crawl-health reports (migration 033)
    "crawl_jobs",  # every crawl process's exit (migration 044)
)


_STARTED_BY_US = pytest.StashKey[bool]()  # did this session start the embedded server?
PREFIX = "cannaspider_test_"
TEST_SERVER_SETTINGS = {"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"}


def _session_pid(config: pytest.Config) -> int:
    """The pid of the session's controlling process (xdist's controller passes it to its workers)."""
    workerinput = getattr(config, "workerinput", None)
    return int(workerinput["cannaspider_session_pid"]) if workerinput else os.getpid()


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:  # xdist's hook, in the controller, for each worker
    node.workerinput["cannaspider_session_pid"] = os.getpid()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _sessions_databases(admin_url: str) -> dict[int, list[str]]:
    """The test databases on the server, by the pid of the session that made them."""
    with psycopg.connect(admin_url, autocommit=True) as conn:
        names = [r[0] for r in conn.execute("SELECT datname FROM pg_database WHERE datname LIKE %s", (PREFIX + "%",))]
    out: dict[int, list[str]] = {}
    for name in names:
        pid = name[len(PREFIX) :].split("_", 1)[0]
        if pid.isdigit():
            out.setdefault(int(pid), []).append(name)
    return out


def _drop(admin_url: str, name: str) -> None:
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


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
        if embedded.running_pid(TEST_PGDATA) is None:
            return
        url = embedded.ensure_running(TEST_PGDATA)  # attaches: it is running
        others = [pid for pid in _sessions_databases(url) if pid != os.getpid() and _alive(pid)]
        if not others:  # another session still running on it keeps it up (and stops it itself)
            embedded.stop(TEST_PGDATA)


def pytest_configure(config: pytest.Config) -> None:
    # The project's reactor (settings.TWISTED_REACTOR), in every worker before any test: the first
    # in-process use of twisted's global reactor installs the default one otherwise (a LoopingCall
    # started by an extension's spider_opened did), and every later get_crawler of a worker that ran
    # such a test first failed "The installed reactor (EPollReactor) does not match" (as Scrapy's
    # own test suite does, by install_reactor in its conftest).
    if not is_reactor_installed():
        install_reactor(project_settings.TWISTED_REACTOR)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # The tier is declared on the test (`pytestmark = pytest.mark.integration`, or the marker on the
    # test or its class); a test without it is `unit`. tests/tiers.py reads the code to check the
    # declarations: a test that spawns a process, a server or a browser must say so.
    undeclared: list[str] = []
    for item in items:
        if not isinstance(item, pytest.Function):
            continue
        if item.get_closest_marker("integration") is not None:
            continue
        qualname = item.originalname if item.cls is None else f"{item.cls.__name__}.{item.originalname}"
        if tiers.is_integration(item.path, qualname, item.fixturenames):
            undeclared.append(item.nodeid)
        item.add_marker(pytest.mark.unit)
    if undeclared:
        raise pytest.UsageError(
            "these tests spawn a process, a server or a browser (tests/tiers.py) but are not marked "
            "integration: " + ", ".join(undeclared[:20]) + (" …" if len(undeclared) > 20 else "")
        )


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
    url = embedded.ensure_running(TEST_PGDATA)
    # The test cluster is thrown away: no commit waits for a disk flush, no checkpoint (each DROP
    # DATABASE forces one) fsyncs. On a busy disk that was seconds per dropped database and a flush
    # per TRUNCATE. Crash safety of this one cluster is all it gives up (reloaded, no restart).
    with psycopg.connect(url, autocommit=True) as conn:
        for name, value in TEST_SERVER_SETTINGS.items():
            conn.execute(f"ALTER SYSTEM SET {name} = {value}")
        conn.execute("SELECT pg_reload_conf()")
    return url


@pytest.fixture(scope="session")
def db_prefix(request, admin_url, worker_id) -> str:
    """The start of this worker's database names: the session's pid, the worker. The databases
    of sessions that are gone (killed, crashed) are dropped here."""
    for pid, names in _sessions_databases(admin_url).items():
        if not _alive(pid):
            for name in names:
                try:
                    _drop(admin_url, name)
                except psycopg.Error:  # the other worker of this session dropped it first
                    pass
    return f"{PREFIX}{_session_pid(request.config)}_{worker_id}"


@pytest.fixture(scope="session")
def db_url(admin_url, db_prefix) -> str:
    """A migrated database of this test worker's own (dropped at the end)."""
    name = db_prefix
    _drop(admin_url, name)
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = with_dbname(admin_url, name)
    migrations.apply(url, log=lambda _: None)
    yield url
    _drop(admin_url, name)


@pytest.fixture
def empty_database(admin_url, db_prefix, request):
    """A brand-new, unmigrated database for this test (dropped afterwards); returns its URL."""
    name = f"{db_prefix}_{request.node.name}"[:63].lower()
    _drop(admin_url, name)
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    yield with_dbname(admin_url, name)
    _drop(admin_url, name)


# The tables `TRUNCATE TABLES … CASCADE` reaches (TABLES and, recursively, those whose foreign keys
# name them), partitioned tables by their parent; and the sequences their columns own.
CLOSURE = """
WITH RECURSIVE closure(rel) AS (
    SELECT unnest(%s::regclass[])
    UNION
    SELECT c.conrelid FROM pg_constraint c JOIN closure ON c.confrelid = closure.rel WHERE c.contype = 'f'
)
SELECT c.rel::regclass::text FROM closure c JOIN pg_class k ON k.oid = c.rel WHERE NOT k.relispartition
"""
OWNED_SEQUENCES = """
SELECT d.objid::regclass::text, s.seqstart FROM pg_depend d JOIN pg_sequence s ON s.seqrelid = d.objid
 WHERE d.classid = 'pg_class'::regclass AND d.refobjid = ANY(%s::regclass[]) AND d.deptype IN ('a', 'i')
"""


@pytest.fixture(scope="session")
def emptying(db_url) -> str:
    """The statement that empties the worker's database between tests, as
    `TRUNCATE TABLES RESTART IDENTITY CASCADE` would: every row of the same tables deleted, their
    sequences restarted. Deleted, not truncated: a TRUNCATE of these ~25 tables gives each table,
    partition and index a new file, 50-250 ms a test on this machine (most of what an in-process
    test takes); deleting the few rows a test wrote takes a few ms. As replica, no trigger or foreign
    key acts, as under TRUNCATE (a store's delete triggers would touch the analytics tables, which
    TRUNCATE leaves alone). That takes a superuser: on a server where the tests' role is not one,
    TRUNCATE it is."""
    truncate = f"TRUNCATE {', '.join(TABLES)} RESTART IDENTITY CASCADE"
    with psycopg.connect(db_url, autocommit=True) as conn:
        if not conn.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user").fetchone()[0]:
            return truncate
        tables = [row[0] for row in conn.execute(CLOSURE, (list(TABLES),))]
        sequences = conn.execute(OWNED_SEQUENCES, (tables,)).fetchall()
    restart = ", ".join(f"setval('{name}', {start}, false)" for name, start in sequences)
    deletes = "".join(f"DELETE FROM {table};" for table in tables)
    return f"BEGIN; SET LOCAL session_replication_role = replica; {deletes} SELECT {restart}; COMMIT"


@pytest.fixture
def db(db_url, emptying) -> str:
    """The worker's database, emptied."""
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute(emptying)
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
