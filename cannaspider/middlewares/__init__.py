"""Scrapy middlewares, enabled in settings.py: downloader middlewares (DOWNLOADER_MIDDLEWARES:
stealth.py, rate_limit.py; Dutchie's persisted-query fallback is cannaspider/platforms/dutchie/persisted_queries.py)
and the spider middleware proxy_required.py
(SPIDER_MIDDLEWARES; the unit lifecycle's spider middleware is cannaspider/units/middleware.py)."""
