"""RawProduct → StoreProduct, by the normalizer of the product's platform (cannaspider/platforms/).
One bad product is a warning and is dropped; the page goes on. What the normalizer counts becomes
stats: image and logo URLs refused for their scheme (only http(s) is fetched: docs/images.md)
cannaspider/image_urls_refused; texts cut to their limit (storable.py)
cannaspider/text_truncated; unit prices left out as implausible (cannaspider/identity.py,
docs/analytics.md) cannaspider/unit_prices_implausible."""

from __future__ import annotations

import logging
from typing import Any

from scrapy.crawler import Crawler
from scrapy.exceptions import DropItem

from cannaspider.db.crawl_database import CrawlDatabase
from cannaspider.items import RawProduct
from cannaspider.platforms import build
from cannaspider.platforms.interface import NormalizationError, Platform
from cannaspider.storable import Losses

# the stats of the counts (counts()) read before and after a product, the difference counted
COUNTED = ("cannaspider/image_urls_refused", "cannaspider/text_truncated", "cannaspider/unit_prices_implausible")

logger = logging.getLogger(__name__)


class NormalizeProductPipeline:
    def __init__(self, crawler: Crawler):
        self.crawler = crawler
        self.store = CrawlDatabase.for_crawler(crawler)
        self.platforms: dict[str, Platform] = {}  # by name, built on a product of theirs
        # what normalizing this crawl's products lost (cannaspider/storable.py), passed to each one's
        # normalizer: values degraded (logged rate limited), texts cut, URLs refused, unit prices
        # left out as implausible
        self.losses = Losses()

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> NormalizeProductPipeline:
        return cls(crawler)

    def counts(self) -> tuple[int, int, int]:
        """The running counts COUNTED names, in its order."""
        return self.losses.refused_urls, self.losses.truncated, self.losses.implausible

    def process_item(self, item: Any) -> Any:
        if not isinstance(item, RawProduct):
            return item
        before = self.counts()
        try:
            platform = self.platforms.get(item.platform)
            if platform is None:
                platform = self.platforms[item.platform] = build(item.platform, self.crawler.settings)
            return platform.normalize(item, self.losses)
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
            for stat, count, now in zip(COUNTED, before, self.counts(), strict=True):
                if now != count:
                    self.crawler.stats.inc_value(stat, now - count)
