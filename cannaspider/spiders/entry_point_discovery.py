"""Entry-point discovery: a store's menu URL → its slug → platform_dispensary_id, asked of the
store's platform (`dispensaries.platform`, through cannaspider/platforms/interface.py).

    scrapy crawl entry_point_discovery -a dispensary_id=N[,N…]
    scrapy crawl entry_point_discovery -a state=AZ            every store of the state
    scrapy crawl entry_point_discovery [-a follow=1]          drain the queue (one store per task)

For Dutchie, slugs come from /embedded-menu/<slug>, /dispensary/<slug> or /stores/<slug> and go to
ConsumerDispensaries (cNameOrID). When the menu URL is the store's own website, the page is
rendered with scrapy-playwright (the embed is often injected by JavaScript) and we read the
id from the embedded-menu script or the slug from the iframe. A store we cannot resolve gets a
recorded reason (dispensaries.resolution_error), not a crash.

The rendered pages go through the proxy pool like the GraphQL requests, in a browser context per
proxy and identity (middlewares/stealth.py, docs/stealth.md): the browser sends its own headers
(those of the identity's Chrome), not Scrapy's.

Each store is one unit of units/lifecycle.py, a queued task's or an `-a` target's, by the same start
path: a store its platform answered for completes (resolved or with its recorded reason); one whose
request failed (no browser on this node, the lookup refused) fails, its task retried, and an `-a`
crawl with such a store exits 3 ("a unit did not complete").
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import scrapy
from scrapy.http import Response
from scrapy.settings import BaseSettings
from twisted.python.failure import Failure

from cannaspider.db.errors import first_line
from cannaspider.items import EntryPointResolution
from cannaspider.platforms.interface import Lookup
from cannaspider.spiders.base import PlatformSpider
from cannaspider.stealth.browser_pages import ChromiumNotFound
from cannaspider.tasks import roles
from cannaspider.tasks.queue import TaskResult
from cannaspider.units.lifecycle import UNIT_META, Outcome, Unit, UnitLifecycle

BROWSER_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


class EntryPointDiscoverySpider(PlatformSpider):
    name = "entry_point_discovery"
    role = roles.get(name)  # its target and chain: cannaspider/tasks/roles.py

    @classmethod
    def update_settings(cls, settings: BaseSettings) -> None:
        super().update_settings(settings)
        handler = "cannaspider.stealth.browser_handler.BrowserOrImpersonatingDownloadHandler"
        handlers = {**settings.getdict("DOWNLOAD_HANDLERS"), "http": handler, "https": handler}  # the rest: base.py
        settings.set("DOWNLOAD_HANDLERS", handlers, priority="spider")
        # Scrapy's headers would replace the browser's on the navigation (scrapy-playwright's
        # default): its sec-fetch-*, client hints and order would be lost. The identity is the
        # browser context's (middlewares/stealth.py).
        settings.set("PLAYWRIGHT_PROCESS_REQUEST_HEADERS", None, priority="spider")
        settings.set(
            "PLAYWRIGHT_LAUNCH_OPTIONS",
            {
                "executable_path": settings.get("CHROMIUM_PATH"),
                "headless": True,
                "args": BROWSER_ARGS,
            },
            priority="spider",
        )

    async def start(self) -> AsyncIterator[Any]:
        units = UnitLifecycle.of(self.crawler)
        targets = None
        if not self.draining:  # the stores the arguments name (CloseSpider on an unknown id)
            targets = [Unit(target={"dispensary_id": row[0]}) for row in await self.select_dispensaries("id")]
        async for unit in units.units(self.name, self.params.follow, targets):
            dispensary_id: int = unit.target["dispensary_id"]  # the role's target (StoreTarget)
            output: Any = ()
            try:
                row = await self._dispensary(dispensary_id)
            except Exception as exc:  # noqa: BLE001 - the database: this attempt failed, the queue retries
                unit.errors.append(f"reading the dispensary failed: {first_line(exc)}")
            else:
                if row is None:
                    unit.data["final"] = f"dispensary {dispensary_id} no longer exists"
                else:
                    output = self._resolve(*row)
            async for out in units.start(unit, output):
                yield out

    async def _dispensary(self, dispensary_id: int) -> tuple[Any, ...] | None:
        pool = await self.store.open()
        async with pool.connection() as conn:
            cur = await conn.execute("SELECT id, menu_url, platform FROM dispensaries WHERE id = %s", (dispensary_id,))
            return await cur.fetchone()

    def _resolve(
        self, dispensary_id: int, menu_url: str | None, platform: str
    ) -> Iterator[scrapy.Request | EntryPointResolution]:
        slug = self.platform(platform).slug_of(menu_url)
        if slug:
            yield self._lookup(dispensary_id, slug, platform, via="graphql")
        elif menu_url and menu_url.startswith(("http://", "https://")):
            yield scrapy.Request(
                menu_url,
                callback=self.parse_website,
                errback=self.on_error,
                dont_filter=True,
                meta={"dispensary_id": dispensary_id, "playwright": True, "platform": platform},
            )
        else:
            yield self._unresolved(dispensary_id, None, f"no usable menu_url ({menu_url!r})")

    def _lookup(self, dispensary_id: int, slug: str, platform: str | None, via: str) -> scrapy.Request:
        return self.platform(platform).lookup_request(
            slug,
            callback=self.parse_dispensary,
            errback=self.on_error,
            meta={"dispensary_id": dispensary_id, "slug": slug, "via": via, "platform": platform},
        )

    def _unresolved(
        self,
        dispensary_id: int,
        slug: str | None,
        reason: str,
        *,
        meta: dict[str, Any] | None = None,
        transient: bool = False,
    ) -> EntryPointResolution:
        """A store not resolved. `transient`: a failed request (not an answer), so a drained task
        fails and retries later instead of recording the store as unresolvable."""
        unit: Unit | None = (meta or {}).get(UNIT_META)
        if transient and unit is not None:
            unit.data.setdefault("transient", reason)
        self.logger.warning("dispensary %s unresolved: %s", dispensary_id, reason)
        self.crawler.stats.inc_value("cannaspider/entry_points_unresolved")
        return EntryPointResolution(dispensary_id, None, slug, "unresolved", reason)

    def contract_meta(self, platform: str, target: dict[str, Any]) -> dict[str, Any]:
        return {"dispensary_id": 0, "slug": target["slug"], "via": "graphql", "platform": platform}

    def parse_dispensary(self, response: Response) -> Iterator[EntryPointResolution]:
        """ConsumerDispensaries for one slug → the store's platform id.

        @graphql ConsumerDispensaries slug=sandbox:AZ:1
        @returns items 1 1
        @returns requests 0 0
        @scrapes dispensary_id platform_dispensary_id slug method
        """
        dispensary_id, slug = response.meta["dispensary_id"], response.meta["slug"]
        platform = self.platform(response.meta.get("platform"))
        found: Lookup = platform.read_lookup(response, slug)
        self.counted(found.failure)  # a failed request: counted per kind like every platform failure
        if found.platform_id is None:
            yield self._unresolved(
                dispensary_id,
                slug,
                found.reason or f"found no store for {slug!r}",
                meta=response.meta,
                transient=found.failure is not None,
            )
            return
        yield EntryPointResolution(dispensary_id, found.platform_id, found.slug or slug, response.meta["via"])

    def parse_website(self, response: Response) -> Iterator[scrapy.Request | EntryPointResolution]:
        """The store's own website, rendered: find Dutchie's embedded-menu script or iframe.

        @website sandbox:AZ:3
        @returns items 1 1
        @returns requests 0 0
        @scrapes dispensary_id platform_dispensary_id method
        """
        dispensary_id = response.meta["dispensary_id"]
        platform = response.meta.get("platform")
        found = self.platform(platform).read_website(response.text, response.url)
        if found.platform_id:
            yield EntryPointResolution(dispensary_id, found.platform_id, None, "embedded-script")
            return
        if found.slug:
            yield self._lookup(dispensary_id, found.slug, platform, via="iframe")
            return
        yield self._unresolved(dispensary_id, None, found.reason or f"no embedded menu found on {response.url}")

    def on_error(self, failure: Failure) -> Iterator[EntryPointResolution]:
        request = getattr(failure, "request", None)
        dispensary_id = request.meta.get("dispensary_id") if request is not None else None
        kind = failure.type.__name__ if failure.type is not None else "error"
        reason = f"{kind}: {failure.getErrorMessage()}"
        if request is None or dispensary_id is None:
            self.logger.error("request failed: %s", reason)
            return
        # no browser on this node: the reason as is ("Chromium not found at CHROMIUM_PATH (…)"); still
        # transient, a drained task retries (on this node once Chromium is installed, or another's)
        error = str(failure.value) if isinstance(failure.value, ChromiumNotFound) else f"request failed: {reason}"
        yield self._unresolved(dispensary_id, request.meta.get("slug"), error[:500], meta=request.meta, transient=True)

    # -- a drained task's outcome (units/lifecycle.py) ----------------------------------------------
    def unit_item(self, unit: Unit, item: Any) -> None:
        if isinstance(item, EntryPointResolution):
            unit.data["resolution"] = item

    async def unit_outcome(self, unit: Unit) -> Outcome:
        if "final" in unit.data:
            return unit.data["final"], True
        if unit.errors:
            return unit.errors[0], False
        if "transient" in unit.data:
            return unit.data["transient"], False
        item: EntryPointResolution | None = unit.data.get("resolution")
        resolved = item is not None and item.platform_dispensary_id is not None
        extra = {"resolved": resolved, "method": item.method if item else None}
        if item is not None and not resolved:
            extra["reason"] = item.error
        # chaining (tasks/roles.py, PRODUCT_TASK_PER_RESOLVED_STORE): a resolved store gets its product_discovery
        return TaskResult(extra=extra), False
