"""DATABASE_URL is honoured; a wrong one is one clear line with no password in it."""

from __future__ import annotations

import os

import psycopg
import pytest

from cannaspider.db import database_url
from tests.helpers import run_scrapy


def test_database_url_from_environment_wins(monkeypatch, db_url):
    monkeypatch.setenv("DATABASE_URL", db_url)
    assert database_url() == db_url


@pytest.mark.integration
def test_scrapy_migrate_uses_database_url(empty_database, tmp_path):
    # a fresh database: `scrapy migrate` with DATABASE_URL must create the schema there and only there
    env = {**os.environ, "DATABASE_URL": empty_database, "CANNASPIDER_DATA_DIR": str(tmp_path / "unused")}
    result = run_scrapy("migrate", env=env)
    assert result.returncode == 0, result.stderr
    with psycopg.connect(empty_database) as conn:
        assert conn.execute("SELECT count(*) FROM schema_migrations").fetchone()[0] >= 4
    assert not (tmp_path / "unused" / "postgres").exists()  # no embedded server was started


@pytest.mark.integration
def test_unreachable_server_is_one_clear_line_without_the_password(tmp_path):
    env = {
        **os.environ,
        "DATABASE_URL": "postgresql://app:s3cret-pw@127.0.0.1:1/nowhere",
        "CANNASPIDER_DATA_DIR": str(tmp_path),
    }
    result = run_scrapy("migrate", env=env)
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: cannot connect to PostgreSQL at postgresql://app:***@127.0.0.1:1/nowhere")
    assert "DATABASE_URL" in lines[0]
    assert "s3cret-pw" not in result.stderr + result.stdout
