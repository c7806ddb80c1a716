"""How well the crawl's matching groups the sandbox's products (docs/analytics.md, "Measured
precision"): the sandbox's catalog knows what every product really is (Catalog.truth), the
database what the product writer made of it (store_products.canonical_brand_id and
canonical_product_id).

Pairwise figures over store products: precision is the share of pairs put in one group that
truly are one brand (one product); recall the share of truly-same pairs put in one group. Across
platforms (`measure_across`): the same over the pairs of a Dutchie store's product and a Jane
store's only, the figures of "one product across platforms" (docs/analytics.md, "Across platforms").
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import psycopg

from sandbox.catalog import Catalog, ProductTruth
from sandbox.jane_api import JaneCatalog
from sandbox.jane_api import product_id as jane_product_id


@dataclass
class Quality:
    store_products: int
    groups: int  # canonical brands or products the rows fell into
    true_groups: int
    pairs_grouped: int
    pairs_correct: int
    pairs_true: int

    @property
    def precision(self) -> float:
        return self.pairs_correct / self.pairs_grouped if self.pairs_grouped else 1.0

    @property
    def recall(self) -> float:
        return self.pairs_correct / self.pairs_true if self.pairs_true else 1.0

    def line(self, what: str) -> str:
        return (
            f"{what:9} precision {self.precision:.4f} ({self.pairs_correct} of {self.pairs_grouped} pairs grouped "
            f"are the same)   recall {self.recall:.4f} (of {self.pairs_true} true pairs)   "
            f"{self.groups} groups for {self.true_groups} true ones, {self.store_products} store products"
        )


def _pairs(n: int) -> int:
    return n * (n - 1) // 2


def quality(rows: list[tuple[object, str]]) -> Quality:
    """rows: (predicted group, true group) per store product."""
    grouped = Counter(p for p, _ in rows)
    true = Counter(t for _, t in rows)
    both = Counter(rows)
    return Quality(
        store_products=len(rows),
        groups=len(grouped),
        true_groups=len(true),
        pairs_grouped=sum(_pairs(n) for n in grouped.values()),
        pairs_correct=sum(_pairs(n) for n in both.values()),
        pairs_true=sum(_pairs(n) for n in true.values()),
    )


def quality_across(rows: list[tuple[object, str, str]], a: str, b: str) -> Quality:
    """quality() over the pairs of one row of platform `a` and one of `b` only; rows: (predicted
    group, true group, platform) per store product."""
    grouped: dict[object, Counter[str]] = {}
    true: dict[str, Counter[str]] = {}
    both: dict[tuple[object, str], Counter[str]] = {}
    for predicted, truly, platform in rows:
        grouped.setdefault(predicted, Counter())[platform] += 1
        true.setdefault(truly, Counter())[platform] += 1
        both.setdefault((predicted, truly), Counter())[platform] += 1

    def cross(groups: dict) -> int:
        return sum(c[a] * c[b] for c in groups.values())

    return Quality(
        store_products=len(rows),
        groups=sum(1 for c in grouped.values() if c[a] and c[b]),  # groups with rows of both
        true_groups=sum(1 for c in true.values() if c[a] and c[b]),
        pairs_grouped=cross(grouped),
        pairs_correct=cross(both),
        pairs_true=cross(true),
    )


def _truth(catalog: Catalog, jane: JaneCatalog | None) -> dict[tuple[str, str, str], ProductTruth]:
    """(platform, platform store id, product id) → what the product is, for every catalog product."""
    truth = {}
    for store in catalog.stores:
        for index in range(store.product_count):
            truth[("dutchie", store.id, catalog.product_id(store, index))] = catalog.truth(store, index)
    if jane is not None:
        for jstore in jane.stores:
            for index in range(jstore.product_count):
                truth[("jane", str(jstore.id), str(jane_product_id(jstore.id, index)))] = jane.truth(jstore, index)
    return truth


def _rows(conn: psycopg.Connection, catalog: Catalog, jane: JaneCatalog | None) -> list[tuple]:
    """(canonical brand, canonical product, truth, platform) of each catalog product in the database."""
    truth = _truth(catalog, jane)
    rows = conn.execute(
        "SELECT d.platform, d.platform_dispensary_id, sp.provider_product_id, sp.canonical_brand_id, "
        "sp.canonical_product_id FROM store_products sp JOIN dispensaries d ON d.id = sp.dispensary_id"
    )
    found = []
    for platform, store_id, product_id, brand, product in rows:
        known = truth.get((platform, store_id, product_id))
        if known is not None:  # else not a product of this catalog
            found.append((brand, product, known, platform))
    return found


def measure(conn: psycopg.Connection, catalog: Catalog, jane: JaneCatalog | None = None) -> tuple[Quality, Quality]:
    """(brands, products) over every store product of the catalog's stores in the database (and of
    the Jane catalog's stores, given one)."""
    rows = _rows(conn, catalog, jane)
    return quality([(b, t.brand) for b, _, t, _ in rows]), quality([(p, t.product) for _, p, t, _ in rows])


def measure_across(conn: psycopg.Connection, catalog: Catalog, jane: JaneCatalog) -> tuple[Quality, Quality]:
    """(brands, products) over the pairs of a Dutchie store's product and a Jane store's."""
    rows = _rows(conn, catalog, jane)
    return (
        quality_across([(b, t.brand, platform) for b, _, t, platform in rows], "dutchie", "jane"),
        quality_across([(p, t.product, platform) for _, p, t, platform in rows], "dutchie", "jane"),
    )
