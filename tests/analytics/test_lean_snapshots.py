"""migrations/011_lean_snapshots.sql carries the old snapshot rows over: every column reads back
the same through the store_product_snapshots view; and the writer's rows land in the lean table."""

from __future__ import annotations

import shutil

import psycopg
import pytest

from cannaspider.db import migrations
from cannaspider.db.errors import DatabaseSetupError
from tests.helpers import ROOT

COLUMNS = (
    "dispensary_id, provider_product_id, crawl_run_id, captured_at, price_rec, price_med, price_rec_special, "
    "price_med_special, is_on_special, specials, is_in_stock, stock_status, quantity_available, thc_value, "
    "thc_unit, cbd_value, cbd_unit"
)
OLD_ROWS = [
    (
        1,
        "p1",
        7,
        "2026-10-03 08:00Z",
        "10.50",
        None,
        "9.99",
        None,
        True,
        '[{"id": "s1"}]',
        True,
        "in_stock",
        12,
        "21.500",
        "percent",
        "0.125",
        "mg_per_g",
    ),
    (
        1,
        "p1",
        8,
        "2026-11-03 08:00Z",
        "1234567890.12",
        "11.00",
        None,
        "10.00",
        False,
        None,
        True,
        "in_stock",
        None,
        "100.000",
        "mg",
        None,
        None,
    ),
    (1, "p2", None, "2026-11-04 09:30Z", None, None, None, None, False, None, False, "oos", -3, None, None, None, None),
]


def up_to(version: str, tmp_path):
    folder = tmp_path / f"upto{version}"
    folder.mkdir()
    for path in (ROOT / "migrations").glob("*.sql"):
        if path.name[:3] <= version:
            shutil.copy(path, folder / path.name)
    return folder


def old_database(url: str, tmp_path, rows) -> None:
    migrations.apply(url, up_to("010", tmp_path), log=lambda _: None)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SELECT ensure_snapshot_partitions('2026-10-01', 2)")
        d = conn.execute("INSERT INTO dispensaries (name) VALUES ('A') RETURNING id").fetchone()[0]
        assert d == 1
        for pid in ("p1", "p2"):
            conn.execute(
                "INSERT INTO store_products (dispensary_id, provider_product_id, name_raw) VALUES (1, %s, %s)",
                (pid, pid),
            )
        placeholders = ", ".join(["%s"] * 17)
        for row in rows:
            conn.execute(f"INSERT INTO store_product_snapshots ({COLUMNS}) VALUES ({placeholders})", row)


def snapshots(url: str) -> list[tuple]:
    with psycopg.connect(url) as conn:
        return conn.execute(f"SELECT {COLUMNS} FROM store_product_snapshots ORDER BY captured_at").fetchall()


def test_every_column_reads_back_the_same_after_the_migration(empty_database, tmp_path):
    # a snapshot of a store deleted long ago (its products went with it) has nothing to name it by
    orphan = (
        9,
        "gone",
        None,
        "2026-11-05 00:00Z",
        None,
        None,
        None,
        None,
        False,
        None,
        True,
        "in_stock",
        None,
        None,
        None,
        None,
        None,
    )
    old_database(empty_database, tmp_path, OLD_ROWS + [orphan])
    before = [r for r in snapshots(empty_database) if r[0] != 9]
    assert len(before) == 3
    migrations.apply(empty_database, ROOT / "migrations", log=lambda _: None)
    assert snapshots(empty_database) == before
    with psycopg.connect(empty_database) as conn:
        assert conn.execute("SELECT count(*) FROM product_snapshots").fetchone() == (3,)
        # the view's column types are the old table's
        types = conn.execute(
            "SELECT column_name, data_type FROM information_schema.columns "
            "WHERE table_name = 'store_product_snapshots' ORDER BY ordinal_position"
        ).fetchall()
    assert [c for c, _ in types] == [c.strip() for c in COLUMNS.split(",")]
    assert dict(types)["thc_unit"] == "text" and dict(types)["price_rec"] == "numeric"


def test_a_row_that_would_lose_information_stops_the_migration(empty_database, tmp_path):
    inconsistent = list(OLD_ROWS[0])
    inconsistent[10] = False  # is_in_stock false, stock_status 'in_stock': dropping stock_status would lose this
    old_database(empty_database, tmp_path, [tuple(inconsistent)])
    with pytest.raises(DatabaseSetupError, match="011_lean_snapshots.sql failed and was rolled back"):
        migrations.apply(empty_database, ROOT / "migrations", log=lambda _: None)
    assert len(snapshots(empty_database)) == 1  # the old table, untouched


def test_deleting_a_store_deletes_its_snapshots(db):
    with psycopg.connect(db, autocommit=True) as conn:
        d = conn.execute("INSERT INTO dispensaries (name) VALUES ('A') RETURNING id").fetchone()[0]
        p = conn.execute(
            "INSERT INTO store_products (dispensary_id, provider_product_id, name_raw) "
            "VALUES (%s, 'p', 'p') RETURNING id",
            (d,),
        ).fetchone()[0]
        conn.execute("INSERT INTO product_snapshots (store_product_id) VALUES (%s), (%s)", (p, p))
        conn.execute("DELETE FROM dispensaries WHERE id = %s", (d,))
        assert conn.execute("SELECT count(*) FROM product_snapshots").fetchone() == (0,)
