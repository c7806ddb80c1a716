"""`scrapy history archive|restore|status`, and `scrapy export snapshots` of an archived month:
the same file as before it moved."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import psycopg
import pyarrow.parquet as pq
import pytest

from tests.helpers import ROOT, run_scrapy
from tests.history.conftest import api_history, raw_rows, seed_history

pytestmark = pytest.mark.integration  # spawns (tests/tiers.py)


@pytest.fixture
def env(db, tmp_path) -> dict:
    return {
        **os.environ,
        "DATABASE_URL": db,
        "CANNASPIDER_DATA_DIR": str(tmp_path / "data"),
        "CANNASPIDER_HISTORY_ARCHIVE_STORE": f"file://{tmp_path}/cold",
    }


def scrapy(env, *args):
    return run_scrapy(*args, env=env, timeout=120)


def test_archive_status_export_and_restore(env, db, tmp_path):
    keys = seed_history(db)
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute("DELETE FROM analytics_roll_state")  # never rolled (the db fixture leaves this table)
    before_rows, before_api = raw_rows(db), api_history(db, keys)
    exported = {}
    for month in ("2026-07", "2026-08"):
        out = tmp_path / f"before-{month}.parquet"
        assert scrapy(env, "export", "snapshots", "--month", month, "-o", str(out)).returncode == 0
        exported[month] = pq.read_table(out).to_pylist()
    assert len(exported["2026-07"]) == 21
    # a range across months, cut mid-month at both ends: read again across the tiers below
    span = ("--since", "2026-07-20T12:00:00", "--until", "2026-10-09")
    assert scrapy(env, "export", "snapshots", *span, "-o", str(tmp_path / "span-before.parquet")).returncode == 0
    span_rows = pq.read_table(tmp_path / "span-before.parquet").to_pylist()
    assert len(span_rows) > 21 and span_rows[0]["store"] == "S1"

    refused = scrapy(env, "history", "archive", "--month", "2026-07")
    assert refused.returncode == 2 and refused.stderr.startswith("error: 2026-07 is not rolled")
    # months older than 2 full months before today's: ours are all older than that
    result = scrapy(env, "history", "archive", "--unrolled", "-s", "HISTORY_ARCHIVE_AFTER_MONTHS=2")
    assert result.returncode == 0, result.stderr
    # (a partition another test left, empty, may come first: the months seeded are looked at)
    lines = [line for line in result.stdout.splitlines() if line[:7] >= "2026-07"]
    assert lines[0].startswith(f"2026-07: 21 snapshots archived to {tmp_path}/cold/product_snapshots_2026_07.parquet")
    # July to September at least (today is December 2026 or later); each with its bytes in both tiers
    assert "B/snapshot in PostgreSQL" in lines[0] and len(lines) >= 3
    archived = [line.split(":")[0] for line in lines]

    status = scrapy(env, "history", "status")
    assert status.returncode == 0, status.stderr
    assert [line.split()[:3] for line in status.stdout.splitlines() if line[:7] >= "2026-07"][:3] == [
        ["2026-07", "cold", "21"],
        ["2026-08", "cold", "21"],
        ["2026-09", "cold", "21"],
    ]

    for month, rows in exported.items():
        out = tmp_path / f"after-{month}.parquet"
        result = scrapy(env, "export", "snapshots", "--month", month, "-o", str(out))
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == f"21 snapshots written to {out}"
        assert pq.read_table(out).to_pylist() == rows
        assert pq.read_schema(out) == pq.read_schema(tmp_path / f"before-{month}.parquet")
    # July to September from their files, October from PostgreSQL: the same rows in the same order
    span_out = tmp_path / "span-after.parquet"
    assert scrapy(env, "export", "snapshots", *span, "-o", str(span_out)).returncode == 0
    assert pq.read_table(span_out).to_pylist() == span_rows
    assert pq.read_schema(span_out) == pq.read_schema(tmp_path / "span-before.parquet")
    csv_out = tmp_path / "after.csv"
    assert scrapy(env, "export", "snapshots", "--month", "2026-07", "-o", str(csv_out)).returncode == 0
    assert len(csv_out.read_text().splitlines()) >= 22  # a header and 21 rows (a status holds a newline)
    assert api_history(db, keys) == before_api

    for month in archived:
        result = scrapy(env, "history", "restore", "--month", month)
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip().startswith(f"{month}: ")
        partition = "product_snapshots_" + month.replace("-", "_")
        assert month > "2026-10" or result.stdout.strip() == f"{month}: 21 snapshots restored to {partition}"
    assert raw_rows(db) == before_rows


def test_bad_input_is_one_error_line(env, db):
    for args, message in (
        (("history", "restore"), "error: restore which month?"),
        (("history", "restore", "--month", "2026-07"), "error: 2026-07 is not archived"),
        (("history", "frobnicate"), "error: history what?"),
        (("history", "archive", "--month", "July"), "error: --month must be YYYY-MM"),
    ):
        result = scrapy(env, *args)
        assert result.returncode == 2 and result.stderr.startswith(message), (args, result.stderr)
    unset = {**env, "CANNASPIDER_HISTORY_ARCHIVE_STORE": ""}
    result = scrapy(unset, "history", "archive")
    assert result.returncode == 2 and "HISTORY_ARCHIVE_STORE is not set" in result.stderr
    with psycopg.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM history_archive").fetchone()[0] == 0


def test_an_archive_killed_in_its_last_step_leaves_postgresql_whole_and_a_rerun_finishes(env, db, tmp_path):
    keys = seed_history(db)
    before_rows, before_api = raw_rows(db), api_history(db, keys)
    holder = psycopg.connect(db)
    holder.execute("LOCK TABLE product_snapshots IN ACCESS SHARE MODE")  # a reader the drop must wait for
    command = [sys.executable, "-m", "scrapy", "history", "archive", "--month", "2026-07", "--unrolled"]
    process = subprocess.Popen(command, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        # the file is written and verified; the archive waits for the table's lock inside its transaction
        deadline = time.monotonic() + 60
        with psycopg.connect(db, autocommit=True) as watcher:
            while not watcher.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE 'LOCK TABLE%%'"
            ).fetchone()[0]:
                assert process.poll() is None and time.monotonic() < deadline, process.communicate()
                time.sleep(0.05)
        process.send_signal(signal.SIGKILL)
        process.wait(30)
    finally:
        holder.close()
        if process.poll() is None:
            process.kill()
    with psycopg.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM history_archive").fetchone()[0] == 0
    assert raw_rows(db) == before_rows
    assert (tmp_path / "cold" / "product_snapshots_2026_07.parquet").exists()  # written, never listed

    result = scrapy(env, "history", "archive", "--month", "2026-07", "--unrolled")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("2026-07: 21 snapshots archived")
    assert api_history(db, keys) == before_api
    with psycopg.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM history_archive").fetchone()[0] == 1
        assert conn.execute("SELECT to_regclass('product_snapshots_2026_07')").fetchone()[0] is None
