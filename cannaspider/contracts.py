"""Scrapy contracts for GraphQL callbacks, where `@url` alone cannot say what to request.

    @graphql FilteredProducts store=sandbox:AZ:0 page=0 perPage=100
    @graphql ConsumerDispensaries slug=sandbox:AZ:1
    @graphql DispensarySearch near=sandbox:AZ:0 state=AZ distance=50

    @website sandbox:AZ:3

`sandbox:STATE:N` names the N-th store of that state in the default sandbox catalog, so
`scrapy check` runs against `scrapy sandbox` (DUTCHIE_GRAPHQL_URL pointing at it); any other value
is used as is (a platform id or a slug), for checks against the real service.
"""

from __future__ import annotations

from functools import lru_cache

from scrapy.contracts import Contract
from scrapy.utils.project import get_project_settings

from cannaspider.dutchie import graphql
from cannaspider.dutchie.operations import (
    CONSUMER_DISPENSARIES,
    DISPENSARY_SEARCH,
    FILTERED_PRODUCTS,
    consumer_dispensaries_variables,
    dispensary_search_variables,
    products_variables,
)


@lru_cache(maxsize=1)
def _sandbox_catalog():
    from cannaspider.sandbox.catalog import Catalog

    return Catalog()


def _store(ref: str):
    if ref.startswith("sandbox:"):
        _, state, index = ref.split(":")
        return [s for s in _sandbox_catalog().stores if s.state == state][int(index)]
    return None


def _store_id(ref: str) -> str:
    store = _store(ref)
    return store.id if store else ref


def _slug(ref: str) -> str:
    store = _store(ref)
    return store.cname if store else ref


class GraphQLContract(Contract):
    """@graphql OPERATION key=value ... — the request the spider would send for that operation."""

    name = "graphql"

    def adjust_request_args(self, args: dict) -> dict:
        operation, *pairs = self.args
        params = dict(p.split("=", 1) for p in pairs)
        if operation == FILTERED_PRODUCTS:
            variables = products_variables(
                _store_id(params["store"]), int(params.get("page", 0)), int(params.get("perPage", 100))
            )
        elif operation == CONSUMER_DISPENSARIES:
            variables = consumer_dispensaries_variables(_slug(params["slug"]))
        elif operation == DISPENSARY_SEARCH:
            store = _store(params["near"])
            lat, lng = (store.lat, store.lng) if store else map(float, params["near"].split(","))
            variables = dispensary_search_variables(lat, lng, float(params.get("distance", 50)), params["state"])
        else:
            raise ValueError(f"@graphql does not know operation {operation!r}")
        settings = get_project_settings()
        owner = args["callback"].__self__  # the spider the checked callback is bound to
        meta = {**(args.get("meta") or {}), **owner.contract_meta(operation, variables)}
        request = graphql.build_request(
            settings.get("DUTCHIE_GRAPHQL_URL"),
            operation,
            variables,
            persisted_hash=settings.getdict("DUTCHIE_PERSISTED_HASHES").get(operation),
            client_name=settings.get("DUTCHIE_CLIENT_NAME"),
            callback=args["callback"],
            meta=meta,
        )
        args.update(url=request.url, headers=request.headers, meta=request.meta)
        return args


class WebsiteContract(Contract):
    """@website STORE — the store's own website, rendered in the browser (scrapy-playwright)."""

    name = "website"

    def adjust_request_args(self, args: dict) -> dict:
        (ref,) = self.args
        store = _store(ref)
        if store is not None:
            base = get_project_settings().get("DUTCHIE_GRAPHQL_URL").split("/api-")[0].rsplit("/graphql", 1)[0]
            url = f"{base}/sites/{store.cname}/"
        else:
            url = ref
        args.update(url=url, meta={**(args.get("meta") or {}), "playwright": True, "dispensary_id": 0})
        return args
