"""Moving a month of snapshots between the tiers (docs/history.md): `archive_month` writes a
partition of product_snapshots to one Parquet file, verifies it row for row and drops the
partition; `restore_month` loads the file back into a partition.

Each step leaves the database whole if it is killed. The file is written beside its name
(`.partial`) and renamed when complete; the partition goes only in the transaction that lists the
month in history_archive, after the file's per-column checksums matched the partition's, and
under a lock that holds any writer off between the check and the drop. A rerun finds the file
(kept if it still matches) or writes it again, and finishes. A restore is one transaction: the
partition, its rows, their checksums checked against the listed ones, the month's row deleted.

PostgreSQL streams the month out as CSV (COPY, the server's fastest way out) into a scratch file
beside the target; DuckDB reads it, sorts it by the history queries' key (the product, then the
time: a product's month is a few adjacent rows, and the row groups' min/max statistics name the
ones that hold it) and writes Parquet with zstd. DuckDB also computes the file's checksums and
streams it back for a restore.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import duckdb
import psycopg
from psycopg import sql

from cannaspider.db import connect
from cannaspider.history.columns import ARCHIVE_COLUMNS, SORT_KEY, UNIT_CODES

# Rows per Parquet row group: a product's month (30 crawls in the benchmark, 720 hourly) lies in one
# or two groups, and a single product's read decodes only those. Smaller groups cost footer bytes.
ROW_GROUP_ROWS = 8192
LOCK_TIMEOUT = "10s"  # the partition's drop waits this long for readers and writers of the table
COPY_BLOCK = 1 << 20


class ArchiveError(Exception):
    """A month that cannot be moved now: one line for the operator (nothing was changed)."""


@dataclass(frozen=True)
class Moved:
    month: date
    rows: int
    bytes: int  # the Parquet file's
    pg_bytes: int  # the partition's, with its indexes
    path: Path
    seconds: dict[str, float]  # wall time of each step: checksums in PostgreSQL, the file written, verified


def store_folder(value: str | None) -> Path:
    """HISTORY_ARCHIVE_STORE as a folder: a path or a file:// URI. An object store (S3, GCS) is used
    as a folder mounted on the host (docs/history.md)."""
    if not value:
        raise ArchiveError("HISTORY_ARCHIVE_STORE is not set: give the folder the cold months go to")
    parts = urlsplit(value)
    if parts.scheme == "file":
        path = Path(unquote(parts.path))
    elif parts.scheme and len(parts.scheme) > 1:  # (a Windows drive letter is no scheme)
        raise ArchiveError(
            f"HISTORY_ARCHIVE_STORE {parts.scheme}:// is not read directly: mount the bucket as a folder "
            "and give its path (docs/history.md)"
        )
    else:
        path = Path(value)
    return path.expanduser().resolve()


def month_start(day: date) -> date:
    return day.replace(day=1)


def add_months(month: date, n: int) -> date:
    index = month.year * 12 + month.month - 1 + n
    return date(index // 12, index % 12 + 1, 1)


def partition_name(month: date) -> str:
    return f"product_snapshots_{month:%Y_%m}"


def file_name(month: date) -> str:
    return f"{partition_name(month)}.parquet"


def partitions(conn: psycopg.Connection[Any]) -> list[date]:
    """The months product_snapshots has a partition for, oldest first."""
    rows = conn.execute(
        "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
        "WHERE i.inhparent = 'product_snapshots'::regclass"
    ).fetchall()
    months = []
    for (name,) in rows:
        year, month = name.removeprefix("product_snapshots_").split("_")
        months.append(date(int(year), int(month), 1))
    return sorted(months)


def archived(conn: psycopg.Connection[Any]) -> dict[date, dict[str, Any]]:
    rows = conn.execute(
        "SELECT month, store, file, rows, bytes, pg_bytes, sha256, checksums, archived_at "
        "FROM history_archive ORDER BY month"
    ).fetchall()
    keys = ("month", "store", "file", "rows", "bytes", "pg_bytes", "sha256", "checksums", "archived_at")
    return {row[0]: dict(zip(keys, row, strict=True)) for row in rows}


def due(conn: psycopg.Connection[Any], after_months: int, today: date) -> list[date]:
    """The partitions whose whole month is older than `after_months` full months before this one."""
    first_hot = add_months(month_start(today), -after_months)
    return [m for m in partitions(conn) if m < first_hot]


# --- checksums: the same text of every value on both sides, hashed with the row's key ---------------
# A column's checksum is the sum over the rows of the first 60 bits of md5(key|value): a value moved
# to another row, changed, lost or doubled changes it; the order of the rows does not.
def _pg_checksums(conn: psycopg.Connection[Any], table: str) -> dict[str, int]:
    key = "store_product_id::text || '|' || (extract(epoch FROM captured_at) * 1000000)::bigint::text"
    sums = [
        f"coalesce(sum(('x' || substr(md5({key} || '|' || coalesce({text}, '\\N')), 1, 15))::bit(60)::bigint), 0)"
        for _, text, _ in ARCHIVE_COLUMNS
    ]
    query = sql.SQL("SELECT count(*), " + ", ".join(sums) + " FROM {}").format(sql.Identifier(table))
    row = conn.execute(query).fetchone()
    assert row is not None
    return {"rows": int(row[0]), **{name: int(v) for (name, _, _), v in zip(ARCHIVE_COLUMNS, row[1:], strict=True)}}


def _duck_text(name: str, kind: str) -> str:
    return f"CAST(epoch_us({name}) AS VARCHAR)" if kind == "TIMESTAMPTZ" else f"CAST({name} AS VARCHAR)"


def file_checksums(path: Path) -> dict[str, int]:
    key = "CAST(store_product_id AS VARCHAR) || '|' || CAST(epoch_us(captured_at) AS VARCHAR)"
    sums = [
        f"coalesce(sum(CAST('0x' || substr(md5({key} || '|' || coalesce({_duck_text(n, k)}, '\\N')), 1, 15)"
        " AS BIGINT)), 0)"
        for n, _, k in ARCHIVE_COLUMNS
    ]
    with duck() as db:
        row = db.execute(f"SELECT count(*), {', '.join(sums)} FROM read_parquet(?)", [str(path)]).fetchone()
    assert row is not None
    return {"rows": int(row[0]), **{name: int(v) for (name, _, _), v in zip(ARCHIVE_COLUMNS, row[1:], strict=True)}}


@contextmanager
def duck() -> Iterator[duckdb.DuckDBPyConnection]:
    """An in-memory DuckDB whose times are UTC (as the files' and the CSV's)."""
    conn = duckdb.connect()
    try:
        conn.execute("SET TimeZone = 'UTC'")
        yield conn
    finally:
        conn.close()


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(COPY_BLOCK):
            digest.update(block)
    return digest.hexdigest()


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_parquet(conn: psycopg.Connection[Any], table: str, path: Path) -> None:
    """The partition's rows to `path` (sorted, zstd) through `path`.partial, renamed when complete."""
    scratch = path.with_name(f".{path.name}.csv.partial")
    columns = sql.SQL(", ").join(
        sql.SQL("snapshot_unit({}) AS {}").format(sql.Identifier(n), sql.Identifier(n))
        if n in ("thc_unit", "cbd_unit")
        else sql.SQL("{}::text").format(sql.Identifier(n))
        if n == "specials"
        else sql.Identifier(n)
        for n, _, _ in ARCHIVE_COLUMNS
    )
    try:
        conn.execute("SET TimeZone = 'UTC'")  # times as +00 text, which DuckDB reads back exactly
        copy = sql.SQL("COPY (SELECT {} FROM {}) TO STDOUT (FORMAT csv)").format(columns, sql.Identifier(table))
        with open(scratch, "wb") as out, conn.cursor().copy(copy) as stream:
            for block in stream:
                out.write(block)
        types = ", ".join(f"'{n}': '{k}'" for n, _, k in ARCHIVE_COLUMNS)
        rows = (
            f"read_csv('{_quoted(scratch)}', columns = {{{types}}}, header = false, allow_quoted_nulls = false,"
            " quote = '\"', escape = '\"', delim = ',')"
            if scratch.stat().st_size
            # an empty month (DuckDB reads no columns from an empty CSV): the file has its columns, no row
            else "(SELECT " + ", ".join(f"CAST(NULL AS {k}) AS {n}" for n, _, k in ARCHIVE_COLUMNS) + " LIMIT 0)"
        )
        write_sorted(rows, path)
    finally:
        scratch.unlink(missing_ok=True)


