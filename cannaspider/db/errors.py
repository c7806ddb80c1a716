"""Database errors as the crawl reports them: the setup error whose message is one line saying what
is wrong and what to do, the errors that mean an outage, and one-line, password-free messages."""

from __future__ import annotations

import re

import psycopg
from psycopg_pool import PoolTimeout


class DatabaseSetupError(RuntimeError):
    """The database cannot be reached, started or migrated. str() is a one-line user message."""


class DatabaseUnreachable(PoolTimeout):
    """No connection, refused at once: the crawl's pool found the server unreachable and it still is
    (db/connection.py, FailFastPool). A PoolTimeout, so every handler of an outage handles it."""


# The server or the path to it went away: the rows are fine, keep them for the next attempt.
OUTAGE_ERRORS = (psycopg.OperationalError, psycopg.InterfaceError, PoolTimeout, DatabaseSetupError)


_PASSWORD_IN_URL = re.compile(r"(?P<head>[a-z][a-z0-9+.-]*://[^:/@\s]*:)(?P<pw>[^@\s]*)@", re.I)
_PASSWORD_KV = re.compile(r"(password\s*=\s*)('[^']*'|\S+)", re.I)


def redact(text: str) -> str:
    """Hide passwords in URLs and key=value connection strings."""
    text = _PASSWORD_IN_URL.sub(lambda m: m.group("head") + ("***" if m.group("pw") else "") + "@", text)
    return _PASSWORD_KV.sub(r"\1***", text)


def first_line(exc: BaseException) -> str:
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    return redact(lines[0]) if lines else exc.__class__.__name__
