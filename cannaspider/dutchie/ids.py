"""The one rule for a Dutchie product's identity, used by the spider (which ids a crawl saw) and
the normalizer (the id a row is stored under): if the two disagreed, a product would be stored
under one id and counted missing under the other on every crawl."""

from __future__ import annotations


def product_id(raw: object) -> str | None:
    """The product's id (`_id`, else `id`) with surrounding whitespace removed; None when absent,
    blank or not a string."""
    if not isinstance(raw, dict):
        return None
    pid = raw.get("_id") or raw.get("id")
    if not isinstance(pid, str):
        return None
    return pid.strip() or None
