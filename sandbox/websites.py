"""Web pages the sandbox serves: store websites that inject Dutchie's embedded menu with
JavaScript, Dutchie menu pages, product images (real PNGs made with Pillow) and competitor pages
for the Firecrawl side (normal, JS-written, challenge, 404, empty, slow, rate-limited).

A store website behaves like one behind Cloudflare: it answers a headless or incoherent browser
(a "HeadlessChrome" User-Agent, a Chrome one without client hints or whose `sec-ch-ua` names
another version) with the block page, and takes the transport faults (block403, challenge503) of
rules whose operation is "website" or "*", per proxy as for the API. What each visit looked like
(the proxy it came through, its User-Agent and client hints) is kept in VISITS, and counted per
proxy in the requests counter (`website via:NAME`).
"""

from __future__ import annotations

import asyncio
import io
import re
import struct
import zlib
from collections import deque
from dataclasses import dataclass
from functools import lru_cache

from aiohttp import web
from PIL import Image, ImageDraw

from sandbox.catalog import Catalog, h
from sandbox.dutchie_api import BLOCK_PAGE, CHALLENGE_PAGE, DUTCHIE, _incoherent_identity

WEBSITE_OPERATION = "website"  # the fault rules' `operation` for store website pages
WEBSITE_FAULTS = ("block403", "challenge503")
IMAGE_OPERATION = "image"  # the fault rules' `operation` for images: `slow` holds an image's answer
VISIT_HEADERS = ("user-agent", "sec-ch-ua", "sec-ch-ua-mobile", "sec-ch-ua-platform", "accept-language")
VISITS = web.AppKey("website_visits", deque)
_UA_MAJOR = re.compile(r"Chrome/(\d+)\.")
_BRAND_VERSIONS = re.compile(r'"(?:Chromium|Google Chrome|Microsoft Edge)";v="(\d+)"')


@lru_cache(maxsize=4096)
def product_png(key: str, size: int = 320) -> bytes:
    color = tuple(40 + h(key, c) % 180 for c in "rgb")
    img = Image.new("RGB", (size, size), color)
    draw = ImageDraw.Draw(img)
    inset = size // 5
    draw.ellipse([inset, inset, size - inset, size - inset], fill=tuple(255 - c for c in color))
    buf = io.BytesIO()
    img.save(buf, "PNG")
    return buf.getvalue()


