"""SERP competitor pages through a self-hosted Firecrawl (docs/onpage.md, docs/firecrawl.md):
request builders and response readers (api), the client over Scrapy's downloader (client),
one batch's life from submission to its per-URL outcome (batch), the outcome → crawlStatus
mapping and challenge detection (classify), the on-page HTML parser (onpage) and its bounded
JSON-LD reader (json_ld), the parser processes that read each page within a deadline
(parser_pool), the SQL merge into
keywords.serp (merge), the keywords file import (keywords_file) and one keyword's job (job).
"""
