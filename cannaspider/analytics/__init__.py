"""Analytics over the crawled data: materialized views (migrations/010_analytics.sql) and their
refresh (docs/analytics.md)."""