def _bomb_png(side: int = 100_000) -> bytes:
    """A PNG header claiming side × side pixels (10 G): Pillow reads the size before any pixel."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", side, side, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\0" * 64)) + chunk(b"IEND", b"")
    )


# Broken images for the image pipeline's tests: /images/<kind>/broken-<fault>-<anything>.png
IMAGE_FAULTS = {
    "404": lambda key: web.Response(status=404, text="Not Found"),
    "html": lambda key: web.Response(
        text="<!DOCTYPE html><html><body>Access denied</body></html>", content_type="text/html"
    ),
    "truncated": lambda key: web.Response(body=product_png(key)[:300], content_type="image/png"),
    "empty": lambda key: web.Response(body=b"", content_type="image/png"),
    "bomb": lambda key: web.Response(body=_bomb_png(), content_type="image/png"),
}


async def product_image(request: web.Request) -> web.Response:
    key = request.match_info["key"]
    request.app[DUTCHIE].requests[f"image:{request.match_info['kind']}/{key}"] += 1
    request.app[DUTCHIE].requests[f"image via:{request.headers.get('x-sandbox-proxy') or '-'}"] += 1
    if key.startswith("broken-") and (fault := IMAGE_FAULTS.get(key.split("-")[1])):
        return fault(key)
    for rule in request.app[DUTCHIE].faults.fire(("slow",), IMAGE_OPERATION, (), None):
        await asyncio.sleep(rule.delay)
    return web.Response(body=product_png(key), content_type="image/png")


def _page(title: str, body: str, lang: str = "en") -> str:
    return (
        f'<!DOCTYPE html><html lang="{lang}"><head><meta charset="utf-8"><title>{title}</title>'
        f"</head><body>{body}</body></html>"
    )


def _not_a_real_browser(request: web.Request) -> bool:
    """What Cloudflare's bot check sees first: a headless Chrome, or hints that contradict the
    User-Agent (the API's check, plus the version: `sec-ch-ua` names the User-Agent's major)."""
    ua = request.headers.get("user-agent", "")
    if "HeadlessChrome" in ua or _incoherent_identity(request):
        return True
    major = _UA_MAJOR.search(ua)
    brands = _BRAND_VERSIONS.findall(request.headers.get("sec-ch-ua", ""))
    return bool(major and brands and any(v != major.group(1) for v in brands))


def _visit(request: web.Request, store_keys: tuple[str, ...]) -> web.Response | None:
    """Record the visit; the block or challenge page when the site refuses it."""
    state = request.app[DUTCHIE]
    via = request.headers.get("x-sandbox-proxy", "")
    state.requests[f"website via:{via or '-'}"] += 1
    request.app[VISITS].append({"path": request.path, "via": via, **{k: request.headers.get(k) for k in VISIT_HEADERS}})
    if _not_a_real_browser(request):
        state.requests["website incoherent_identity"] += 1
        return web.Response(text=BLOCK_PAGE, status=403, content_type="text/html")
    for rule in state.faults.fire(WEBSITE_FAULTS, WEBSITE_OPERATION, store_keys, None, via):
        if rule.kind == "block403":
            return web.Response(text=BLOCK_PAGE, status=403, content_type="text/html")
        return web.Response(
            text=CHALLENGE_PAGE, status=503, content_type="text/html", headers={"cf-mitigated": "challenge"}
        )
    return None


async def store_website(request: web.Request) -> web.Response:
    catalog: Catalog = request.app[DUTCHIE].catalog
    store = catalog.find(request.match_info["cname"])
    if store is None:
        return web.Response(text=_page("Not found", "<h1>No such store</h1>"), status=404, content_type="text/html")
    refused = _visit(request, (store.id, store.cname))
    if refused is not None:
        return refused
    base = f"{request.scheme}://{request.host}"
    # The embed URL only exists in the rendered DOM (assembled by the script), as on real sites
    # whose tag manager injects it: reading the raw HTML finds nothing.
    reverse = "'.split('').reverse().join('')"
    if store.menu_style == "website-iframe":
        inject = (
            f"var f=document.createElement('iframe');f.src='{base}/embedded'+'-menu/'+'{store.cname[::-1]}"
            f"{reverse};f.id='dutchie--embed__iframe';document.getElementById('menu').appendChild(f);"
        )
    else:
        inject = (
            f"var s=document.createElement('script');s.src='{base}/api/v2/embedded'+'-menu/'+'{store.id[::-1]}"
            f"{reverse}+'.js';s.id='dutchie--embed__script';document.head.appendChild(s);"
        )
    body = (
        f"<header><h1>{store.name}</h1></header><main><p>Shop our menu below.</p>"
        f'<div id="menu"></div></main><script>{inject}</script>'
    )
    return web.Response(text=_page(store.name, body), content_type="text/html")


async def embed_script(request: web.Request) -> web.Response:
    return web.Response(text="window.dutchieEmbedLoaded=true;", content_type="application/javascript")


async def menu_page(request: web.Request) -> web.Response:
    catalog: Catalog = request.app[DUTCHIE].catalog
    store = catalog.find(request.match_info["cname"])
    if store is None:
        return web.Response(text=_page("Not found", "<h1>Not found</h1>"), status=404, content_type="text/html")
    return web.Response(
        text=_page(f"{store.name} | Dutchie", f'<div id="__next">{store.name}</div>'), content_type="text/html"
    )


@dataclass(frozen=True)
class Article:
    """An article page's words, in one language (the corpus's sandbox targets)."""

    menu: tuple[str, ...]
    cookies: str
    h1: str
    sections: tuple[tuple[str, str], ...]  # (h2, paragraph)
    alt: str
    footer: str


ARTICLES = {
    "fr": Article(
        menu=("Accueil", "Boutique", "Blog", "Contact"),
        cookies="Ce site utilise des cookies pour mesurer son audience. Accepter ou refuser les cookies.",
        h1="Huile de CBD : le guide complet",
        sections=(
            (
                "Qu'est-ce que l'huile de CBD ?",
                "L'huile de CBD est extraite du chanvre. Elle contient du cannabidiol, une molécule naturelle "
                "qui ne provoque pas d'effet psychotrope. L'huile de CBD se prend sous la langue, goutte à goutte.",
            ),
            (
                "Les bienfaits de l'huile de CBD",
                "Beaucoup de consommateurs utilisent l'huile de CBD pour le sommeil et contre le stress. "
                "Les études sur le chanvre et le cannabidiol restent encore limitées, mais prometteuses.",
            ),
            (
                "Quel dosage choisir ?",
                "Commencez par un dosage faible d'huile de CBD, puis augmentez progressivement selon vos besoins. "
                "Une huile de CBD à 10 % convient à la plupart des débutants.",
            ),
        ),
        alt="Flacon d'huile de CBD",
        footer="Mentions légales · Plan du site · © 2026 Chanvre & Co",
    ),
    "en": Article(
        menu=("Home", "Shop", "Blog", "Contact"),
        cookies="We use cookies to measure our audience. Accept or reject cookies.",
        h1="CBD oil: the complete guide",
        sections=(
            (
                "What is CBD oil?",
                "CBD oil is extracted from hemp. It contains cannabidiol, a natural molecule that does not "
                "make you high. CBD oil is taken under the tongue, drop by drop.",
            ),
            (
                "The benefits of CBD oil",
                "Many people take CBD oil for sleep and against stress. Research on hemp and cannabidiol is "
                "still limited, but promising.",
            ),
            (
                "Which dosage to choose?",
                "Start with a low dosage of CBD oil, then raise it slowly as you need. A 10 % CBD oil suits "
                "most beginners.",
            ),
        ),
        alt="A bottle of CBD oil",
        footer="Legal notice · Sitemap · © 2026 Hemp & Co",
    ),
}


def _article(lang: str) -> str:
    a = ARTICLES[lang]
    menu = "".join(f'<li><a href="/{m.lower()}">{m}</a></li>' for m in a.menu)
    sections = "".join(f"<h2>{h}</h2><p>{t}</p>" for h, t in a.sections)
    json_ld = (
        '{"@context":"https://schema.org","@graph":[{"@type":"Article","headline":"' + a.h1 + '",'
        '"inLanguage":"' + lang + '","author":{"@type":"Organization","name":"Hemp & Co"}},'
        '{"@type":"BreadcrumbList","itemListElement":[{"@type":"ListItem","position":1,"name":"Blog"}]}]}'
    )
    return (
        f'<header><nav><ul>{menu}</ul></nav></header><div id="cookie-banner" class="cookie-consent">'
        f"<p>{a.cookies}</p><button>OK</button></div>"
        f'<main><article><h1>{a.h1}</h1><img src="/img/bottle.jpg" alt="{a.alt}">{sections}'
        f'<p>Source : <a href="https://example.org/study">{a.sections[1][0]}</a></p></article></main>'
        f'<script type="application/ld+json">{json_ld}</script>'
        f"<footer><p>{a.footer}</p></footer>"
    )


# --- competitor pages (targets for the Firecrawl sandbox) -------------------------------------
COMPETITOR_PAGES: dict[str, tuple[int, str]] = {
    "page-a.html": (
        200,
        _page(
            "Competitor A - Best Widgets 2025",
            '<header><nav><a href="/">Home</a></nav></header><main><h1>Best Widgets 2025</h1>'
            "<p>Widgets are great. This is page A with enough text to count as content.</p>"
            "<h2>Pricing</h2><p>From $10.</p></main><footer>Footer A</footer>",
        ),
    ),
    "page-b.html": (
        200,
        _page(
            "Competitor B - Widget Guide",
            "<main><h1>Widget Guide</h1><p>Page B explains widgets in depth.</p>"
            "<script>document.body.insertAdjacentHTML('beforeend','<p id=\"js\">rendered-by-js</p>');</script></main>",
        ),
    ),
    "js-only.html": (
        200,
        _page(
            "Loading...",
            "<div id=\"root\"></div><script>document.body.insertAdjacentHTML('beforeend',"
            "'<main><h1>Dispensary Deals Near You</h1>"
            "<p>Every special, updated hourly, rendered by JavaScript.</p></main>');"
            "</script>",
        ),
    ),
    "blocked.html": (
        403,
        _page(
            "Just a moment...",
            '<div id="challenge-running">Checking if the site connection is secure</div>'
            "<div>cf-browser-verification</div><div>Ray ID: 0000000000000000</div>",
            "en-US",
        ),
    ),
    "incapsula.html": (
        200,
        _page(
            "",
            '<iframe id="main-iframe" src="/_Incapsula_Resource?SWUDNSAI=31">'
            "Request unsuccessful. Incapsula incident ID: 0-123</iframe>",
        ),
    ),
    # article pages with a site frame (menu, cookie banner, footer), images and JSON-LD: the
    # semantic corpus's targets (docs/onpage.md, "Corpus")
    "fr-guide.html": (200, _page("Huile de CBD : le guide complet", _article("fr"), "fr-FR")),
    "en-guide.html": (200, _page("CBD oil: the complete guide", _article("en"))),
    "ratelimited.html": (429, "<html><head></head><body><h1>Too Many Requests</h1></body></html>"),
    "missing.html": (404, _page("404 Not Found", "<h1>Not Found</h1>")),
    "error.html": (500, _page("500", "<h1>Internal Server Error</h1>")),
    "empty.html": (200, ""),
    "no-text.html": (200, _page("", "<div></div>")),
}


async def competitor_page(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    if name == "slow.html":
        await asyncio.sleep(request.app[DUTCHIE].competitor_slow_seconds)
        return web.Response(
            text=_page("Slow page", "<main><h1>Slow</h1><p>Finally here.</p></main>"), content_type="text/html"
        )
    status, body = COMPETITOR_PAGES.get(name, (404, _page("404 Not Found", "<h1>Not Found</h1>")))
    return web.Response(text=body, status=status, content_type="text/html")


def add_routes(app: web.Application) -> None:
    app[VISITS] = deque(maxlen=500)
    app.router.add_get("/images/{kind}/{key}.png", product_image)
    app.router.add_get("/sites/{cname}/", store_website)
    app.router.add_get("/api/v2/embedded-menu/{id}.js", embed_script)
    for prefix in ("embedded-menu", "dispensary", "stores"):
        app.router.add_get(f"/{prefix}/{{cname}}", menu_page)
    app.router.add_get("/competitors/{name}", competitor_page)
