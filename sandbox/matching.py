"""How well the crawl's matching groups the sandbox's products (docs/analytics.md, "Measured
precision"): the sandbox's catalog knows what every product really is (Catalog.truth), the
database what the product writer made of it (store_products.canonical_brand_id and
canonical_product_id).

Pairwise figures over store products: precision is the share of pairs put in one group that
truly are one brand (one product); recall the share of truly-same pairs put in one group.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import psycopg

from sandbox.catalog import Catalog


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


def measure(conn: psycopg.Connection, catalog: Catalog) -> tuple[Quality, Quality]:
    """(brands, products) over every store product of the catalog's stores in the database."""
    truth = {}
    for store in catalog.stores:
        for index in range(store.product_count):
            truth[(store.id, catalog.product_id(store, index))] = catalog.truth(store, index)
    brands, products = [], []
    rows = conn.execute(
        "SELECT d.platform_dispensary_id, sp.provider_product_id, sp.canonical_brand_id, sp.canonical_product_id "
        "FROM store_products sp JOIN dispensaries d ON d.id = sp.dispensary_id"
    )
    for store_id, product_id, brand, product in rows:
        known = truth.get((store_id, product_id))
        if known is None:  # not a product of this catalog
            continue
        brands.append((brand, known.brand))
        products.append((product, known.product))
    return quality(brands), quality(products)
