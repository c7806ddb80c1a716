"""Fixtures of the pipeline tests that run on the real database."""

from __future__ import annotations

import psycopg
import pytest


@pytest.fixture
def dispensary(db, monkeypatch):
    """One store, its products crawled by the tests' pipelines."""
    monkeypatch.setenv("DATABASE_URL", db)
    with psycopg.connect(db, autocommit=True) as conn:
        return conn.execute(
            "INSERT INTO dispensaries (name, platform_dispensary_id) VALUES ('G', %s) RETURNING id", ("d" * 24,)
        ).fetchone()[0]
