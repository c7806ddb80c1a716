"""Scrapy contracts for callbacks where `@url` alone cannot say what to request: a platform's own
(Dutchie's `@graphql`: cannaspider/platforms/dutchie/contracts.py) and a store's website:

    @website sandbox:AZ:3

A store reference such as `sandbox:STATE:N` (the N-th store of that state in the default sandbox
catalog) is looked up in the CONTRACT_STORES setting ({ref: {"id", "cname", "lat", "lng"}}); any
value not listed there is used as is (a platform id, a slug, "lat,lng"), for checks against the
real service. The development environment's `scrapy check` (sandbox/commands/check.py) starts a
sandbox and fills CONTRACT_STORES from its catalog; production code knows nothing of the sandbox.
Settings are read from the checked spider's crawler, so what a command sets reaches them.

ContractMode (an add-on, ADDONS in settings.py) sets CONTRACT_MODE while `scrapy check` runs, for
the components that behave differently under a check (no database at open, no refusal for want of
an active proxy, no proxy health written, no early image queries): they read the setting, never
the environment (tests/test_contracts.py checks that SCRAPY_CHECK is read only by env.py's
scrapy_check(), which only this add-on calls).
Spiders need nothing: the check builds them without arguments, which they accept (no target).
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from scrapy.contracts import Contract
from scrapy.crawler import Crawler
from scrapy.settings import SETTINGS_PRIORITIES, BaseSettings

from cannaspider import env

# the priority Scrapy's check command gives its own settings (ITEM_PIPELINES, FEEDS): above the
# spiders' custom settings, below the command line
CHECK_PRIORITY = (SETTINGS_PRIORITIES["spider"] + SETTINGS_PRIORITIES["cmdline"]) // 2


class ContractMode:
    """Add-on: CONTRACT_MODE = True for the crawls of `scrapy check`. Scrapy says a check is
    running only through the SCRAPY_CHECK variable, which it sets around the crawlers it builds
    (add-ons are applied then); the rest of the code reads the setting."""

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> ContractMode:
        return cls()

    def update_settings(self, settings: BaseSettings) -> None:
        if env.scrapy_check():
            settings.set("CONTRACT_MODE", True, priority=CHECK_PRIORITY)


def settings_of(args: dict[str, Any]) -> BaseSettings:
    settings: BaseSettings = args["callback"].__self__.settings  # the spider the checked callback is bound to
    return settings


def contract_store(settings: BaseSettings, ref: str) -> SimpleNamespace | None:
    known = settings.getdict("CONTRACT_STORES").get(ref)
    if known is not None:
        return SimpleNamespace(**known)
    if ref.startswith("sandbox:"):
        raise ValueError(
            f"contract store {ref!r} is not in CONTRACT_STORES: run `scrapy check` in the development "
            "environment (./dev setup), which starts a sandbox and lists its stores"
        )
    return None


class WebsiteContract(Contract):
    """@website STORE — the store's own website, rendered in the browser (scrapy-playwright)."""

    name = "website"

    def adjust_request_args(self, args: dict[str, Any]) -> dict[str, Any]:
        (ref,) = self.args
        settings = settings_of(args)
        store = contract_store(settings, ref)
        if store is not None:
            base = settings.get("DUTCHIE_GRAPHQL_URL").split("/api-")[0].rsplit("/graphql", 1)[0]
            url = f"{base}/sites/{store.cname}/"
        else:
            url = ref
        args.update(url=url, meta={**(args.get("meta") or {}), "playwright": True, "dispensary_id": 0})
        return args
