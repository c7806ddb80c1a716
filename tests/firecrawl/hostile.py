"""Hostile competitor pages, built for the tests (issue 28, points 10 and 15)."""

from __future__ import annotations

from contextlib import AbstractContextManager

from aiohttp import web

from tests.servers import serve_app

# JSON-LD blocks that failed every page of their keyword: RecursionError, UnicodeEncodeError
DEEP_ARRAY = "[" * 1000 + "]" * 1000
DEEP_GRAPH = '{"@graph": ' * 1000 + '{"@type": "Thing"}' + "}" * 1000
SURROGATES = '{"@type": "Product", "name": "Hemp \\ud800 oil", "\\udfff": "key"}'
NUL_AND_INFINITY = '{"@type": "Art\\u0000icle", "rating": 1e999, "low": -Infinity}'

# the page of 40,000 headings (68 s on the event loop), at 100,000 to stay past a 1 s
# deadline on any machine
HEADINGS = (
    '<html lang="en"><body><main>'
    + "".join(f"<h2>Heading {i}</h2><p>about {i}</p>" for i in range(100_000))
    + "</main></body></html>"
)


def page_with(*blocks: str) -> str:
    """A short English page about hemp oil with these ld+json blocks."""
    scripts = "".join(f'<script type="application/ld+json">{b}</script>' for b in blocks)
    return f'<html lang="en"><body><main><h1>Hemp oil</h1><p>A guide to hemp oil.</p></main>{scripts}</body></html>'


def hostile_site(pages: dict[str, str]) -> AbstractContextManager[str]:
    """A competitor's site on loopback serving `pages` ({path: html}), for the sandbox's Firecrawl
    to fetch; the context gives its base URL."""

    async def page(request: web.Request) -> web.Response:
        return web.Response(text=pages[request.path], content_type="text/html")

    app = web.Application()
    for path in pages:
        app.router.add_get(path, page)
    return serve_app(app)
