"""A page's structured data beyond JSON-LD: microdata, RDFa, Open Graph and Dublin Core, read by
extruct, and the schema.org types of all of it (JSON-LD's included) (docs/onpage.md, "Structured
data").

It runs where the rest of the page is read: in a parser process, within the page's deadline and
memory cap (parser_pool.py). What a hostile page can do to it is bounded here too, so that its
structured data never costs the page its reading:
- a syntax the page does not use is not run (microdata needs an `itemscope`, RDFa a `typeof`,
  `vocab`, `resource` or `prefix`): most pages pay for a few XPath counts;
- a page with more than MAX_NODES elements of one syntax, or with them nested more than
  MAX_NESTING levels, has that syntax left out, and said (`warning`), rather than extracted for
  seconds or minutes;
- an extractor that fails (a RecursionError on a million nested items, anything pyRdfa or rdflib
  raise) leaves its syntax out, said the same way; the page is read as usual.
RDFa needs the page parsed again into extruct's DOM-like tree; the other syntaxes read the tree
already parsed.
"""

from __future__ import annotations

import json
import logging
import sys
import types
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from parsel import Selector

logger = logging.getLogger(__name__)


def _without_jstyleson() -> None:
    """extruct's package imports jstyleson for its JSON-LD extractor, which we do not use
    (onpage.read_json_ld reads JSON-LD, bounded). jstyleson is published as a source archive only,
    so it is kept out of the lock (pyproject.toml, exclude-dependencies); this stand-in satisfies
    the import, and refuses if it is ever called."""
    if "jstyleson" in sys.modules:
        return
    stand_in = types.ModuleType("jstyleson", "stand-in: extruct's JSON-LD extractor is not used (structured.py)")

    def loads(*args: object, **kwargs: object) -> object:
        raise ValueError("jstyleson is not installed: JSON-LD is read by cannaspider.firecrawl.onpage")

    stand_in.loads = loads  # type: ignore[attr-defined]
    sys.modules["jstyleson"] = stand_in


_without_jstyleson()

from extruct.dublincore import DublinCoreExtractor  # noqa: E402
from extruct.opengraph import OpenGraphExtractor  # noqa: E402
from extruct.rdfa import RDFaExtractor  # noqa: E402
from extruct.utils import parse_xmldom_html  # noqa: E402
from extruct.w3cmicrodata import MicrodataExtractor  # noqa: E402

# elements of one syntax past which it is left out (a real product page has tens)
MAX_NODES = 2000
MAX_ITEMS = 200  # items kept per syntax
SCHEMA_PREFIXES = ("http://schema.org/", "https://schema.org/", "http://www.schema.org/", "https://www.schema.org/")
# Items nested in items: extruct's microdata costs grow with the fourth power of the depth (200
# levels 1.3 s, 400 levels 21 s); real schema.org data nests about five (an offer, its seller, an
# address).
MAX_NESTING = 16
# what marks each syntax's elements (an XPath predicate)
MICRODATA = "@itemscope"
RDFA = "@typeof or @vocab or @resource or @prefix"
_NAME = "translate(@name,'DCMTERS','dcmters')"
DUBLIN_CORE = f"self::meta and (starts-with({_NAME},'dc.') or starts-with({_NAME},'dcterms.'))"


@dataclass
class StructuredData:
    microdata: list[Any] = field(default_factory=list)
    rdfa: list[Any] = field(default_factory=list)
    opengraph: list[Any] = field(default_factory=list)
    dublincore: list[Any] = field(default_factory=list)
    left_out: list[str] = field(default_factory=list)  # "<syntax>: why", in order

    @property
    def warning(self) -> str | None:
        return f"structured data left out: {'; '.join(self.left_out)}" if self.left_out else None


def read(sel: Selector, html: str, url: str) -> StructuredData:
    """The page's microdata, RDFa, Open Graph and Dublin Core, each bounded as above."""
    out = StructuredData()
    root = sel.root
    extractors: list[tuple[str, str, Callable[[], Iterable[Any]]]] = [
        ("microdata", MICRODATA, lambda: MicrodataExtractor().extract_items(root, url)),
        ("rdfa", RDFA, lambda: RDFaExtractor().extract_items(parse_xmldom_html(html, "UTF-8"), url)),
        ("opengraph", "@property and starts-with(@property,'og:')", lambda: OpenGraphExtractor().extract_items(root)),
        ("dublincore", DUBLIN_CORE, lambda: DublinCoreExtractor().extract_items(root)),
    ]
    for syntax, marks, run in extractors:
        nodes = int(float(sel.xpath(f"count(//*[{marks}])").get() or 0))
        if not nodes:
            continue
        if nodes > MAX_NODES:
            out.left_out.append(f"{syntax}: {nodes} elements, more than {MAX_NODES}")
            continue
        if sel.xpath(f"(//*[{marks}][count(ancestor::*[{marks}]) >= {MAX_NESTING}])[1]"):
            out.left_out.append(f"{syntax}: nested more than {MAX_NESTING} levels")
            continue
        try:
            items = list(run())[:MAX_ITEMS]
            json.dumps(items)  # what the corpus and the profile will do with them: fail here, not there
        except RecursionError:
            out.left_out.append(f"{syntax}: nested too deep")
            continue
        except Exception as exc:  # noqa: BLE001 - an extractor's failure on one odd page loses that syntax, not the page
            logger.info("%s of %s not read: %s: %s", syntax, url, type(exc).__name__, exc)
            out.left_out.append(f"{syntax}: {type(exc).__name__}")
            continue
        setattr(out, syntax, items)
    return out


def schema_type(value: object) -> str | None:
    """`Product`, `schema:Product`, `https://schema.org/Product` → `Product`; None for a type of
    another vocabulary or anything that is not a type name."""
    if not isinstance(value, str) or not value.strip():
        return None
    value = value.strip()
    for prefix in (*SCHEMA_PREFIXES, "schema:"):
        if value.startswith(prefix):
            value = value[len(prefix) :]
            break
    else:
        if ":" in value or "/" in value:  # another vocabulary (og:, foaf:, an IRI elsewhere)
            return None
    return value if value.isidentifier() else None


def schema_types(json_ld: list[object], data: StructuredData) -> list[str]:
    """Every schema.org type of the page, nested ones included (a Product's Offer, its
    AggregateRating), in document order per syntax, once each: JSON-LD (`@type`), microdata
    (`type`), RDFa (`@type`, expanded IRIs)."""
    found: dict[str, None] = {}
    stack: list[tuple[object, str]] = [
        (node, key) for node, key in reversed(((json_ld, "@type"), (data.microdata, "type"), (data.rdfa, "@type")))
    ]
    while stack:  # a loop, not recursion: extruct's items nest as deep as the page's elements
        node, key = stack.pop()
        if isinstance(node, list):
            stack.extend((n, key) for n in reversed(node))
        elif isinstance(node, dict):
            t = node.get(key)
            for value in t if isinstance(t, list) else [t]:
                name = schema_type(value)
                if name:
                    found.setdefault(name, None)
            stack.extend((v, key) for k, v in reversed(node.items()) if k != key and isinstance(v, (list, dict)))
    return list(found)