def write_sorted(rows: str, path: Path, params: list[Any] | None = None) -> None:
    """`rows` (DuckDB's SQL for a relation with ARCHIVE_COLUMNS, `params` its parameters) written as
    the cold tier's file: those columns in that order, sorted by SORT_KEY, zstd, ROW_GROUP_ROWS a
    group, through `path`.partial, renamed when complete."""
    partial = path.with_name(f"{path.name}.partial")
    names = ", ".join(n for n, _, _ in ARCHIVE_COLUMNS)
    try:
        with duck() as db:
            db.execute(
                f"COPY (SELECT {names} FROM {rows} ORDER BY {', '.join(SORT_KEY)})"
                f" TO '{_quoted(partial)}' (FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE {ROW_GROUP_ROWS})",
                params,
            )
        _fsync(partial)
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)


def _quoted(path: Path) -> str:
    return str(path).replace("'", "''")


def archive_month(url: str, month: date, folder: Path, *, require_rolled: bool = True) -> Moved | None:
    """Move one month to the cold tier; None when it has no partition (archived before)."""
    table = partition_name(month)
    path = folder / file_name(month)
    with connect(url, autocommit=True) as conn:
        listed = archived(conn).get(month)
        if month not in partitions(conn):
            return None
        if listed is not None:
            # a partition made again for an archived month (ensure_snapshot_partitions from an old
            # date): empty, it is dropped; with rows, they are a month of their own to merge by hand
            count = conn.execute(sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(table))).fetchone()
            if count and count[0]:
                raise ArchiveError(f"{month:%Y-%m} is archived and its partition has rows again: restore it first")
            _drop(conn, table, None)
            return None
        if require_rolled:
            _check_rolled(conn, month)
        folder.mkdir(parents=True, exist_ok=True)
        clock = time.perf_counter()
        seconds: dict[str, float] = {}

        def lap(step: str) -> None:
            nonlocal clock
            now = time.perf_counter()
            seconds[step] = seconds.get(step, 0.0) + now - clock
            clock = now

        expected = _pg_checksums(conn, table)
        lap("checksums")
        kept = path.exists() and file_checksums(path) == expected  # a rerun keeps a file that matches
        lap("verify")
        if not kept:
            _write_parquet(conn, table, path)
            lap("write")
            got = file_checksums(path)
            lap("verify")
            if got != expected:
                path.unlink(missing_ok=True)
                bad = sorted(k for k in expected if got.get(k) != expected[k])
                raise ArchiveError(f"{month:%Y-%m}: the file differs from the partition in {', '.join(bad)}")
        row = listing(month, folder, expected)
        pg_bytes = _drop(conn, table, row)
        lap("drop")
    return Moved(month, expected["rows"], int(row["bytes"]), pg_bytes, path, seconds)


