"""Shared plumbing of the Dutchie spiders: GraphQL requests and reading their answers, the
crawler's CrawlStore, and the spider arguments (`-a`), parsed and validated once (SpiderParams,
units/arguments.py). (A stale
persisted-query hash is handled in the download chain: cannaspider/middlewares/persisted_queries.py.)"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any, ClassVar, Self

import scrapy
from scrapy.crawler import Crawler
from scrapy.exceptions import CloseSpider
from scrapy.http import Response
from scrapy.settings import BaseSettings
from twisted.python.failure import Failure

from cannaspider.db.crawl_store import CrawlStore
from cannaspider.platforms.dutchie import graphql
from cannaspider.units.arguments import SpiderArgumentError, SpiderParams
from cannaspider.units.role import Role

logger = logging.getLogger(__name__)

# Schemes a Dutchie crawl never fetches, their download handlers off (None): a URL out of a payload
# or a redirect can then never read a local file (file, data), dial around the store's proxy (ftp)
# or send an S3 request signed with the node's AWS keys (s3). The normalizer already keeps only
# http(s) image URLs (docs/images.md); this is the second wall.
UNUSED_SCHEMES = ("file", "data", "ftp", "s3")


__all__ = ["UNUSED_SCHEMES", "DutchieSpider", "SpiderArgumentError", "SpiderParams"]


class DutchieSpider(scrapy.Spider):
    role: ClassVar[Role]  # the role this spider's units are (units/role.py); its name is the spider's
    pipelines_setting = "DISCOVERY_PIPELINES"  # which group of pipelines this spider's items need
    # the `-a` arguments this spider takes (SpiderParams); require_target(): which it needs
    arguments: ClassVar[frozenset[str]] = frozenset({"dispensary_id", "state"})
    params: SpiderParams
    # set in from_crawler, from the settings
    graphql_url: str
    client_name: str
    hashes: dict[str, str]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.params, runner_args = SpiderParams.of_spider(self.name, self.arguments, kwargs)
        super().__init__(*args, **runner_args)
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
    def store(self) -> CrawlStore:
        return CrawlStore.for_crawler(self.crawler)

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

    @classmethod
    def from_crawler(cls, crawler: Crawler, *args: Any, **kwargs: Any) -> Self:
        spider = super().from_crawler(crawler, *args, **kwargs)
        spider.graphql_url = crawler.settings.get("DUTCHIE_GRAPHQL_URL")
        spider.client_name = crawler.settings.get("DUTCHIE_CLIENT_NAME")
        spider.hashes = crawler.settings.getdict("DUTCHIE_PERSISTED_HASHES")
        return spider

    def graphql_request(
        self,
        operation: str,
        variables: dict[str, Any],
        callback: Callable[..., Any],
        *,
        meta: dict[str, Any] | None = None,
        priority: int = 0,
    ) -> scrapy.Request:
        return graphql.build_request(
            self.graphql_url,
            operation,
            variables,
            persisted_hash=self.hashes.get(operation),
            client_name=self.client_name,
            callback=callback,
            errback=self.on_error,
            meta=meta,
            priority=priority,
        )

    def read_graphql(self, response: Response) -> dict[str, Any] | graphql.GraphQLFailure:
        """The response's data object, or why there is none (counted per kind in the stats)."""
        result = graphql.read(response)
        if isinstance(result, graphql.GraphQLFailure):
            self.crawler.stats.inc_value(f"cannaspider/graphql_failure/{result.kind}")
        return result

    def on_error(self, failure: Failure) -> Iterable[Any] | None:  # pragma: no cover - overridden where it matters
        self.logger.error("request failed: %s", failure.getErrorMessage())
        return None

    @staticmethod
    def contract_meta(operation: str, variables: dict[str, Any]) -> dict[str, Any]:
        """Meta a callback needs when `scrapy check` calls it directly (see contracts.py)."""
        return {}
