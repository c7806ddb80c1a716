"""The stale persisted-query fallback, in the download chain so callbacks never see it.

Dutchie rotates its persisted-query hashes every few months; a stale one answers
`PersistedQueryNotFound` (HTTP 200). This middleware sends that request again with the full query
text, warns once per operation, counts `cannaspider/stale_hash_fallbacks`, and from then on
rewrites that operation's requests to the full text before they leave (one request per page, not
two). A callback therefore receives the data of its request, or a real failure.
"""

from __future__ import annotations

import logging

from scrapy import Request
from scrapy.crawler import Crawler
from scrapy.http import Response
from scrapy.statscollectors import StatsCollector

from cannaspider.platforms.dutchie import graphql

logger = logging.getLogger(__name__)

STALE_MARKER = b"PersistedQueryNotFound"


class PersistedQueryFallbackMiddleware:
    def __init__(self, stats: StatsCollector):
        self.stats = stats
        self.stale_operations: set[str] = set()

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> PersistedQueryFallbackMiddleware:
        assert crawler.stats is not None
        return cls(crawler.stats)

    @staticmethod
    def _persisted_operation(request: Request) -> str | None:
        """The GraphQL operation a request asks for by hash (None: not one of ours, or full text)."""
        if request.meta.get("graphql_full_query", True):
            return None
        return request.meta.get("graphql_operation")

    def process_request(self, request: Request) -> Request | None:
        if self._persisted_operation(request) in self.stale_operations:
            return graphql.with_full_query(request)
        return None

    def process_response(self, request: Request, response: Response) -> Request | Response:
        operation = self._persisted_operation(request)
        # a substring test first: product pages are large and nearly never carry errors
        if operation is None or STALE_MARKER not in response.body:
            return response
        result = graphql.read(response)
        if not isinstance(result, graphql.GraphQLFailure) or result.kind != "stale_hash":
            return response
        if operation not in self.stale_operations:
            self.stale_operations.add(operation)
            logger.warning(
                "persisted-query hash for %s is stale (PersistedQueryNotFound): sending the full query "
                "text from now on; update DUTCHIE_PERSISTED_HASHES",
                operation,
            )
        self.stats.inc_value("cannaspider/stale_hash_fallbacks")
        return graphql.with_full_query(request)
