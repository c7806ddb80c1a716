"""The bounds on what anyone may ask /img for (#28): a client's requests waiting on renders are
capped (429 past IMG_RENDERS_PER_CLIENT; what needs no render still served), and renders beyond
the pixel budget wait their turn. Served by a real uvicorn on 127.0.0.1; the test holds the budget
on the server's own loop to keep renders waiting while it looks."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest
from fastapi import FastAPI
from PIL import Image

from cannaspider.web.images import ImageProxy, image_router
from tests.httpclient import Reply, http
from tests.web.test_images import REL, serve

pytestmark = pytest.mark.integration  # spawns (tests/tiers.py)


def until(check: Callable[[], Any], timeout: float = 30) -> Any:
    deadline = time.monotonic() + timeout
    while not (found := check()):
        assert time.monotonic() < deadline, "not within the time given"
        time.sleep(0.01)
    return found


@dataclass
class Site:
    base: str
    proxy: ImageProxy
    loop: asyncio.AbstractEventLoop

    def get(self, query: str) -> Reply:
        return http("GET", f"{self.base}/img/{REL}{query}")

    @contextmanager
    def budget_held(self) -> Iterator[None]:
        """The whole render budget taken, on the server's loop, until the block ends."""
        release = threading.Event()
        budget = self.proxy.budget

        async def hold() -> None:
            async with budget.hold(budget.capacity):
                while not release.is_set():
                    await asyncio.sleep(0.01)

        done = asyncio.run_coroutine_threadsafe(hold(), self.loop)
        until(lambda: budget.held == budget.capacity)
        try:
            yield
        finally:
            release.set()
            done.result(30)


@pytest.fixture
def site(tmp_path):
    store = tmp_path / "store"
    (store / REL).parent.mkdir(parents=True)
    Image.new("RGB", (400, 200), (200, 30, 30)).save(store / REL, "WEBP")
    proxy = ImageProxy(store, tmp_path / "cache", threads=2, renders_per_client=2, render_budget_pixels=1_000_000)
    app = FastAPI()
    app.include_router(image_router(proxy=proxy))
    loops: list[asyncio.AbstractEventLoop] = []

    @app.get("/loop")
    async def loop() -> None:
        loops.append(asyncio.get_running_loop())

    with serve(app) as (base, _):
        assert http("GET", f"{base}/loop").status == 200
        yield Site(base, proxy, loops[0])


def test_a_clients_renders_at_once_are_capped(site):
    assert site.get("?w=50").status == 200  # rendered, then in memory
    with ThreadPoolExecutor(2) as pool, site.budget_held():
        waiting = [pool.submit(site.get, f"?w={w}") for w in (100, 101)]
        until(lambda: site.proxy.rendering == {"127.0.0.1": 2} and site.proxy.budget.waiting == 2)
        refused = site.get("?w=102")
        assert refused.status == 429 and refused.headers["retry-after"] == "1"
        assert "more than 2 images rendering at once" in refused.json()["detail"]
        # what needs no render is still served meanwhile: a variant in memory, the original
        assert site.get("?w=50").status == 200 and site.get("").status == 200
        assert not any(f.done() for f in waiting)
    assert [f.result().status for f in waiting] == [200, 200]
    assert site.proxy.rendering == {} and site.get("?w=102").status == 200


def test_renders_beyond_the_budget_wait_their_turn(site):
    """Eight renders asked for while the budget is taken all wait, then all are served."""
    site.proxy.renders_per_client = 100
    with ThreadPoolExecutor(8) as pool, site.budget_held():
        replies = [pool.submit(site.get, f"?w=400&q={q}") for q in range(60, 68)]
        until(lambda: site.proxy.budget.waiting == 8)
        assert not any(r.done() for r in replies)
    assert [r.result().status for r in replies] == [200] * 8
    assert site.proxy.budget.peak == 1_000_000 and site.proxy.budget.held == 0
