"""Imported by the parser processes' fork server (parser_pool.py): the language model loaded once
there, so that every parser process forked from it starts with it instead of loading it (1.5 s)."""

from cannaspider.firecrawl import language

language.identifier()
