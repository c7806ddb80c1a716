"""Store discovery: DispensarySearch around points that cover a state (and optionally one city).

    scrapy crawl store_discovery -a state=AZ [-a city=Phoenix]

Writes dutchie_discovery_locations and creates or updates dispensaries (keyed by the platform
id, so rediscovery updates and never duplicates).
"""

from __future__ import annotations

from scrapy.http import Response
from twisted.python.failure import Failure

from cannaspider.dutchie import graphql
from cannaspider.dutchie.geography import search_points
from cannaspider.dutchie.operations import DISPENSARY_SEARCH, dispensary_search_variables
from cannaspider.dutchie.stores import dispensary_record
from cannaspider.spiders.base import DutchieSpider, SpiderArgumentError, SpiderParams


class StoreDiscoverySpider(DutchieSpider):
    name = "store_discovery"
    role = "store_discovery"

    arguments = frozenset({"state", "city"})

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.seen: set[str] = set()
        self.failed_points = 0

    def require_target(self, params: SpiderParams) -> None:
        if not params.state:
            raise SpiderArgumentError("store_discovery needs -a state=XX")

    @property
    def state(self) -> str | None:
        return self.params.state

    @property
    def city(self) -> str | None:
        return self.params.city

    async def start(self):
        assert self.state is not None  # require_target
        distance = self.settings.getfloat("DUTCHIE_SEARCH_DISTANCE_MI")
        points = search_points(
            self.state, distance, city=self.city, min_population=self.settings.getint("DUTCHIE_SEARCH_MIN_POPULATION")
        )
        self.logger.info(
            "store discovery in %s%s: %d search points", self.state, f" ({self.city})" if self.city else "", len(points)
        )
        for point in points:
            yield self.graphql_request(
                DISPENSARY_SEARCH,
                dispensary_search_variables(point.lat, point.lng, distance, self.state),
                self.parse_search,
                meta={"point": point.name},
            )

    def parse_search(self, response: Response):
        """Dispensaries near one point of the state.

        @graphql DispensarySearch near=sandbox:AZ:0 state=AZ distance=50
        @returns items 1
        @returns requests 0 0
        @scrapes platform_dispensary_id name slug menu_url state lat lng
        """
        result = self.read_graphql(response)
        if isinstance(result, graphql.GraphQLFailure):
            self.failed_points += 1
            self.logger.error("search around %s failed: %s", response.meta.get("point"), result.message)
            return
        found = result.get("filteredDispensaries")
        if not isinstance(found, list):
            self.logger.error(
                "search around %s: malformed payload (no filteredDispensaries list)", response.meta.get("point")
            )
            return
        for obj in found:
            record = dispensary_record(obj)
            if record is None:
                self.logger.warning(
                    "search around %s: skipped a dispensary without id or name", response.meta.get("point")
                )
                continue
            # under `scrapy check` there is no -a state: the contract's search names the state
            if self.state and record.state and record.state.upper() != self.state:
                continue
            if self.city and (record.city or "").lower() != self.city.lower():
                continue
            if record.platform_dispensary_id in self.seen:
                continue
            self.seen.add(record.platform_dispensary_id)
            yield record

    def on_error(self, failure: Failure):
        self.failed_points += 1
        self.logger.error("search request failed: %s: %s", failure.type.__name__, failure.getErrorMessage())

    def closed(self, reason: str) -> None:
        self.logger.info(
            "store discovery in %s: %d dispensaries found, %d search points failed",
            self.state,
            len(self.seen),
            self.failed_points,
        )
