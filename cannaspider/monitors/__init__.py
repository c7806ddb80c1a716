"""Crawl health: Spidermon monitors run when a crawl ends, and the alert they raise (docs/health.md).

schema.py              the StoreProduct JSON Schema, generated from the item dataclasses
validation.py          a pipeline validating each StoreProduct against it (counted in the stats)
finish.py              finish reason and error count
stores.py              incomplete store crawls, a store's product count falling against its last crawl
blocks.py              blocks per proxy, stale persisted-hash fallbacks
alerts.py              the per-crawl JSON report, the ERROR log line and the webhook
spidermon_settings.py  the SPIDERMON_* settings honoured; any other refused at start
suite.py               the suite Spidermon runs at spider close (SPIDERMON_SPIDER_CLOSE_MONITORS)
"""
