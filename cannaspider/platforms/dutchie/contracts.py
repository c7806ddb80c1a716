"""Dutchie's spider contract: `@graphql OPERATION key=value …` builds the request the spider would
send for that operation (store references resolved as cannaspider/contracts.py says), and hands the
checked spider's callback the meta it needs in the interface's words (PlatformSpider.contract_meta).

    @graphql FilteredProducts store=sandbox:AZ:0 page=0 perPage=100
    @graphql ConsumerDispensaries slug=sandbox:AZ:1
    @graphql DispensarySearch near=sandbox:AZ:0 state=AZ distance=50
"""

from __future__ import annotations

from typing import Any

from scrapy.contracts import Contract
from scrapy.settings import BaseSettings

from cannaspider.contracts import contract_store, settings_of
from cannaspider.platforms.dutchie import graphql
from cannaspider.platforms.dutchie.operations import (
    CONSUMER_DISPENSARIES,
    DISPENSARY_SEARCH,
    FILTERED_PRODUCTS,
    consumer_dispensaries_variables,
    dispensary_search_variables,
    products_variables,
)
from cannaspider.platforms.dutchie.platform import DutchiePlatform


def _store_id(settings: BaseSettings, ref: str) -> str:
    store = contract_store(settings, ref)
    return store.id if store else ref


def _slug(settings: BaseSettings, ref: str) -> str:
    store = contract_store(settings, ref)
    return store.cname if store else ref


class GraphQLContract(Contract):
    """@graphql OPERATION key=value ... — the request the spider would send for that operation."""

    name = "graphql"

    def adjust_request_args(self, args: dict[str, Any]) -> dict[str, Any]:
        operation, *pairs = self.args
        params = dict(p.split("=", 1) for p in pairs)
        settings = settings_of(args)
        target: dict[str, Any] = {}  # what the request asks for, in the interface's words (contract_meta)
        if operation == FILTERED_PRODUCTS:
            target = {
                "platform_id": _store_id(settings, params["store"]),
                "page": int(params.get("page", 0)),
                "per_page": int(params.get("perPage", 100)),
            }
            variables = products_variables(target["platform_id"], target["page"], target["per_page"])
        elif operation == CONSUMER_DISPENSARIES:
            target = {"slug": _slug(settings, params["slug"])}
            variables = consumer_dispensaries_variables(target["slug"])
        elif operation == DISPENSARY_SEARCH:
            store = contract_store(settings, params["near"])
            lat, lng = (store.lat, store.lng) if store else map(float, params["near"].split(","))
            variables = dispensary_search_variables(lat, lng, float(params.get("distance", 50)), params["state"])
        else:
            raise ValueError(f"@graphql does not know operation {operation!r}")
        owner = args["callback"].__self__  # the spider the checked callback is bound to
        meta = {**(args.get("meta") or {}), **owner.contract_meta(DutchiePlatform.name, target)}
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