def listing(month: date, folder: Path, checksums: dict[str, int]) -> dict[str, Any]:
    """history_archive's row for `month`'s file in `folder`, whose rows' checksums (verified against
    the partition's) are `checksums`; the partition's size is added when it is dropped (list_month)."""
    path = folder / file_name(month)
    return {
        "month": month,
        "store": str(folder),
        "file": path.name,
        "rows": checksums["rows"],
        "bytes": path.stat().st_size,
        "sha256": _sha256(path),
        "checksums": json.dumps({k: str(v) for k, v in checksums.items()}),
    }


def list_month(conn: psycopg.Connection[Any], listed: dict[str, Any], pg_bytes: int) -> None:
    """The month's row in history_archive (`listing`'s): from its commit on, readers take the month
    from its file."""
    conn.execute(
        "INSERT INTO history_archive (month, store, file, rows, bytes, pg_bytes, sha256, checksums) "
        "VALUES (%(month)s, %(store)s, %(file)s, %(rows)s, %(bytes)s, %(pg_bytes)s, %(sha256)s, "
        "%(checksums)s::jsonb)",
        {**listed, "pg_bytes": pg_bytes},
    )


def _check_rolled(conn: psycopg.Connection[Any], month: date) -> None:
    """The analytics read a month's snapshots once, when they roll them into their daily tables
    (docs/analytics.md): a month not rolled through would be missing from them for good."""
    row = conn.execute("SELECT max(rolled_upto) FROM analytics_roll_state").fetchone()
    end = add_months(month, 1)
    newest = conn.execute(
        sql.SQL("SELECT max(captured_at) FROM {}").format(sql.Identifier(partition_name(month)))
    ).fetchone()
    if newest is None or newest[0] is None:
        return  # nothing to roll
    if row is None or row[0] is None or row[0] < newest[0]:
        raise ArchiveError(
            f"{month:%Y-%m} is not rolled into the analytics yet (run the analytics refresh first, "
            f"or --unrolled to archive it anyway; its snapshots end before {end:%Y-%m-%d})"
        )


