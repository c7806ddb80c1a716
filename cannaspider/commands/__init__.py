"""Custom `scrapy` commands: migrate, db, sandbox, demo."""
