"""`scrapy check` in the development environment: the spider contracts against a sandbox it starts.

Typed as Scrapy documents it (`scrapy check [SPIDER…]`), with no server to start and no variable to
set: the command applies the migrations, starts the sandbox and its forward proxy on loopback
ports, points DUTCHIE_GRAPHQL_URL at it, lists its stores in CONTRACT_STORES (the `sandbox:STATE:N`
names the contracts use, cannaspider/contracts.py), puts the proxy in the pool for the check's
duration (Dutchie requests go only through proxies; sandbox/pool_rows.py) and runs Scrapy's own
check. The contracts never write proxy health (cannaspider/stealth/pool.py, under CONTRACT_MODE).

A DUTCHIE_GRAPHQL_URL given in the environment or with `-s` names a sandbox already running with
the default catalog (`scrapy sandbox`, the tests' own): the check uses it and the proxies table as
they are. `--no-sandbox` checks against the configured services (the real one: set CONTRACT_STORES
or use plain ids in the contracts).
"""

from __future__ import annotations

import argparse
import secrets

from scrapy.commands.check import Command as ScrapyCheck
from scrapy.settings import SETTINGS_PRIORITIES

from cannaspider import env
from cannaspider.db import database_url, migrations
from sandbox.catalog import Catalog, CatalogConfig
from sandbox.pool_rows import sandbox_proxy_row

CHECK_PROXY_USER = "cannaspider-check"


def contract_stores(catalog: Catalog) -> dict[str, dict]:
    """`sandbox:STATE:N` → the N-th store of STATE in `catalog`, as CONTRACT_STORES holds it."""
    stores: dict[str, dict] = {}
    for state in catalog.config.states:
        for n, store in enumerate(s for s in catalog.stores if s.state == state):
            stores[f"sandbox:{state}:{n}"] = {"id": store.id, "cname": store.cname, "lat": store.lat, "lng": store.lng}
    return stores


class Command(ScrapyCheck):
    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument(
            "--no-sandbox",
            action="store_true",
            help="check against the configured services (DUTCHIE_GRAPHQL_URL, CONTRACT_STORES) instead",
        )

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if opts.no_sandbox or opts.list:
            super().run(args, opts)
            return
        assert self.settings is not None  # Scrapy sets it before running a command
        config = CatalogConfig()  # the default catalog: the one the contracts' store names refer to
        self.settings.set("CONTRACT_STORES", contract_stores(Catalog(config)), priority="cmdline")
        given = (
            "DUTCHIE_GRAPHQL_URL" in env.overrides()
            or (self.settings.getpriority("DUTCHIE_GRAPHQL_URL") or 0) >= SETTINGS_PRIORITIES["cmdline"]
        )
        if given:
            super().run(args, opts)
            return
        # the sandbox's servers (aiohttp, Pillow) load when a check starts one, not with every `scrapy`
        from sandbox.server import Sandbox  # noqa: PLC0415 - a command's start-up time

        url = database_url(self.settings)
        migrations.apply(url, log=lambda line: None)  # the pool reads the proxies table
        auth = (CHECK_PROXY_USER, secrets.token_urlsafe(12))
        with Sandbox(config, proxy=True, proxy_auth=auth) as sandbox:
            assert sandbox.urls is not None
            self.settings.set("DUTCHIE_GRAPHQL_URL", sandbox.urls.graphql, priority="cmdline")
            with sandbox_proxy_row(url, sandbox.urls.proxy or "", auth):
                super().run(args, opts)
