"""The sandbox's forward proxy as a row of the `proxies` table, for as long as a command uses it.

Dutchie crawls go only through the pool's proxies (docs/stealth.md), so `scrapy demo` and the
development `scrapy check` put the sandbox's proxy in the table while their sandbox runs, and take
it out when it stops: a row left behind would point every later crawl at a dead port.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from cannaspider.db import connect


@contextmanager
def sandbox_proxy_row(url: str, proxy_url: str, auth: tuple[str, str]) -> Iterator[str]:
    """Insert the proxy (user `auth[0]`, replacing rows an earlier run of that user left), yield
    its URL with the password masked, delete that user's rows at the end, however it ends."""
    user = auth[0]
    host, port = proxy_url.rsplit("//", 1)[1].split(":")
    with connect(url, autocommit=True) as conn:
        conn.execute("DELETE FROM proxies WHERE username = %s", (user,))
        conn.execute(
            "INSERT INTO proxies (host, port, username, password, protocol) VALUES (%s, %s, %s, %s, 'http')",
            (host, int(port), *auth),
        )
    try:
        yield f"http://{user}:***@{host}:{port}"
    finally:
        with connect(url, autocommit=True) as conn:
            conn.execute("DELETE FROM proxies WHERE username = %s", (user,))