def _drop(conn: psycopg.Connection[Any], table: str, listing: dict[str, Any] | None) -> int:
    """List the month and drop its partition in one transaction; returns the partition's bytes."""
    with conn.transaction():
        conn.execute(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'")
        try:
            # the parent first, as DETACH takes it: no writer gets in between the count and the drop
            conn.execute("LOCK TABLE product_snapshots IN ACCESS EXCLUSIVE MODE")
        except psycopg.errors.LockNotAvailable:
            raise ArchiveError(f"{table}: the table is busy (lock_timeout {LOCK_TIMEOUT}); run again") from None
        ident = sql.Identifier(table)
        size = conn.execute("SELECT pg_total_relation_size(%s::regclass)", (table,)).fetchone()
        pg_bytes = int(size[0]) if size else 0
        if listing is not None:
            count = conn.execute(sql.SQL("SELECT count(*) FROM {}").format(ident)).fetchone()
            if count is None or count[0] != listing["rows"]:
                raise ArchiveError(f"{table}: rows changed while it was archived; run again")
            list_month(conn, listing, pg_bytes)
        conn.execute(sql.SQL("ALTER TABLE product_snapshots DETACH PARTITION {}").format(ident))
        conn.execute(sql.SQL("DROP TABLE {}").format(ident))
    return pg_bytes


def restore_month(url: str, month: date) -> int:
    """Load an archived month back into its partition; returns its rows. The file stays."""
    table = partition_name(month)
    with connect(url, autocommit=True) as conn:
        listed = archived(conn).get(month)
        if listed is None:
            raise ArchiveError(f"{month:%Y-%m} is not archived")
        path = Path(listed["store"]) / listed["file"]
        if not path.is_file():
            raise ArchiveError(f"{month:%Y-%m}: its file {path} is missing")
        if _sha256(path) != listed["sha256"]:
            raise ArchiveError(f"{month:%Y-%m}: its file {path} is not the one archived (sha256 differs)")
        scratch = path.with_name(f".{path.name}.restore.csv.partial")
        try:
            _parquet_to_csv(path, scratch)
            with conn.transaction():
                if month in partitions(conn):
                    count = conn.execute(sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(table))).fetchone()
                    if count and count[0]:
                        raise ArchiveError(f"{table} has rows again: nothing restored")
                else:
                    conn.execute("SELECT ensure_snapshot_partitions(%s, 1)", (month,))
                names = sql.SQL(", ").join(sql.Identifier(n) for n, _, _ in ARCHIVE_COLUMNS)
                copy = sql.SQL("COPY {} ({}) FROM STDIN (FORMAT csv)").format(sql.Identifier(table), names)
                with open(scratch, "rb") as f, conn.cursor().copy(copy) as stream:
                    while block := f.read(COPY_BLOCK):
                        stream.write(block)
                got = _pg_checksums(conn, table)
                want = {k: int(v) for k, v in listed["checksums"].items()}
                if got != want:
                    bad = sorted(k for k in want if got.get(k) != want[k])
                    raise ArchiveError(f"{month:%Y-%m}: the rows loaded differ from those archived in {', '.join(bad)}")
                conn.execute("DELETE FROM history_archive WHERE month = %s", (month,))
        finally:
            scratch.unlink(missing_ok=True)
    return int(listed["rows"])


def _parquet_to_csv(path: Path, scratch: Path) -> None:
    """The file's rows as CSV that COPY loads into the lean row (units as their one-letter codes)."""
    codes = " ".join(f"WHEN '{name}' THEN '{code}'" for name, code in UNIT_CODES.items())
    columns = ", ".join(
        f"CASE {n} {codes} END AS {n}" if n in ("thc_unit", "cbd_unit") else n for n, _, _ in ARCHIVE_COLUMNS
    )
    with duck() as db:
        db.execute(
            f"COPY (SELECT {columns} FROM read_parquet(?)) TO '{_quoted(scratch)}' (FORMAT csv, HEADER false)",
            [str(path)],
        )
