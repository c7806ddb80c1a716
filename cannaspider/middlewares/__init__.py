"""Downloader middlewares (enabled in settings.py, DOWNLOADER_MIDDLEWARES)."""
