"""A competitor page's corpus: what it says, for the semantic profile (docs/onpage.md, "Corpus").

The main text is trafilatura's (navigation, footers, cookie banners and other boilerplate
removed by its extractor, with `favor_precision`: on a short page its recall mode keeps the
menu; `fast`: its fallback extractors double the time for the same text on the pages we tried,
benchmarks/onpage_concurrency.py). trafilatura runs offline on the tree we already parsed (it copies it); nothing here
fetches anything. Beside the text: the headings in document order (the on-page parser's), the
alt texts, the link anchor texts and the JSON-LD objects themselves, and the page's language.

Everything is bounded (CorpusLimits): the HTML read, the text kept, the number of entries of each
list and the size of the JSON-LD kept; `truncated` says a page was cut. Strings are made
storable in PostgreSQL (no NUL character), JSON-LD too (onpage.py: no NaN or Infinity, no
block nested deeper than it reads).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

import trafilatura
from parsel import Selector

from cannaspider.firecrawl import language, onpage, terms
from cannaspider.firecrawl.items import Anchor, Heading, OnpageFields, PageCorpus

if TYPE_CHECKING:  # the parser processes import this module (parser_pool.py): Scrapy stays out of them
    from scrapy.settings import BaseSettings

logger = logging.getLogger(__name__)
# PostgreSQL's text and jsonb refuse NUL (and lone surrogates): one odd page must not lose a locale's merge
storable = onpage.storable_text


@dataclass(frozen=True)
class CorpusLimits:
    max_html_chars: int  # ONPAGE_MAX_HTML_CHARS: a page is parsed on this much of its HTML
    max_text_chars: int  # ONPAGE_CORPUS_MAX_CHARS: main text kept (and JSON-LD, serialized)
    max_items: int  # ONPAGE_CORPUS_MAX_ITEMS: headings, alt texts, anchors, JSON-LD objects
    max_item_chars: int  # ONPAGE_CORPUS_MAX_ITEM_CHARS: one heading, alt text or anchor text

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> CorpusLimits:
        """ValueError naming the setting when one is not a positive integer (a 0 would keep
        nothing of every page, silently)."""
        values = {}
        for attr, name in (
            ("max_html_chars", "ONPAGE_MAX_HTML_CHARS"),
            ("max_text_chars", "ONPAGE_CORPUS_MAX_CHARS"),
            ("max_items", "ONPAGE_CORPUS_MAX_ITEMS"),
            ("max_item_chars", "ONPAGE_CORPUS_MAX_ITEM_CHARS"),
        ):
            values[attr] = positive_setting(settings, name)
        return cls(**values)


def positive_setting(settings: BaseSettings, name: str) -> int:
    try:
        value: int = settings.getint(name)
    except ValueError:
        value = 0
    if value < 1:
        raise ValueError(f"{name} must be a positive integer, got {settings.get(name)!r}")
    return value


def _cut(text: str, limit: int) -> tuple[str, bool]:
    """At most `limit` characters, cut at a space when there is one near the end."""
    if len(text) <= limit:
        return text, False
    head = text[:limit]
    space = head.rfind(" ", max(0, limit - 100))
    return (head[:space] if space > 0 else head).rstrip(), True


def main_text(sel: Selector, url: str) -> str:
    """trafilatura's main text of the page, one block a line ("" when it finds none)."""
    try:
        text = trafilatura.extract(
            sel.root,
            url=url,
            favor_precision=True,
            fast=True,  # no fallback extractors (readability, jusText): half the time, same text on our pages
            include_comments=False,
            include_tables=True,
            deduplicate=False,
            with_metadata=False,
        )
    except Exception as exc:  # noqa: BLE001 - its failure on one odd page is that page's empty text, not the job's end
        logger.warning("trafilatura could not read %s: %s: %s", url, type(exc).__name__, exc)
        return ""
    return text or ""


def _items(values: list[str], limits: CorpusLimits) -> tuple[list[str], bool]:
    kept = [v[: limits.max_item_chars] for v in dict.fromkeys(values)]  # once each, in order
    return kept[: limits.max_items], len(kept) > limits.max_items


def cut_html(html: str, limits: CorpusLimits) -> tuple[str, bool]:
    """The part of the HTML every parser reads: a 20 MB page is cut, not parsed whole. A lone
    surrogate (Firecrawl's JSON may escape one, `\\ud800`) becomes U+FFFD: lxml cannot encode
    it, and one such character would otherwise fail the whole locale's crawl."""
    cut = len(html) > limits.max_html_chars
    if cut:
        html = html[: limits.max_html_chars]
    return onpage.without_lone_surrogates(html), cut


def extract(
    sel: Selector,
    url: str,
    fields: OnpageFields,
    *,
    firecrawl_language: object = None,
    html_chars: int = 0,
    html_truncated: bool = False,
    limits: CorpusLimits,
    ld: onpage.JsonLd | None = None,
) -> PageCorpus:
    """The corpus of a parsed page (`fields`: the on-page parser's reading of the same tree;
    `ld`: its JSON-LD, when already read)."""
    text, truncated = _cut(storable(main_text(sel, url)), limits.max_text_chars)
    alts, cut_alts = _items([a for a in (onpage.clean(v) for v in sel.xpath("//body//img/@alt").getall()) if a], limits)
    base = onpage.base_url(sel, url)
    anchors: list[Anchor] = []
    seen: set[tuple[str, str]] = set()
    for node, target in onpage.body_links(sel, base):
        label = onpage.clean(node.text_content())
        if not label or (label, target) in seen:
            continue
        seen.add((label, target))
        anchors.append(Anchor(label[: limits.max_item_chars], target))
    cut_anchors = len(anchors) > limits.max_items
    if ld is None:
        ld = onpage.read_json_ld(sel)
    blocks = ld.blocks  # storable already (onpage.read_json_ld)
    kept: list[object] = []
    budget = limits.max_text_chars
    for block in blocks[: limits.max_items]:
        size = len(json.dumps(block, ensure_ascii=False))
        if size > budget:
            truncated = True
            continue
        budget -= size
        kept.append(block)
    words = terms.tokens(text)
    lang = (
        terms.language_code(fields.lang)
        or terms.language_code(firecrawl_language)
        or language.detect(f"{fields.title or ''}\n{text}")
    )
    headings = fields.headings[: limits.max_items]
    return PageCorpus(
        url=url,
        lang=lang,
        title=storable(fields.title or "")[: limits.max_item_chars] or None,
        text=text,
        headings=[Heading(h.level, storable(h.text)[: limits.max_item_chars]) for h in headings],
        alt_texts=[storable(a) for a in alts],
        anchors=[Anchor(storable(a.text), storable(a.href)) for a in anchors[: limits.max_items]],
        json_ld=kept,
        json_ld_invalid=ld.unread,
        words=len(words),
        html_chars=html_chars,
        truncated=truncated
        or html_truncated
        or cut_alts
        or cut_anchors
        or len(fields.headings) > limits.max_items
        or len(blocks) > limits.max_items,
    )
