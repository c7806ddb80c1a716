"""RawProduct → StoreProduct. One bad product is a warning and is dropped; the page goes on. Image
and logo URLs the normalizer refused for their scheme (only http(s) is fetched: docs/images.md)
are the stat cannaspider/image_urls_refused."""

from __future__ import annotations

import logging
from typing import Any

from scrapy.crawler import Crawler
from scrapy.exceptions import DropItem

from cannaspider.db.crawl_store import CrawlStore
from cannaspider.dutchie.normalizer import NormalizationError, normalize
from cannaspider.items import RawProduct
from cannaspider.storable.urls import REFUSED_URLS

logger = logging.getLogger(__name__)


class NormalizeProductPipeline:
    def __init__(self, crawler: Crawler):
        self.crawler = crawler
        self.store = CrawlStore.for_crawler(crawler)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> NormalizeProductPipeline:
        return cls(crawler)

    def process_item(self, item: Any) -> Any:
        if not isinstance(item, RawProduct):
            return item
        refused = REFUSED_URLS.count
        try:
            return normalize(item)
        except NormalizationError as exc:
            self.crawler.stats.inc_value("cannaspider/products_rejected")
            self.store.ledger.account((item.dispensary_id, item.crawl_run_id), rejected=True)
            raise DropItem(f"dispensary {item.dispensary_id}: product skipped: {exc}") from exc
        except Exception as exc:  # a payload shape we did not foresee must not stop the page
            self.crawler.stats.inc_value("cannaspider/products_rejected")
            self.store.ledger.account((item.dispensary_id, item.crawl_run_id), rejected=True)
            raise DropItem(
                f"dispensary {item.dispensary_id}: product skipped: unexpected {exc.__class__.__name__}: {exc}"
            ) from exc
        finally:
            if REFUSED_URLS.count != refused:
                self.crawler.stats.inc_value("cannaspider/image_urls_refused", REFUSED_URLS.count - refused)
