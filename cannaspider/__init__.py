"""cannaspider: dispensary menu crawls (Dutchie) and JS-rendered SERP snapshots (Firecrawl)."""

__version__ = "0.1.0"
