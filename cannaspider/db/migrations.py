"""Applies migrations/NNN_name.sql in order, each in its own transaction, under an advisory lock.

Applied files are recorded in schema_migrations with a checksum; running again applies nothing.
A failing file rolls back entirely and stops the run, so the schema stays as it was before it.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psycopg
from scrapy.settings import BaseSettings

from cannaspider import env
from cannaspider.db.connection import connect
from cannaspider.db.errors import DatabaseSetupError, first_line

# pg_advisory_lock key: any constant unique to this job ("cannaspider migrations").
LOCK_KEY = 0x63616E6E61
FILENAME = re.compile(r"^(?P<version>\d{3,})_(?P<name>[a-z0-9_]+)\.sql$")


@dataclass(frozen=True)
class Migration:
    version: str
    name: str
    path: Path

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.path.read_bytes()).hexdigest()


@dataclass(frozen=True)
class MigrationStatus:
    migration: Migration
    applied_at: object | None
    changed_since_applied: bool


def migrations_dir(settings: BaseSettings | None = None) -> Path:
    """CANNASPIDER_MIGRATIONS_DIR (`-s` > environment > settings.py), else migrations/ of the checkout."""
    override = env.configured(settings, "CANNASPIDER_MIGRATIONS_DIR")
    if override:
        return Path(override)
    root = env.project_root()
    if root is None:
        raise DatabaseSetupError(
            "no scrapy.cfg here: run `scrapy migrate` from a checkout, or set CANNASPIDER_MIGRATIONS_DIR"
        )
    return root / "migrations"


def discover(folder: Path | None = None) -> list[Migration]:
    folder = folder or migrations_dir()
    if not folder.is_dir():
        raise DatabaseSetupError(f"no migrations folder at {folder} (set CANNASPIDER_MIGRATIONS_DIR)")
    found = []
    for path in sorted(folder.iterdir()):
        match = FILENAME.match(path.name)
        if match:
            found.append(Migration(match["version"], match["name"], path))
    versions = [m.version for m in found]
    if len(versions) != len(set(versions)):
        raise DatabaseSetupError(f"two migrations share a version number in {folder}")
    return found


_BOOKKEEPING = """
CREATE TABLE IF NOT EXISTS schema_migrations (
    version    text PRIMARY KEY,
    name       text NOT NULL,
    checksum   text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)
"""


def not_applied(applied_versions: set[str], settings: BaseSettings | None = None) -> list[Migration]:
    """The migrations of this checkout missing from `applied_versions` ([] when there is no
    migrations folder to compare with, as in a Scrapyd egg)."""
    try:
        found = discover(migrations_dir(settings))
    except DatabaseSetupError:
        return []
    return [mig for mig in found if mig.version not in applied_versions]


def _applied(conn: psycopg.Connection) -> dict[str, tuple[str, object]]:
    rows = conn.execute("SELECT version, checksum, applied_at FROM schema_migrations").fetchall()
    return {version: (checksum, applied_at) for version, checksum, applied_at in rows}


def status(url: str, folder: Path | None = None) -> list[MigrationStatus]:
    with connect(url, autocommit=True) as conn:
        conn.execute(_BOOKKEEPING)
        applied = _applied(conn)
    out = []
    for mig in discover(folder):
        checksum, applied_at = applied.get(mig.version, (None, None))
        out.append(MigrationStatus(mig, applied_at, checksum is not None and checksum != mig.checksum))
    return out


def apply(url: str, folder: Path | None = None, log: Callable[[str], object] = print) -> list[Migration]:
    """Apply pending migrations; return those applied. Raises DatabaseSetupError on failure."""
    pending_all = discover(folder)
    done: list[Migration] = []
    with connect(url, autocommit=True) as conn:
        conn.execute("SELECT pg_advisory_lock(%s)", (LOCK_KEY,))
        try:
            conn.execute(_BOOKKEEPING)
            applied = _applied(conn)
            for mig in pending_all:
                if mig.version in applied:
                    continue
                sql = mig.path.read_text()
                try:
                    with conn.transaction():
                        conn.execute(sql)
                        conn.execute(
                            "INSERT INTO schema_migrations (version, name, checksum) VALUES (%s, %s, %s)",
                            (mig.version, mig.name, mig.checksum),
                        )
                except psycopg.Error as exc:
                    raise DatabaseSetupError(
                        f"migration {mig.path.name} failed and was rolled back: {first_line(exc)} "
                        "(fix the file and run `scrapy migrate` again; earlier migrations stay applied)"
                    ) from exc
                log(f"applied {mig.path.name}")
                done.append(mig)
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", (LOCK_KEY,))
    return done
