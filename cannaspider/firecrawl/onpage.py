"""The on-page parser: a rendered page's HTML → OnpageFields, with parsel (Scrapy's selectors).

JSON-LD is read by json_ld.py (bounded: a hostile block is left out, not a failure).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import lru_cache
from urllib.parse import urljoin, urlsplit

from lxml.html import HtmlElement
from parsel import Selector

from cannaspider.firecrawl import json_ld
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


def parse(html: str, url: str, sel: Selector | None = None, ld: json_ld.JsonLd | None = None) -> OnpageFields:
    """`sel`, `ld`: the page and its JSON-LD already read (classify reads them once for every reader)."""
    if sel is None:
        sel = selector(html)
    if ld is None:
        ld = json_ld.read(sel)
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
    fields.json_ld_types = json_ld.types(ld.blocks)
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
