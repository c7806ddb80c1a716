"""Crawl health: Spidermon monitors run when a crawl ends and while it runs, and the notification
they send (docs/health.md).

checks.py         the monitors: finish reason and errors, store crawls, blocks, images, item validation
validation.py     the StoreProduct JSON Schema and the pipeline validating a sample of items against it
extension.py      CrawlHealth, the extension running the suite at close and every HEALTH_CHECK_PERIOD_S;
                  the stretch a check judges; the SPIDERMON_* settings honoured; CrawlHealthSuite
health_notify.py  the per-crawl JSON report, the ERROR log line and the crawl-health webhook
"""
