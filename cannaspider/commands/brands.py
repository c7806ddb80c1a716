"""`scrapy brands list | alias NAME CANONICAL | rename BRAND NEW_NAME | suggest`: the canonical
brands; an operator's alias that makes a spelling normalization cannot resolve one brand with
another; the name a brand is shown by; and the likely duplicates to alias, ranked with their
reasons (docs/analytics.md, "One brand, one product" and "Near-duplicate brands")."""

from __future__ import annotations

import argparse
import sys

from cannaspider.analytics import canonical
from cannaspider.command_base import CannaspiderCommand
from cannaspider.db import connect, database_url

USAGE = (
    "usage: scrapy brands list | scrapy brands alias NAME CANONICAL | scrapy brands rename BRAND NEW_NAME"
    " | scrapy brands suggest [--min-score N] [--limit N]"
)


class Command(CannaspiderCommand):
    def syntax(self) -> str:
        return "list | alias NAME CANONICAL | rename BRAND NEW_NAME | suggest [--min-score N] [--limit N]"

    def short_desc(self) -> str:
        return "List, alias, rename the canonical brands, or suggest likely duplicates to alias"

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument(
            "--min-score", type=float, default=85.0, help="suggest: the lowest name score (0-100) suggested"
        )
        parser.add_argument("--limit", type=int, default=50, help="suggest: the pairs printed")

    def execute(self, args: list[str], opts: argparse.Namespace) -> None:
        action = args[0] if args else ""
        if action == "list" and len(args) == 1:
            self._list()
        elif action == "alias" and len(args) == 3:
            self._alias(args[1], args[2])
        elif action == "rename" and len(args) == 3:
            self._rename(args[1], args[2])
        elif action == "suggest" and len(args) == 1:
            if not 0 <= opts.min_score <= 100 or opts.limit < 1:
                self._fail("--min-score is 0 to 100 and --limit at least 1")
                return
            self._suggest(opts.min_score, opts.limit)
        else:
            self._fail(USAGE)

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

    def _rename(self, brand: str, new_name: str) -> None:
        with connect(database_url(self.settings)) as conn:
            try:
                done = canonical.rename(conn, brand, new_name)
            except canonical.BrandError as exc:
                self._fail(str(exc))
                return
        found = "; a search by it finds the brand" if done.alias_added else ""
        print(f"brand {done.brand_id} is shown as {done.new_name!r} (was {done.old_name!r}){found}")

    def _suggest(self, min_score: float, limit: int) -> None:
        from cannaspider.analytics import brand_suggest  # noqa: PLC0415 - a command's start-up time (rapidfuzz)

        with connect(database_url(self.settings)) as conn:
            pairs = brand_suggest.suggest(conn, min_score=min_score, limit=limit)
        if not pairs:
            print(f"no likely duplicate: no two brands' names score {min_score:g} or more, no brandId joins two")
        for rank, pair in enumerate(pairs, 1):
            keep, merge = pair.keep, pair.merge
            print(
                f"{rank:>3}. score {pair.score:5.1f}  #{keep.id} {keep.name} [{len(keep.stores)} store(s)]"
                f"  ~  #{merge.id} {merge.name} [{len(merge.stores)} store(s)]"
            )
            for reason in pair.reasons():
                print(f"       {reason}")
            print(f"       merge: {pair.command()}")

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
