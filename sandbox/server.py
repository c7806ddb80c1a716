"""Starts the sandbox: the Dutchie-like site (GraphQL, menus, websites, images, competitor
pages, control API) and the Firecrawl-like API on loopback ports, plus the forward proxy.

`Sandbox().start()` runs the servers on a background thread (tests, demo); `scrapy sandbox`
and `python -m sandbox` run them in the foreground.
"""

from __future__ import annotations

import asyncio
import json
import signal
import threading
from dataclasses import dataclass

from aiohttp import web

from sandbox import control, dutchie_api, edge_compression, firecrawl_api, jane_api, websites
from sandbox.catalog import Catalog, CatalogConfig
from sandbox.forward_proxy import ForwardProxy

# what a stop gives the requests still being answered (start_async)
SHUTDOWN_TIMEOUT_S = 0.5


@dataclass
class SandboxURLs:
    base: str
    graphql: str
    firecrawl: str
    proxy: str | None
    jane: str = ""  # Jane's Algolia host (JANE_ALGOLIA_URL)

    def as_dict(self) -> dict:
        return dict(self.__dict__)


def make_dutchie_app(config: CatalogConfig) -> web.Application:
    # GraphQL answers compressed as Cloudflare's edge does (sandbox/edge_compression.py)
    app = web.Application(client_max_size=8 * 1024 * 1024, middlewares=[edge_compression.edge_compression])
    app[edge_compression.EDGE] = edge_compression.EdgeSettings()
    app[dutchie_api.DUTCHIE] = dutchie_api.DutchieState(Catalog(config), seed=config.seed)
    dutchie_api.add_routes(app)
    # Jane's Algolia on the same host, under /jane (its stores in the Dutchie catalog's cities)
    jane_api.add_routes(app, jane_api.JaneCatalog(config), seed=config.seed)
    websites.add_routes(app)
    control.add_routes(app)
    return app


async def _cancel_the_rest() -> None:
    """Cancel and await what is still running on the loop (a handler the stop cancelled, still
    unwinding), rather than let closing the loop destroy it pending, with a warning."""
    tasks = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


class Sandbox:
    def __init__(
        self,
        config: CatalogConfig = CatalogConfig(),
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        firecrawl_port: int = 0,
        proxy: bool = False,
        proxy_auth: tuple[str, str] | None = None,
    ):
        self.config, self.host = config, host
        self.ports = {"dutchie": port, "firecrawl": firecrawl_port}
        self.want_proxy, self.proxy_auth = proxy, proxy_auth
        self.loop: asyncio.AbstractEventLoop | None = None
        self.thread: threading.Thread | None = None
        self.runners: list[web.AppRunner] = []
        self.proxy: ForwardProxy | None = None
        self.urls: SandboxURLs | None = None
        self.dutchie_app: web.Application | None = None
        self.firecrawl_app: web.Application | None = None

    async def start_async(self) -> SandboxURLs:
        self.dutchie_app = make_dutchie_app(self.config)
        self.firecrawl_app = firecrawl_api.make_app()
        bound = {}
        for name, app in (("dutchie", self.dutchie_app), ("firecrawl", self.firecrawl_app)):
            # shutdown_timeout: stopping waits this long for requests still being answered, then
            # cancels them. With aiohttp's default (60 s), a fault's sleep still running at the end
            # of a test session ("slow", a stalled Firecrawl call, the slow competitor page), its
            # client long gone, held the session's end until Sandbox.stop's join gave up: 30 s.
            runner = web.AppRunner(app, access_log=None, shutdown_timeout=SHUTDOWN_TIMEOUT_S)
            await runner.setup()
            site = web.TCPSite(runner, self.host, self.ports[name], backlog=512)
            await site.start()
            self.runners.append(runner)
            bound[name] = runner.addresses[0][1]
        if self.want_proxy:
            user, password = self.proxy_auth or (None, None)
            self.proxy = ForwardProxy(user, password, name="sandbox").start()
        base = f"http://{self.host}:{bound['dutchie']}"
        self.urls = SandboxURLs(
            base=base,
            graphql=f"{base}/api-3/graphql",
            firecrawl=f"http://{self.host}:{bound['firecrawl']}",
            proxy=self.proxy.url if self.proxy else None,
            jane=f"{base}/jane",
        )
        return self.urls

    async def stop_async(self) -> None:
        # the proxy first: a runner's cleanup waits for open keep-alive connections (up to a
        # minute), and a caller that gives up waiting (Sandbox.stop, a test session's end) would
        # otherwise leave the proxy, a process of its own, running
        if self.proxy:
            self.proxy.stop()
        for runner in self.runners:
            await runner.cleanup()
        self.runners = []

    def start(self) -> SandboxURLs:
        """Run on a background thread; returns once every server listens."""
        ready = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            self.loop = asyncio.new_event_loop()
            asyncio.set_event_loop(self.loop)
            try:
                self.loop.run_until_complete(self.start_async())
            except BaseException as exc:  # noqa: BLE001 - reported to the caller's thread, which raises it
                failure.append(exc)
                ready.set()
                return
            ready.set()
            self.loop.run_forever()
            self.loop.run_until_complete(self.stop_async())
            self.loop.run_until_complete(_cancel_the_rest())
            self.loop.close()

        self.thread = threading.Thread(target=run, name="cannaspider-sandbox", daemon=True)
        self.thread.start()
        ready.wait(60)
        if failure:
            raise failure[0]
        assert self.urls is not None
        return self.urls

    def stop(self) -> None:
        if self.loop and self.thread:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(30)

    def __enter__(self) -> Sandbox:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def serve_forever(sandbox: Sandbox, announce=print) -> None:
    """Foreground: start, announce the URLs (one JSON line first, for scripts), run until killed."""

    async def main() -> None:
        # SIGTERM (a script's terminate(), a service manager) ends it like Ctrl-C: the forward proxy
        # runs in its own session and would otherwise outlive the sandbox. Installed before anything
        # starts, so a signal that arrives right after the announcement is not the default (fatal) one.
        stopped = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stopped.set)
        urls = await sandbox.start_async()
        announce(json.dumps(urls.as_dict()))
        announce(f"Dutchie GraphQL   {urls.graphql}")
        announce(f"Jane Algolia      {urls.jane}")
        announce(f"Firecrawl v2      {urls.firecrawl}")
        announce(f"Store websites    {urls.base}/sites/<cName>/")
        announce(f"Control API       {urls.base}/_sandbox/state")
        if urls.proxy:
            announce(f"Forward proxy     {urls.proxy}")
        try:
            await stopped.wait()
        finally:
            await sandbox.stop_async()

    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        pass
