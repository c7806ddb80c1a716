"""cannaspider/history/archive.py: a month to Parquet and back, verified row for row; what is left
when a step fails; and the history read across both tiers, the same as from PostgreSQL alone."""

from __future__ import annotations

from datetime import date

import psycopg
import pyarrow.parquet as pq
import pytest

from cannaspider.history import archive
from tests.history.conftest import MONTHS, api_history, raw_rows, seed_history


def partitions(db: str) -> list[date]:
    with psycopg.connect(db) as conn:
        return archive.partitions(conn)


def test_a_month_archived_reads_the_same_and_restores_value_for_value(db, store):
    keys = seed_history(db)
    before_rows, before_api = raw_rows(db), api_history(db, keys)
    before_short = api_history(db, keys, limit=10)  # a limit that ends inside the second month

    moved = [archive.archive_month(db, m, store, require_rolled=False) for m in MONTHS[:2]]
    assert [(m.month, m.rows) for m in moved if m] == [(MONTHS[0], 21), (MONTHS[1], 21)]
    assert MONTHS[0] not in partitions(db) and MONTHS[1] not in partitions(db) and MONTHS[2] in partitions(db)
    # the history API reads both tiers: the same rows, values and types
    assert api_history(db, keys) == before_api
    assert api_history(db, keys, limit=10) == before_short
    assert len(before_api[0]) == 28 and len(before_short[0]) == 10

    # the file: zstd, sorted by product then time, every snapshot of the month
    path = store / "product_snapshots_2026_07.parquet"
    meta = pq.read_metadata(path)
    assert meta.row_group(0).column(0).compression == "ZSTD"
    table = pq.read_table(path)
    keys_in_file = list(zip(table["store_product_id"].to_pylist(), table["captured_at"].to_pylist(), strict=True))
    assert keys_in_file == sorted(keys_in_file) and len(keys_in_file) == 21
    assert not list(store.glob("*partial*"))

    # archiving again: nothing to do
    assert archive.archive_month(db, MONTHS[0], store, require_rolled=False) is None

    for m in MONTHS[:2]:
        assert archive.restore_month(db, m) == 21
    assert raw_rows(db) == before_rows
    with psycopg.connect(db) as conn:
        assert archive.archived(conn) == {}


def test_the_drop_fails_and_postgresql_is_whole_then_a_rerun_finishes(db, store):
    keys = seed_history(db)
    before = raw_rows(db)
    holder = psycopg.connect(db)
    holder.execute("LOCK TABLE product_snapshots IN ACCESS SHARE MODE")  # a long reader of the table
    original = archive.LOCK_TIMEOUT
    archive.LOCK_TIMEOUT = "200ms"
    try:
        with pytest.raises(archive.ArchiveError, match="busy"):
            archive.archive_month(db, MONTHS[0], store, require_rolled=False)
    finally:
        archive.LOCK_TIMEOUT = original
        holder.close()
    # the file was written and verified, but the month is still PostgreSQL's alone
    assert (store / "product_snapshots_2026_07.parquet").exists()
    assert MONTHS[0] in partitions(db) and raw_rows(db) == before
    with psycopg.connect(db) as conn:
        assert archive.archived(conn) == {}
    mtime = (store / "product_snapshots_2026_07.parquet").stat().st_mtime_ns
    moved = archive.archive_month(db, MONTHS[0], store, require_rolled=False)
    assert moved is not None and moved.rows == 21
    assert (store / "product_snapshots_2026_07.parquet").stat().st_mtime_ns == mtime  # kept: it matched
    assert MONTHS[0] not in partitions(db)
    assert api_history(db, keys)[0][0]["captured_at"].month == 7


