"""`benchmarks/ingest.py --market-cost`: the product pipeline without what issue 17 added to it
(identity keys and unit prices in the normalizer, brands and canonical products in the writer's
statement), so one run can measure their cost against the full pipeline.

Imported only by the crawl of that variant (its ITEM_PIPELINES name these classes): the
normalizer's identity functions are replaced in that process alone."""

from __future__ import annotations

from cannaspider.pipelines.normalize import NormalizeProductPipeline
from cannaspider.pipelines.product_writer import COLUMNS, ProductWriterPipeline, write_statement
from cannaspider.platforms.dutchie import normalizer

# the batch's columns before migration 016: up to last_crawl_run_id
OLD_COLUMNS = COLUMNS[: [name for name, _ in COLUMNS].index("last_crawl_run_id") + 1]


def _none(*args: object) -> None:
    return None


normalizer.brand_key_name = _none  # type: ignore[assignment]
normalizer.product_name_key = _none  # type: ignore[assignment]
normalizer.size_key = lambda options: ""  # type: ignore[assignment]
normalizer.unit_prices = lambda *args: (None, None, None)  # type: ignore[assignment]


class NormalizeWithoutMarket(NormalizeProductPipeline):
    """The normalizer without identity keys and unit prices (patched above)."""


class ProductWriterWithoutMarket(ProductWriterPipeline):
    """The writer's statement and rows as before migration 016."""

    statement = write_statement(OLD_COLUMNS, link=False)

    def row(self, p) -> tuple:
        return super().row(p)[: len(OLD_COLUMNS)]
