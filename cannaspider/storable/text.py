"""Strings PostgreSQL takes: no NUL (neither text nor jsonb takes one), no lone surrogate (a valid
JSON escape, not UTF-8: the JSON encoder refuses it; replaced by U+FFFD), and for display text no
HTML tags or entities and collapsed whitespace. A repaired string is recorded (storable/degraded.py).

The usual string is plain ASCII without NUL: callers check that inline and call `repair` only for
the others (this runs for every string of every product).
"""

from __future__ import annotations

import html
import re

from cannaspider.storable.degraded import degrade

TAG = re.compile(r"<[^>]*>")
SURROGATE = re.compile("[\ud800-\udfff]")


def repair(value: str, what: str) -> str:
    """`value` without NUL and with lone surrogates replaced by U+FFFD (for strings that are not
    plain ASCII without NUL: callers check that first, inline)."""
    fixed = value.replace("\x00", "") if "\x00" in value else value
    if not fixed.isascii():
        try:
            fixed.encode("utf-8")
        except UnicodeEncodeError:
            fixed = SURROGATE.sub("\ufffd", fixed)
    if fixed != value:
        degrade(what, value)
    return fixed


def storable(value: str, what: str) -> str:
    return value if value.isascii() and "\x00" not in value else repair(value, what)


def clean_text(value: object, what: str = "text") -> str | None:
    """Text without HTML tags and entities, whitespace collapsed, storable; None when empty."""
    if not isinstance(value, str):
        return None
    if not value.isascii() or "\x00" in value:
        value = repair(value, what)
    if "<" in value or "&" in value:  # (as clean(), inline: this runs for most products)
        value = html.unescape(TAG.sub(" ", value))
    return " ".join(value.split()) or None


def clean(value: str) -> str | None:
    """clean_text() of a string already made storable."""
    if "<" in value or "&" in value:
        value = html.unescape(TAG.sub(" ", value))  # entities of NUL or surrogates become U+FFFD
    return " ".join(value.split()) or None
