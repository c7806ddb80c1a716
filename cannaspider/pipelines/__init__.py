"""Item pipelines, one concern each: dispensary writer, normalize, product writer, snapshot
writer, crawl completion. They share the crawler's CrawlStore (pool + ledger)."""
