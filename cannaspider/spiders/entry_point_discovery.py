"""Entry-point discovery: a store's menu URL → its slug → platform_dispensary_id.

    scrapy crawl entry_point_discovery -a dispensary_id=N[,N…]
    scrapy crawl entry_point_discovery -a state=AZ            every store of the state

Slugs come from /embedded-menu/<slug>, /dispensary/<slug> or /stores/<slug> and go to
ConsumerDispensaries (cNameOrID). When the menu URL is the store's own website, the page is
rendered with scrapy-playwright (the embed is often injected by JavaScript) and we read the
id from the embedded-menu script or the slug from the iframe. A store we cannot resolve gets a
recorded reason (dispensaries.resolution_error), not a crash.
"""

from __future__ import annotations

import scrapy
from scrapy.http import Response
from twisted.python.failure import Failure

from cannaspider.dutchie import graphql, slugs
from cannaspider.dutchie.operations import CONSUMER_DISPENSARIES, consumer_dispensaries_variables
from cannaspider.items import EntryPointResolution
from cannaspider.spiders.base import DutchieSpider

BROWSER_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


class EntryPointDiscoverySpider(DutchieSpider):
    name = "entry_point_discovery"
    role = "entry_point_discovery"

    @classmethod
    def update_settings(cls, settings) -> None:
        super().update_settings(settings)
        handler = "scrapy_playwright.handler.ScrapyPlaywrightDownloadHandler"
        settings.set("DOWNLOAD_HANDLERS", {"http": handler, "https": handler}, priority="spider")
        settings.set(
            "PLAYWRIGHT_LAUNCH_OPTIONS",
            {
                "executable_path": settings.get("CHROMIUM_PATH"),
                "headless": True,
                "args": BROWSER_ARGS,
            },
            priority="spider",
        )

    async def start(self):
        rows = await self.select_dispensaries("id, menu_url, slug")
        for dispensary_id, menu_url, _slug in rows:
            slug = slugs.slug_from_menu_url(menu_url)
            if slug:
                yield self._lookup(dispensary_id, slug, via="graphql")
            elif menu_url and menu_url.startswith(("http://", "https://")):
                yield scrapy.Request(
                    menu_url,
                    callback=self.parse_website,
                    errback=self.on_error,
                    dont_filter=True,
                    meta={"dispensary_id": dispensary_id, "playwright": True},
                )
            else:
                yield self._unresolved(dispensary_id, None, f"no usable menu_url ({menu_url!r})")

    def _lookup(self, dispensary_id: int, slug: str, via: str):
        return self.graphql_request(
            CONSUMER_DISPENSARIES,
            consumer_dispensaries_variables(slug),
            self.parse_dispensary,
            meta={"dispensary_id": dispensary_id, "slug": slug, "via": via},
        )

    def _unresolved(self, dispensary_id: int, slug: str | None, reason: str) -> EntryPointResolution:
        self.logger.warning("dispensary %s unresolved: %s", dispensary_id, reason)
        self.crawler.stats.inc_value("cannaspider/entry_points_unresolved")
        return EntryPointResolution(dispensary_id, None, slug, "unresolved", reason)

    @staticmethod
    def contract_meta(operation: str, variables: dict) -> dict:
        return {"dispensary_id": 0, "slug": variables["dispensaryFilter"]["cNameOrID"], "via": "graphql"}

    def parse_dispensary(self, response: Response):
        """ConsumerDispensaries for one slug → the store's platform id.

        @graphql ConsumerDispensaries slug=sandbox:AZ:1
        @returns items 1 1
        @returns requests 0 0
        @scrapes dispensary_id platform_dispensary_id slug method
        """
        dispensary_id, slug = response.meta["dispensary_id"], response.meta["slug"]
        result = self.read_graphql(response)
        if isinstance(result, graphql.GraphQLFailure):
            yield self._unresolved(dispensary_id, slug, f"ConsumerDispensaries failed: {result.message}")
            return
        found = result.get("filteredDispensaries")
        first = found[0] if isinstance(found, list) and found and isinstance(found[0], dict) else None
        pid = first.get("id") if first else None
        if not slugs.is_object_id(pid):
            yield self._unresolved(dispensary_id, slug, f"ConsumerDispensaries found no store for {slug!r}")
            return
        yield EntryPointResolution(dispensary_id, pid.lower(), first.get("cName") or slug, response.meta["via"])

    def parse_website(self, response: Response):
        """The store's own website, rendered: find Dutchie's embedded-menu script or iframe.

        @website sandbox:AZ:3
        @returns items 1 1
        @returns requests 0 0
        @scrapes dispensary_id platform_dispensary_id method
        """
        dispensary_id = response.meta["dispensary_id"]
        html = response.text
        pid = slugs.id_from_embed(html)
        if pid:
            yield EntryPointResolution(dispensary_id, pid, None, "embedded-script")
            return
        slug = slugs.slug_from_embed(html)
        if slug:
            yield self._lookup(dispensary_id, slug, via="iframe")
            return
        yield self._unresolved(dispensary_id, None, f"no Dutchie embedded menu found on {response.url}")

    def on_error(self, failure: Failure):
        request = getattr(failure, "request", None)
        dispensary_id = request.meta.get("dispensary_id") if request is not None else None
        reason = f"{failure.type.__name__}: {failure.getErrorMessage()}"
        if dispensary_id is None:
            self.logger.error("request failed: %s", reason)
            return
        yield self._unresolved(dispensary_id, request.meta.get("slug"), f"request failed: {reason}"[:500])
