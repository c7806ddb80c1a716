"""A page's JSON-LD, read so that no block can fail the page (docs/onpage.md, "Hostile pages").

Blocks come from <script type="application/ld+json">, decoded with json (extruct would add
rdflib, pyRdfa, mf2py and html5lib to the environment for the one extractor we use). json
decodes whatever a page writes: arrays or `@graph`s nested a thousand levels deep (a
RecursionError there, or in any recursive reader after it: our walk of the types, json.dumps,
pickle), `\\u0000` and lone-surrogate escapes such as `\\ud800` (PostgreSQL's text and jsonb refuse
both), `NaN` and `1e999` (jsonb refuses non-finite numbers). So each block is decoded, then copied
with its strings made storable and its non-finite numbers nulled, to at most MAX_DEPTH levels of
arrays and objects: a deeper block is left out of the page's structured data, counted, and said
(`warning`), and the rest of the page is read as usual.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field

from parsel import Selector

# Real schema.org data nests about ten levels (a @graph, an offer, its seller, an address); the
# bound keeps every recursive reader of a kept block far below Python's recursion limit.
MAX_DEPTH = 64
LONE_SURROGATE = re.compile("[\ud800-\udfff]")
# some CMSs wrap the block in an HTML comment or CDATA
WRAPPERS = (("<!--", "-->"), ("<![CDATA[", "]]>"), ("//<![CDATA[", "//]]>"))


@dataclass
class JsonLd:
    blocks: list[object] = field(default_factory=list)  # decoded and made storable, in document order
    invalid: int = 0  # blocks that are not JSON
    too_deep: int = 0  # blocks nested deeper than MAX_DEPTH, left out

    @property
    def unread(self) -> int:
        """Blocks the page has and its structured data lacks (the on-page `jsonLdInvalid`)."""
        return self.invalid + self.too_deep

    @property
    def warning(self) -> str | None:
        if not self.too_deep:
            return None
        return f"{self.too_deep} JSON-LD block(s) left out: nested deeper than {MAX_DEPTH} levels"


class _TooDeep(Exception):
    pass


def without_lone_surrogates(value: str) -> str:
    """`value` with its lone surrogates replaced by U+FFFD (lxml and UTF-8 cannot encode them)."""
    if value.isascii():
        return value
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return LONE_SURROGATE.sub("\ufffd", value)  # a str holds pairs combined: what is left is lone
    return value


def storable_text(value: str) -> str:
    """`value` without NUL and with lone surrogates replaced by U+FFFD."""
    return without_lone_surrogates(value.replace("\x00", "") if "\x00" in value else value)


def _copy(value: object, depth: int) -> object:
    """The storable copy of a decoded value; _TooDeep past MAX_DEPTH levels (loops, not
    comprehensions: one frame a level)."""
    if isinstance(value, str):
        return storable_text(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, list):
        if depth >= MAX_DEPTH:
            raise _TooDeep
        items: list[object] = []
        for item in value:
            items.append(_copy(item, depth + 1))
        return items
    if isinstance(value, dict):
        if depth >= MAX_DEPTH:
            raise _TooDeep
        obj: dict[str, object] = {}
        for key, item in value.items():
            obj[storable_text(key)] = _copy(item, depth + 1)
        return obj
    return value


def read(sel: Selector) -> JsonLd:
    """The page's blocks, each decoded, bounded and made storable."""
    out = JsonLd()
    for raw in sel.xpath("//script[@type='application/ld+json']/text()").getall():
        text = raw.strip()
        for head, tail in WRAPPERS:
            if text.startswith(head) and text.endswith(tail):
                text = text[len(head) : -len(tail)].strip()
        if not text:
            continue
        try:
            out.blocks.append(_copy(json.loads(text), 0))
        except ValueError:
            out.invalid += 1
        except (RecursionError, _TooDeep):  # json's own decoder stops near Python's recursion limit
            out.too_deep += 1
    return out


def types(blocks: list[object]) -> list[str]:
    """Every @type of the blocks (lists and @graph included), in order, once each."""
    found: list[str] = []

    def walk(node: object) -> None:
        if isinstance(node, list):
            for n in node:
                walk(n)
        elif isinstance(node, dict):
            t = node.get("@type")
            for value in t if isinstance(t, list) else [t]:
                if isinstance(value, str) and value and value not in found:
                    found.append(value)
            if "@graph" in node:
                walk(node["@graph"])

    walk(blocks)  # blocks are at most MAX_DEPTH deep (read)
    return found
