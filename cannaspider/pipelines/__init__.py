"""Item pipelines, one concern each: dispensary writer, normalize, product writer (store_products
and their snapshots, one statement per batch), crawl completion. They share the crawler's
CrawlStore (pool + ledger); item_processor.py is the ITEM_PROCESSOR that chains them."""
