"""Shared plumbing of the Dutchie spiders: GraphQL requests and reading their answers, the
crawler's CrawlStore, and target selection from arguments. (A stale persisted-query hash is
handled in the download chain: cannaspider/middlewares/persisted_queries.py.)"""

from __future__ import annotations

import logging

import scrapy
from scrapy.crawler import Crawler
from scrapy.http import Response

from cannaspider.db.crawl_store import CrawlStore
from cannaspider.dutchie import graphql

logger = logging.getLogger(__name__)


def parse_id_list(value: str | int | None) -> list[int]:
    if value is None or value == "":
        return []
    try:
        return [int(v) for v in str(value).split(",") if v.strip()]
    except ValueError as exc:
        raise ValueError(f"dispensary_id must be an integer or a comma-separated list, got {value!r}") from exc


class DutchieSpider(scrapy.Spider):
    role: str = ""
    store: CrawlStore
    graphql_url: str
    client_name: str
    hashes: dict[str, str]
    pipelines_setting = "DISCOVERY_PIPELINES"  # which group of pipelines this spider's items need

    @classmethod
    def update_settings(cls, settings) -> None:
        super().update_settings(settings)
        # spider priority: `-s ITEM_PIPELINES=…` on the command line (and `scrapy check`) still win
        settings.set("ITEM_PIPELINES", settings.getdict(cls.pipelines_setting), priority="spider")

    @classmethod
    def from_crawler(cls, crawler: Crawler, *args, **kwargs):
        spider = super().from_crawler(crawler, *args, **kwargs)
        spider.store = CrawlStore.for_crawler(crawler)
        spider.graphql_url = crawler.settings.get("DUTCHIE_GRAPHQL_URL")
        spider.client_name = crawler.settings.get("DUTCHIE_CLIENT_NAME")
        spider.hashes = crawler.settings.getdict("DUTCHIE_PERSISTED_HASHES")
        return spider

    def graphql_request(
        self, operation: str, variables: dict, callback, *, meta: dict | None = None, priority: int = 0
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

    def read_graphql(self, response: Response) -> dict | graphql.GraphQLFailure:
        """The response's data object, or why there is none (counted per kind in the stats)."""
        result = graphql.read(response)
        if isinstance(result, graphql.GraphQLFailure):
            self.crawler.stats.inc_value(f"cannaspider/graphql_failure/{result.kind}")
        return result

    def on_error(self, failure):  # pragma: no cover - overridden where a failure has consequences
        self.logger.error("request failed: %s", failure.getErrorMessage())

    @staticmethod
    def contract_meta(operation: str, variables: dict) -> dict:
        """Meta a callback needs when `scrapy check` calls it directly (see contracts.py)."""
        return {}
