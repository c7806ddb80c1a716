"""Database access: where PostgreSQL is (DATABASE_URL or embedded), pools, migrations."""

from cannaspider.db.connection import connect, database_url, open_async_pool
from cannaspider.db.errors import DatabaseSetupError

__all__ = ["DatabaseSetupError", "connect", "database_url", "open_async_pool"]
