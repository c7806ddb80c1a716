"""sandbox/pool_rows.py: the sandbox's proxy is in the pool only while the command using it runs
(`scrapy demo` used to leave it behind, pointing later crawls and `scrapy check` at a dead port)."""

from __future__ import annotations

import pytest

from sandbox.pool_rows import sandbox_proxy_row


def test_the_sandbox_proxy_leaves_the_table_however_the_command_ends(db, sql):
    sql("INSERT INTO proxies (host, port, username, password) VALUES ('10.0.0.1', 3128, 'operator', 'p')")
    with pytest.raises(SystemExit):
        with sandbox_proxy_row(db, "http://127.0.0.1:4567", ("cannaspider-demo", "secret")) as masked:
            assert masked == "http://cannaspider-demo:***@127.0.0.1:4567"
            assert sql("SELECT host, port, username FROM proxies ORDER BY id")[1] == (
                "127.0.0.1",
                4567,
                "cannaspider-demo",
            )
            raise SystemExit("a crawl of the demo failed")
    assert sql("SELECT username FROM proxies") == [("operator",)]  # the operator's proxy stays
