"""Item pipelines, one concern each: dispensary writer, normalize, product writer (store_products
and their snapshots, one statement per batch), images (downloaded beside the crawl, stored as
webp: images.py the pipeline, its workers and which images need a download, image_fetch.py one
image fetched and stored, image_sources.py the source claims and local_image_path in batches). A
store's close (its completion, out-of-stock and events) is not a pipeline: the unit lifecycle's
(cannaspider/units/crawl_close.py). They share the crawler's CrawlDatabase (pool + ledger); item_processor.py is the
ITEM_PROCESSOR that chains them. (The validation pipeline between normalize and the writer is
cannaspider/monitors/validation.py.)"""
