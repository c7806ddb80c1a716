"""SERP competitor pages through a self-hosted Firecrawl (docs/onpage.md, docs/firecrawl.md):
Firecrawl's API and the client over Scrapy's downloader (api), one batch's life from submission to
its per-URL outcome (batch), the outcome → crawlStatus mapping and challenge detection (classify),
the on-page HTML parser and its bounded JSON-LD reader (onpage), the parser processes that read
each page within a deadline (parser_pool), a page's corpus (corpus), its words (terms), a keyword's
semantic profile (profile), the SQL: the merge into keywords.serp, corpora and profiles
(persistence), the keywords file import (keywords_file) and one keyword's job (job).
"""
