"""The on-page parser, field by field, on pages rendered by Firecrawl (the captured JavaScript-
rendered documents and the sandbox's JS-only page) and on a page that has every field.

Hostile JSON-LD (issue 28, point 10): blocks nested a thousand levels deep, nested `@graph`s,
`\\ud800` and `\\u0000` escapes, non-finite numbers. The page is read without the blocks it cannot
hold, says so, and everything it keeps is storable; it used to raise RecursionError or
UnicodeEncodeError and fail every page of its keyword.
"""

from __future__ import annotations

import json
import time

import pytest

from cannaspider.firecrawl import classify, onpage
from cannaspider.firecrawl.batch import PageOutcome
from cannaspider.firecrawl.items import Heading, Hreflang, OnpageFields
from cannaspider.firecrawl.onpage import parse
from tests.firecrawl.conftest import fixture, onpage_config
from tests.firecrawl.hostile import DEEP_ARRAY, DEEP_GRAPH, NUL_AND_INFINITY, SURROGATES, page_with
from tests.httpclient import http


def doc(capture: str, url_end: str) -> dict:
    return next(d for d in fixture(capture)["data"] if d["metadata"]["sourceURL"].endswith(url_end))


def test_captured_js_rendered_page_b():
    d = doc("03_get_completed.json", "page-b.html")
    assert parse(d["rawHtml"], d["metadata"]["sourceURL"]) == OnpageFields(
        title="Competitor B - Widget Guide",
        meta_description=None,
        canonical="http://127.0.0.1:8765/page-b.html",
        robots=None,
        lang="en",
        hreflang=[],
        open_graph={},
        headings=[Heading(1, "Widget Guide")],
        word_count=8,  # "Widget Guide" + "Page B explains widgets in depth." in <main>
        json_ld_types=[],
        json_ld_invalid=0,
        image_count=0,
        images_with_alt=0,
        alt_coverage=None,
        internal_links=0,
        external_links=0,
    )


def test_captured_page_a():
    d = doc("03_get_completed.json", "page-a.html")
    fields = parse(d["rawHtml"], d["metadata"]["sourceURL"])
    assert fields.title == "Competitor A - Best Widgets 2025" == d["metadata"]["title"]
    assert fields.meta_description == "Competitor A sells widgets." == d["metadata"]["description"]
    assert fields.lang == "en" == d["metadata"]["language"]
    assert fields.canonical is None and fields.robots is None
    assert fields.headings == [Heading(1, "Best Widgets 2025"), Heading(2, "Pricing")]
    # <main>: "Best Widgets 2025" (3) + 14 words + "Pricing" (1) + "From $10." (2); nav and footer excluded
    assert fields.word_count == 20
    assert (fields.internal_links, fields.external_links) == (1, 0)  # <a href="/">Home</a>


@pytest.mark.integration
def test_sandbox_js_only_page_once_rendered(firecrawl):
    reply = http(
        "POST",
        firecrawl.url + "/v2/batch/scrape",
        {"urls": [firecrawl.page("js-only.html")], "formats": ["rawHtml"], "proxy": "basic"},
    ).json()
    for _ in range(100):
        status = http("GET", f"{firecrawl.url}/v2/batch/scrape/{reply['id']}").json()
        if status["status"] == "completed":
            break
        time.sleep(0.05)
    html = status["data"][0]["rawHtml"]
    fields = parse(html, firecrawl.page("js-only.html"))
    assert fields.title == "Loading..."
    assert fields.headings == [Heading(1, "Dispensary Deals Near You")]
    assert fields.word_count == 11  # the <main> the script wrote (the script's own text is not text)
    # the raw page, before rendering, has no usable text: only the renderer makes it `ok`
    assert parse(html.split("<main>")[0] + "</body></html>", firecrawl.page("js-only.html")).word_count == 0


RICH = """<!DOCTYPE html><html lang="fr-FR"><head>
<title> Huile de CBD :   le guide </title>
<meta name="Description" content="Tout sur l'huile de CBD.">
<meta name="robots" content="index, follow">
<link rel="Canonical" href="/guide-cbd">
<link rel="alternate" hreflang="en-us" href="https://shop.example/en/cbd-guide">
<link rel="alternate" hreflang="x-default" href="/guide-cbd">
<meta property="og:title" content="Le guide du CBD"><meta property="og:type" content="article">
<meta property="og:title" content="second one ignored">
<script type="application/ld+json">{"@context":"https://schema.org","@graph":[
  {"@type":"Article","headline":"x"},{"@type":["BreadcrumbList","Thing"]}]}</script>
<script type="application/ld+json"><!-- {"@type":"Organization"} --></script>
<script type="application/ld+json">{not json</script>
</head><body>
<header><nav><a href="/">Accueil</a><a href="https://www.shop.example/boutique">Boutique</a></nav></header>
<article><h1>Huile de <em>CBD</em></h1><p>Un texte de cinq mots.</p>
<h3>Détails</h3><script>var hidden = "pas du texte";</script><style>p{}</style>
<img src="a.png" alt="flacon"><img src="b.png" alt=" "><img src="c.png">
<a href="https://other.example/x">source</a><a href="#top">haut</a><a href="mailto:a@b.c">mail</a>
<a href="javascript:void(0)">js</a><a href="page2">suite</a></article>
<footer>Pied de page avec des mots</footer></body></html>"""


