"""The on-page parser: a rendered page's HTML → OnpageFields, with parsel (Scrapy's selectors).

JSON-LD is read here too (read_json_ld), bounded: a hostile block is left out, not a failure.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from urllib.parse import urljoin, urlsplit

from lxml.html import HtmlElement
from parsel import Selector

from cannaspider.firecrawl.items import Heading, Hreflang, OnpageFields

# text inside these is never page text
NOT_TEXT = ("script", "style", "noscript", "template", "svg", "iframe", "head")
# and these are the page's frame, not its main text, when we fall back to <body>
FRAME = ("nav", "header", "footer", "aside")
WORD = re.compile(r"\w+", re.UNICODE)
MAIN_CANDIDATES = ("//main", "//*[@role='main']", "//article")
NOT_LINKS = ("javascript:", "mailto:", "tel:", "data:", "#")


def text_xpath(excluded: tuple[str, ...]) -> str:
    cond = " or ".join(f"ancestor::{tag}" for tag in excluded)
    return f".//text()[not({cond})]"


def clean(value: str | None) -> str | None:
    if value is None:
        return None
    text = " ".join(value.split())
    return text or None


def words(node: Selector, excluded: tuple[str, ...] = NOT_TEXT) -> int:
    return sum(len(WORD.findall(t)) for t in node.xpath(text_xpath(excluded)).getall())


def main_text_words(sel: Selector) -> int:
    """Words of the main text: the first main/[role=main]/article that has any, else the body
    without its navigation, header, footer and asides."""
    for xpath in MAIN_CANDIDATES:
        for node in sel.xpath(xpath):
            n = words(node)
            if n:
                return n
    body = sel.xpath("//body")
    return words(body[0], NOT_TEXT + FRAME) if body else 0


def _rel(value: str) -> str:
    """XPath predicate: rel lists `value` (rel is a space-separated, case-insensitive list)."""
    rel = "translate(normalize-space(@rel),'ABCDEFGHIJKLMNOPQRSTUVWXYZ','abcdefghijklmnopqrstuvwxyz')"
    return f"contains(concat(' ',{rel},' '),' {value} ')"


def _host(url: str) -> str:
    try:
        host = (urlsplit(url).hostname or "").lower()
    except ValueError:
        return ""
    return host.removeprefix("www.")


def selector(html: str) -> Selector:
    return Selector(text=html or "<html></html>")


def base_url(sel: Selector, url: str) -> str:
    """What relative links resolve against: <base href>, else the page's URL."""
    base = sel.xpath("//base/@href").get()
    return urljoin(url, base.strip()) if base else url


# a page's links resolved twice (its counts here, its anchors in corpus.py) and often alike
_resolve = lru_cache(maxsize=8192)(urljoin)


def body_links(sel: Selector, base: str) -> Iterator[tuple[HtmlElement, str]]:
    """Each <a> of the body that leads to a web page (its lxml element, read directly: a parsel
    Selector per link costs more than the rest), with its absolute http(s) target (fragments,
    mailto:, tel:, javascript: and data: are not links to a page)."""
    for node in sel.root.xpath("//body//a[@href]"):
        href = (node.get("href") or "").strip()
        if not href or href.lower().startswith(NOT_LINKS):
            continue
        target = _resolve(base, href)
        if target.startswith(("http://", "https://")):
            yield node, target


def parse(html: str, url: str, sel: Selector | None = None, ld: JsonLd | None = None) -> OnpageFields:
    """`sel`, `ld`: the page and its JSON-LD already read (classify reads them once for every reader)."""
    if sel is None:
        sel = selector(html)
    if ld is None:
        ld = read_json_ld(sel)
    base = base_url(sel, url)

    def meta(name: str) -> str | None:
        lowered = "translate(@name,'ABCDEFGHIJKLMNOPQRSTUVWXYZ','abcdefghijklmnopqrstuvwxyz')"
        return clean(sel.xpath(f"//meta[{lowered}='{name}']/@content").get())

    def absolute(href: str | None) -> str | None:
        href = clean(href)
        return urljoin(base, href) if href else None

    fields = OnpageFields(
        title=clean(" ".join(sel.xpath("//title[1]//text()").getall())),
        meta_description=meta("description"),
        canonical=absolute(sel.xpath(f"//link[{_rel('canonical')}]/@href").get()),
        robots=meta("robots"),
        lang=clean(sel.xpath("/html/@lang").get()),
    )
    for link in sel.xpath(f"//link[@hreflang][{_rel('alternate')}]"):
        lang, href = clean(link.attrib.get("hreflang")), absolute(link.attrib.get("href"))
        if lang and href:
            fields.hreflang.append(Hreflang(lang, href))
    for node in sel.xpath("//meta[starts-with(@property,'og:')]"):
        prop, content = node.attrib.get("property", "").strip(), clean(node.attrib.get("content"))
        if content is not None and prop not in fields.open_graph:
            fields.open_graph[prop] = content
    for node in sel.xpath("//body//*[self::h1 or self::h2 or self::h3 or self::h4 or self::h5 or self::h6]"):
        text = clean(" ".join(node.xpath(text_xpath(NOT_TEXT)).getall()))
        if text:
            fields.headings.append(Heading(int(node.root.tag[1]), text))
    fields.word_count = main_text_words(sel)
    fields.json_ld_invalid = ld.unread
    fields.json_ld_types = json_ld_types(ld.blocks)
    images = sel.xpath("//body//img")
    fields.image_count = len(images)
    fields.images_with_alt = sum(1 for img in images if (img.attrib.get("alt") or "").strip())
    fields.alt_coverage = round(fields.images_with_alt / fields.image_count, 4) if fields.image_count else None
    own = _host(url)
    for _, target in body_links(sel, base):
        if _host(target) == own:
            fields.internal_links += 1
        else:
            fields.external_links += 1
    return fields


# A page's JSON-LD, read so that no block can fail the page (docs/onpage.md, "Hostile pages").
#
# Blocks come from <script type="application/ld+json">, decoded with json (extruct would add
# rdflib, pyRdfa, mf2py and html5lib to the environment for the one extractor we use). json
# decodes whatever a page writes: arrays or `@graph`s nested a thousand levels deep (a
# RecursionError there, or in any recursive reader after it: our walk of the types, json.dumps,
# pickle), `\u0000` and lone-surrogate escapes such as `\ud800` (PostgreSQL's text and jsonb refuse
# both), `NaN` and `1e999` (jsonb refuses non-finite numbers). So each block is decoded, then copied
# with its strings made storable and its non-finite numbers nulled, to at most MAX_DEPTH levels of
# arrays and objects: a deeper block is left out of the page's structured data, counted, and said
# (`warning`), and the rest of the page is read as usual.

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


def read_json_ld(sel: Selector) -> JsonLd:
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


def json_ld_types(blocks: list[object]) -> list[str]:
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
