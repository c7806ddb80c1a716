"""`scrapy brands list | alias NAME CANONICAL`: the canonical brands, and an operator's alias that
makes a spelling normalization cannot resolve one brand with another (docs/analytics.md, "One
brand, one product")."""

from __future__ import annotations

import argparse
import sys

from cannaspider.analytics import canonical
from cannaspider.command_base import CannaspiderCommand
from cannaspider.db import connect, database_url


class Command(CannaspiderCommand):
    def syntax(self) -> str:
        return "list | alias NAME CANONICAL"

    def short_desc(self) -> str:
        return "List the canonical brands, or make brand NAME the brand CANONICAL (a name or an id)"

    def execute(self, args: list[str], opts: argparse.Namespace) -> None:
        action = args[0] if args else ""
        if action == "list" and len(args) == 1:
            self._list()
        elif action == "alias" and len(args) == 3:
            self._alias(args[1], args[2])
        else:
            self._fail("usage: scrapy brands list | scrapy brands alias NAME CANONICAL")

    def _fail(self, message: str) -> None:
        print(f"error: {message}", file=sys.stderr)
        self.exitcode = 2

    def _alias(self, name: str, target: str) -> None:
        with connect(database_url(self.settings)) as conn:
            try:
                done = canonical.alias(conn, name, target)
            except canonical.BrandError as exc:
                self._fail(str(exc))
                return
        print(
            f"{done.alias!r} is brand {done.brand_id} ({done.brand_name}): {done.brands_merged} brand row(s) merged, "
            f"{done.store_products} store product(s) relinked, {done.products_merged} product(s) folded together"
        )

    def _list(self) -> None:
        with connect(database_url(self.settings)) as conn:
            brands = canonical.list_brands(conn)
        for b in brands:
            others = [s for s in b.spellings if s != b.name]
            extra = f"  also: {', '.join(others)}" if others else ""
            aliases = f"  aliases: {', '.join(b.aliases)}" if b.aliases else ""
            print(
                f"{b.id:>6}  {b.name}  [{b.stores} store(s), {b.store_products} store product(s), "
                f"{b.products} product(s)]{extra}{aliases}"
            )
