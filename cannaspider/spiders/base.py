"""Shared plumbing of the role spiders: the platform a store or task names (through the registry
and the interface of cannaspider/platforms/, never a platform's own modules), reading its answers,
the crawler's CrawlDatabase, and the spider arguments (`-a`), parsed and validated once (SpiderParams,
units/arguments.py). (A stale Dutchie persisted-query hash is handled in the download chain:
cannaspider/platforms/dutchie/persisted_queries.py.)"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any, ClassVar

import scrapy
from scrapy.exceptions import CloseSpider
from scrapy.settings import BaseSettings
from twisted.python.failure import Failure

from cannaspider import platforms
from cannaspider.db.crawl_database import CrawlDatabase
from cannaspider.platforms.interface import Platform, PlatformFailure
from cannaspider.tasks.roles import Role
from cannaspider.units.arguments import SpiderArgumentError, SpiderParams

logger = logging.getLogger(__name__)

# Schemes a crawl never fetches, their download handlers off (None): a URL out of a payload
# or a redirect can then never read a local file (file, data), dial around the store's proxy (ftp)
# or send an S3 request signed with the node's AWS keys (s3). The normalizer already keeps only
# http(s) image URLs (docs/images.md); this is the second wall.
UNUSED_SCHEMES = ("file", "data", "ftp", "s3")


__all__ = ["UNUSED_SCHEMES", "PlatformSpider", "SpiderArgumentError", "SpiderParams"]


class PlatformSpider(scrapy.Spider):
    role: ClassVar[Role]  # the role this spider's units are: `roles.get(name)` (tasks/roles.py)
    pipelines_setting = "DISCOVERY_PIPELINES"  # which group of pipelines this spider's items need
    # the `-a` arguments this spider takes (SpiderParams); require_target(): which it needs
    arguments: ClassVar[frozenset[str]] = frozenset({"dispensary_id", "state"})
    params: SpiderParams

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.params, runner_args = SpiderParams.of_spider(self.name, self.arguments, kwargs)
        super().__init__(*args, **runner_args)
        self._platforms: dict[str, Platform] = {}  # built on first use, from the crawler's settings
        # `scrapy check` too: it builds each spider without arguments, which require_target accepts
        # (no target: draining), so nothing here asks whether a check runs (CONTRACT_MODE)
        self.require_target(self.params)

    def require_target(self, params: SpiderParams) -> None:
        """Targets that fit together; none at all means draining the role's queue."""
        if params.dispensary_ids and params.state:
            raise SpiderArgumentError(f"{self.name}: give -a dispensary_id or -a state, not both")

    @property
    def draining(self) -> bool:
        """No target given: the spider drains its role's queue (units/lifecycle.py)."""
        return not self.params.has_target

    @property
    def store(self) -> CrawlDatabase:
        return CrawlDatabase.for_crawler(self.crawler)

    async def select_dispensaries(self, columns: str, state_filter: str = "") -> list[tuple[Any, ...]]:
        """The dispensaries the arguments name (id first among `columns`), by id.

        A dispensary_id that does not exist is a bad argument: the crawl stops before any run is
        opened, with one line and a non-zero exit (the crawl command)."""
        pool = await self.store.open()
        async with pool.connection() as conn:
            if self.params.dispensary_ids:
                cur = await conn.execute(
                    f"SELECT {columns} FROM dispensaries WHERE id = ANY(%s) ORDER BY id",
                    (list(self.params.dispensary_ids),),
                )
            else:
                cur = await conn.execute(
                    f"SELECT {columns} FROM dispensaries WHERE state = %s {state_filter} ORDER BY id",
                    (self.params.state,),
                )
            rows = await cur.fetchall()
        missing = sorted(set(self.params.dispensary_ids) - {row[0] for row in rows})
        if missing:
            self.store.fail(
                f"{self.name}: no dispensary with id {', '.join(map(str, missing))} (see the dispensaries table)"
            )
            raise CloseSpider("bad_arguments")
        if not rows:
            self.logger.warning("no dispensary to crawl in %s", self.params.state)
        return rows

    @classmethod
    def update_settings(cls, settings: BaseSettings) -> None:
        super().update_settings(settings)
        # spider priority: `-s ITEM_PIPELINES=…` on the command line (and `scrapy check`) still win
        settings.set("ITEM_PIPELINES", settings.getdict(cls.pipelines_setting), priority="spider")
        handlers = {**settings.getdict("DOWNLOAD_HANDLERS"), **dict.fromkeys(UNUSED_SCHEMES)}
        settings.set("DOWNLOAD_HANDLERS", handlers, priority="spider")

    def platform(self, name: str | None = None) -> Platform:
        """The platform `name` (a store's or task's `platform`; None: the default, for targets that
        name no store, such as a state to discover), configured from this crawl's settings."""
        name = name or platforms.DEFAULT
        platform = self._platforms.get(name)
        if platform is None:
            platform = self._platforms[name] = platforms.build(name, self.crawler.settings)
        return platform

    def counted(self, result: Any) -> Any:
        """A platform's answer as read, its failure (if it is one) counted per kind in the stats."""
        if isinstance(result, PlatformFailure):
            self.crawler.stats.inc_value(f"cannaspider/graphql_failure/{result.kind}")
        return result

    def on_error(self, failure: Failure) -> Iterable[Any] | None:  # pragma: no cover - overridden where it matters
        self.logger.error("request failed: %s", failure.getErrorMessage())
        return None

    def contract_meta(self, platform: str, target: dict[str, Any]) -> dict[str, Any]:
        """Meta a callback needs when `scrapy check` calls it directly: `target` names what a
        platform's contract asks for (`platform_id`, `page`, `per_page`; `slug`), in the
        interface's words (cannaspider/platforms/dutchie/contracts.py)."""
        return {}
