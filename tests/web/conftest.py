"""The HTTP service on a free loopback port, served by uvicorn in a thread, over the test database."""

from __future__ import annotations

import socket
import threading
import time

import pytest
import uvicorn

from cannaspider import settings as defaults
from cannaspider.web.app import create_app

TOKEN = "t0ken-for-tests-only"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Service:
    def __init__(self, database_url: str, token: str | None, pool_timeout_s: float = 10.0):
        self.port = _free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(
            create_app(database_url, token, pool_max_size=defaults.DB_POOL_MAX_SIZE, pool_timeout_s=pool_timeout_s),
            host="127.0.0.1",
            port=self.port,
            log_level="warning",
            lifespan="on",
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> Service:
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            assert time.monotonic() < deadline and self.thread.is_alive(), "the service did not start"
            time.sleep(0.05)
        return self

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(10)


@pytest.fixture
def api(db):
    with Service(db, TOKEN) as service:
        yield service


@pytest.fixture
def api_without_token(db):
    with Service(db, None) as service:
        yield service