def test_a_file_that_differs_from_the_partition_is_written_again(db, store):
    seed_history(db)
    store.mkdir()
    path = store / "product_snapshots_2026_08.parquet"
    # a stale file: the month's rows but for one product fewer (another run's, or a month since changed)
    with psycopg.connect(db, autocommit=True) as conn:
        archive._write_parquet(conn, "product_snapshots_2026_08", path)
        full = archive.file_checksums(path)
        pq.write_table(pq.read_table(path).slice(0, 14), path)
        assert archive.file_checksums(path)["rows"] == 14 != full["rows"]
    moved = archive.archive_month(db, MONTHS[1], store, require_rolled=False)
    assert moved is not None and archive.file_checksums(path) == full


def test_checksums_tell_one_changed_value(db, store):
    seed_history(db)
    store.mkdir()
    path = store / "m.parquet"
    with psycopg.connect(db, autocommit=True) as conn:
        archive._write_parquet(conn, "product_snapshots_2026_09", path)
        before = archive._pg_checksums(conn, "product_snapshots_2026_09")
        assert archive.file_checksums(path) == before
        conn.execute(
            "UPDATE product_snapshots_2026_09 SET status = 'Inactive' WHERE ctid = "
            "(SELECT ctid FROM product_snapshots_2026_09 LIMIT 1)"
        )
        after = archive._pg_checksums(conn, "product_snapshots_2026_09")
    assert {k for k in before if before[k] != after[k]} == {"status"}


def test_a_month_the_analytics_have_not_rolled_is_refused(db, store):
    seed_history(db)
    with pytest.raises(archive.ArchiveError, match="not rolled"):
        archive.archive_month(db, MONTHS[0], store)
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute("INSERT INTO analytics_roll_state (rolled_at, rolled_upto) VALUES (now(), '2026-08-05')")
    try:
        assert archive.archive_month(db, MONTHS[0], store) is not None
        with pytest.raises(archive.ArchiveError, match="not rolled"):
            archive.archive_month(db, MONTHS[1], store)
        assert MONTHS[1] in partitions(db)
    finally:  # (the db fixture does not empty the analytics' tables)
        with psycopg.connect(db, autocommit=True) as conn:
            conn.execute("DELETE FROM analytics_roll_state")


def test_a_restore_refuses_a_file_not_the_one_archived(db, store):
    seed_history(db)
    archive.archive_month(db, MONTHS[0], store, require_rolled=False)
    path = store / "product_snapshots_2026_07.parquet"
    pq.write_table(pq.read_table(path), path)  # the same rows, other bytes
    with pytest.raises(archive.ArchiveError, match="sha256"):
        archive.restore_month(db, MONTHS[0])
    assert MONTHS[0] not in partitions(db)


def test_months_due_and_the_store_setting(db, tmp_path):
    seed_history(db)
    with psycopg.connect(db) as conn:
        assert archive.due(conn, 3, date(2026, 12, 6)) == [MONTHS[0], MONTHS[1]]  # Sep, Oct, Nov stay
        assert archive.due(conn, 0, date(2026, 10, 31)) == list(MONTHS[:3])
    assert archive.store_folder(f"file://{tmp_path}/x") == tmp_path / "x"
    assert archive.store_folder(str(tmp_path)) == tmp_path
    with pytest.raises(archive.ArchiveError, match="mount"):
        archive.store_folder("s3://bucket/history")
    with pytest.raises(archive.ArchiveError, match="not set"):
        archive.store_folder(None)


def test_an_empty_month_is_archived_and_restored(db, store):
    keys = seed_history(db)
    empty = date(2026, 1, 1)
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute("SELECT ensure_snapshot_partitions(%s, 1)", (empty,))
    moved = archive.archive_month(db, empty, store)  # nothing to roll: no analytics needed
    assert moved is not None and moved.rows == 0 and empty not in partitions(db)
    before = api_history(db, keys)
    assert archive.restore_month(db, empty) == 0 and empty in partitions(db)
    assert api_history(db, keys) == before
    with psycopg.connect(db, autocommit=True) as conn:  # the partitions outlive the db fixture's TRUNCATE
        conn.execute("DROP TABLE product_snapshots_2026_01")
