"""Scrapy middlewares, enabled in settings.py: downloader middlewares (DOWNLOADER_MIDDLEWARES:
stealth.py, rate_limit.py, persisted_queries.py) and the spider middleware proxy_required.py
(SPIDER_MIDDLEWARES; the unit lifecycle's spider middleware is cannaspider/units/middleware.py)."""
