"""The one rule for a Dutchie product's identity, used by the spider (which ids a crawl saw) and
the normalizer (the id a row is stored under): if the two disagreed, a product would be stored
under one id and counted missing under the other on every crawl."""

from __future__ import annotations


def product_id(raw: object) -> str | None:
    """The product's id (`_id`, else `id`) with surrounding whitespace removed; None when absent,
    blank, not a string, or not storable as it is (a NUL or a lone surrogate: storing a cleaned id
    would count the product missing under its real one on every crawl)."""
    if not isinstance(raw, dict):
        return None
    pid = raw.get("_id") or raw.get("id")
    if not isinstance(pid, str):
        return None
    pid = pid.strip()
    if not pid or "\x00" in pid or _has_lone_surrogate(pid):
        return None
    return pid


def _has_lone_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False
