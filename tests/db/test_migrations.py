"""Migrations: in order, idempotent, recorded, each in a transaction that a failure rolls back."""

from __future__ import annotations

import os
import shutil

import psycopg
import pytest

from cannaspider.db import migrations
from cannaspider.db.errors import DatabaseSetupError
from tests.helpers import ROOT, run_scrapy


@pytest.fixture
def fresh_db(empty_database):
    return empty_database


def _schema(url: str) -> list[tuple]:
    with psycopg.connect(url) as conn:
        return conn.execute(
            "SELECT table_name, column_name, data_type FROM information_schema.columns "
            "WHERE table_schema = 'public' ORDER BY 1, 2"
        ).fetchall()


def test_apply_twice_changes_nothing(fresh_db):
    first = migrations.apply(fresh_db, log=lambda _: None)
    assert [m.version for m in first] == sorted(m.version for m in first)
    schema = _schema(fresh_db)
    assert migrations.apply(fresh_db, log=lambda _: None) == []
    assert _schema(fresh_db) == schema
    statuses = migrations.status(fresh_db)
    assert statuses and all(s.applied_at is not None and not s.changed_since_applied for s in statuses)


def test_contract_tables_and_columns_exist(db_url):
    cols = {(t, c) for t, c, _ in _schema(db_url)}
    for table, column in [
        ("dispensaries", "platform_dispensary_id"),
        ("dispensaries", "menu_url"),
        ("dispensaries", "last_crawl_at"),
        ("dispensaries", "crawl_enabled"),
        ("store_products", "provider_product_id"),
        ("store_products", "name_raw"),
        ("store_products", "brand_name_raw"),
        ("store_products", "price_rec"),
        ("store_products", "price_med"),
        ("store_products", "is_in_stock"),
        ("store_products", "stock_status"),
        ("store_products", "consecutive_misses"),
        ("store_products", "last_seen_at"),
        ("store_products", "local_image_path"),
        ("store_product_snapshots", "captured_at"),
        ("worker_tasks", "priority"),
        ("worker_tasks", "run_after"),
        ("worker_tasks", "lease_expires_at"),
        ("proxies", "failure_count"),
        ("proxies", "avg_response_time_ms"),
        ("keywords", "serp"),
        ("discovery_locations", "raw"),
        ("discovery_locations", "platform"),
        ("crawl_runs", "products_new"),
    ]:
        assert (table, column) in cols, (table, column)


def test_snapshot_partitions_are_monthly_and_can_be_created_ahead(db_url):
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute("SELECT ensure_snapshot_partitions(current_date, 14)")
        parts = [
            r[0]
            for r in conn.execute(
                "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
                "WHERE i.inhparent = 'product_snapshots'::regclass ORDER BY 1"
            ).fetchall()
        ]
        assert len(parts) >= 14
        # a row one year ahead lands in its own month
        conn.execute(
            "INSERT INTO product_snapshots (store_product_id, captured_at) VALUES (-1, now() + interval '12 months')"
        )
        conn.execute("DELETE FROM product_snapshots WHERE store_product_id = -1")


def test_failing_migration_rolls_back_and_stops(fresh_db, tmp_path):
    folder = tmp_path / "migrations"
    shutil.copytree(ROOT / "migrations", folder)
    (folder / "900_half_good.sql").write_text(
        "CREATE TABLE half_good (id int);\nINSERT INTO half_good VALUES (1);\nSELECT no_such_function();\n"
    )
    (folder / "901_after.sql").write_text("CREATE TABLE after_failure (id int);\n")
    with pytest.raises(DatabaseSetupError) as err:
        migrations.apply(fresh_db, folder, log=lambda _: None)
    assert "900_half_good.sql failed and was rolled back" in str(err.value)
    assert "\n" not in str(err.value)
    with psycopg.connect(fresh_db) as conn:
        assert conn.execute("SELECT to_regclass('half_good'), to_regclass('after_failure')").fetchone() == (None, None)
        versions = [r[0] for r in conn.execute("SELECT version FROM schema_migrations ORDER BY 1").fetchall()]
    assert "900" not in versions and "001" in versions


@pytest.mark.integration
def test_failing_migration_via_command_exits_non_zero_with_one_line(fresh_db, tmp_path):
    folder = tmp_path / "migrations"
    folder.mkdir()
    (folder / "001_broken.sql").write_text("CREATE TABLE t (id int);\nALTER TABLE nope ADD COLUMN x int;\n")
    env = {**os.environ, "DATABASE_URL": fresh_db, "CANNASPIDER_MIGRATIONS_DIR": str(folder)}
    result = run_scrapy("migrate", env=env)
    assert result.returncode != 0
    assert len(result.stderr.strip().splitlines()) == 1
    assert "001_broken.sql failed and was rolled back" in result.stderr
    with psycopg.connect(fresh_db) as conn:
        assert conn.execute("SELECT to_regclass('t')").fetchone() == (None,)
    status = run_scrapy("migrate", "--status", env=env)
    assert "001_broken.sql" in status.stdout and "pending" in status.stdout


def test_concurrent_migrate_runs_apply_each_file_once(fresh_db):
    import concurrent.futures

    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        results = list(pool.map(lambda _: migrations.apply(fresh_db, log=lambda _: None), range(3)))
    applied = [m.version for batch in results for m in batch]
    assert len(applied) == len(set(applied)) == len(migrations.discover())


def test_027_starts_each_proxys_window_of_recent_attempts_from_its_failures_in_a_row(fresh_db, tmp_path):
    """Round 3's failure_count counted failure events in a row: a proxy one short of deactivation
    stays one short under the window rule (docs/stealth.md, "Failures")."""
    folder = tmp_path / "migrations"
    folder.mkdir()
    for path in sorted((ROOT / "migrations").glob("*.sql")):
        if path.name < "027":
            shutil.copy(path, folder)
    migrations.apply(fresh_db, folder, log=lambda _: None)
    with psycopg.connect(fresh_db, autocommit=True) as conn:
        conn.execute("INSERT INTO proxies (host, port, failure_count) VALUES ('a', 1, 4), ('b', 2, 0), ('c', 3, NULL)")
    shutil.copy(ROOT / "migrations" / "027_proxy_recent_attempts.sql", folder)
    migrations.apply(fresh_db, folder, log=lambda _: None)
    with psycopg.connect(fresh_db) as conn:
        rows = conn.execute("SELECT host, failure_count, recent_attempts FROM proxies ORDER BY host").fetchall()
        assert rows == [("a", 4, "FFFF"), ("b", 0, ""), ("c", None, "")]
        with pytest.raises(psycopg.errors.CheckViolation):
            conn.execute("UPDATE proxies SET recent_attempts = 'SFX'")
