"""Prometheus metrics: the fleet's state read from PostgreSQL by `scrapy serve` (fleet.py), and one
crawl's stats exported by the crawl itself (crawl.py). docs/operations.md, "Metrics and probes"."""