def test_every_field_of_a_rich_page():
    assert parse(RICH, "https://www.shop.example/fr/guide") == OnpageFields(
        title="Huile de CBD : le guide",
        meta_description="Tout sur l'huile de CBD.",
        canonical="https://www.shop.example/guide-cbd",
        robots="index, follow",
        lang="fr-FR",
        hreflang=[
            Hreflang("en-us", "https://shop.example/en/cbd-guide"),
            Hreflang("x-default", "https://www.shop.example/guide-cbd"),
        ],
        open_graph={"og:title": "Le guide du CBD", "og:type": "article"},
        headings=[Heading(1, "Huile de CBD"), Heading(3, "Détails")],
        word_count=14,  # the <article>: "Huile de CBD" (3) + 5 + "Détails" + 5 link texts; not script/style
        json_ld_types=["Article", "BreadcrumbList", "Thing", "Organization"],
        json_ld_invalid=1,
        image_count=3,
        images_with_alt=1,
        alt_coverage=0.3333,
        internal_links=3,  # "/", www.shop.example (www. aside) and "page2"; #top, mailto, javascript skipped
        external_links=1,
    )


def test_no_main_falls_back_to_the_body_without_its_frame():
    html = "<html><body><nav>a b c</nav><div>one two three</div><footer>x y</footer></body></html>"
    assert parse(html, "https://x.example/").word_count == 3
    assert parse("", "https://x.example/") == OnpageFields()
    assert parse("<html><body><main></main><div>only here</div></body></html>", "https://x.example/").word_count == 2


CONFIG = onpage_config(None)


def verdict_of(html: str) -> classify.Verdict:
    doc = {"rawHtml": html, "metadata": {"statusCode": 200}}
    return classify.classify(PageOutcome("https://h.example/", doc=doc), min_words=1, limits=CONFIG.corpus)


def test_hostile_blocks_are_left_out_or_made_storable_and_the_page_is_ok():
    v = verdict_of(page_with(DEEP_ARRAY, SURROGATES, DEEP_GRAPH, NUL_AND_INFINITY))
    assert (v.status, v.error) == ("ok", None)
    assert v.warning == "2 JSON-LD block(s) left out: nested deeper than 64 levels"
    assert v.onpage.json_ld_types == ["Product", "Article"] and v.onpage.json_ld_invalid == 2
    assert v.corpus.json_ld == [
        {"@type": "Product", "name": "Hemp \ufffd oil", "\ufffd": "key"},
        {"@type": "Article", "rating": None, "low": None},
    ]
    assert v.corpus.json_ld_invalid == 2 and v.corpus.text.startswith("Hemp oil")
    # what the merge and the corpus row send to PostgreSQL: UTF-8, no NUL, no NaN
    for value in (v.onpage.to_json(), v.corpus.to_json()):
        text = json.dumps(value, ensure_ascii=False, allow_nan=False)
        text.encode("utf-8")
        assert "\x00" not in text and "\\u0000" not in text


def test_depth_bound_keeps_real_nesting():
    at_bound = "[" * onpage.MAX_DEPTH + "]" * onpage.MAX_DEPTH
    past_bound = "[" * (onpage.MAX_DEPTH + 1) + "]" * (onpage.MAX_DEPTH + 1)
    graph = '{"@graph": [' * 30 + '{"@type": "Offer"}' + "]}" * 30  # 60 levels: a @graph in a @graph…
    v = verdict_of(page_with(at_bound, past_bound, graph))
    assert v.onpage.json_ld_types == ["Offer"] and v.onpage.json_ld_invalid == 1
    assert v.warning == "1 JSON-LD block(s) left out: nested deeper than 64 levels"
    assert len(v.corpus.json_ld) == 2


def test_a_page_without_hostile_json_ld_has_no_warning():
    v = verdict_of(page_with('{"@type": "Article"}', "{not json"))
    assert v.warning is None and v.onpage.json_ld_invalid == 1 and v.onpage.json_ld_types == ["Article"]
