"""Migration 007 on a database that already holds tasks: identical active duplicates (possible
before it) are folded into one, and the rest of the queue is kept."""

from __future__ import annotations

import shutil

import psycopg

from cannaspider.db import migrations
from tests.helpers import ROOT


def test_007_folds_identical_active_tasks_into_one(empty_database, tmp_path):
    before = tmp_path / "before"
    before.mkdir()
    for path in sorted((ROOT / "migrations").glob("*.sql")):
        if path.name < "007":
            shutil.copy(path, before / path.name)
    migrations.apply(empty_database, before, log=lambda _: None)
    with psycopg.connect(empty_database, autocommit=True) as conn:
        d = conn.execute("INSERT INTO dispensaries (name) VALUES ('s') RETURNING id").fetchone()[0]
        conn.execute(
            "INSERT INTO worker_tasks (role, dispensary_id, priority, status) VALUES "
            "('product_resync', %(d)s, 0, 'pending'), ('product_resync', %(d)s, 20, 'pending'), "
            "('product_resync', %(d)s, 0, 'completed'), ('analytics_refresh', NULL, 0, 'pending'), "
            "('analytics_refresh', NULL, 0, 'pending')",
            {"d": d},
        )
    migrations.apply(empty_database, log=lambda _: None)
    with psycopg.connect(empty_database) as conn:
        rows = conn.execute("SELECT id, status FROM worker_tasks ORDER BY id").fetchall()
    # the most urgent resync stays (then the oldest analytics), the completed one is history
    assert rows == [(1, "cancelled"), (2, "pending"), (3, "completed"), (4, "pending"), (5, "cancelled")]
