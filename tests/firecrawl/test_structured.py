"""Structured data beyond JSON-LD (microdata, RDFa, Open Graph, Dublin Core) through extruct, the
schema.org types of a page and of a SERP, and the bounds that keep a hostile page's markup from
costing the page its reading."""

from __future__ import annotations

import asyncio

from cannaspider.firecrawl import classify, onpage, structured
from cannaspider.firecrawl.batch import PageOutcome
from cannaspider.firecrawl.profile import ProfilePage, compute
from tests.firecrawl.conftest import onpage_config

PRODUCT = """<html lang="en"><head><title>CBD Oil 10%</title>
<meta property="og:title" content="CBD Oil"><meta property="og:type" content="product">
<meta name="DC.title" content="CBD Oil 10%"><meta name="dcterms.creator" content="Hemp Co"></head><body>
<main><div itemscope itemtype="https://schema.org/Product"><h1 itemprop="name">CBD Oil 10%</h1>
 <p>A full spectrum hemp oil, ten per cent cannabidiol.</p>
 <div itemprop="offers" itemscope itemtype="https://schema.org/Offer"><span itemprop="price">39.90</span>
  <meta itemprop="priceCurrency" content="EUR"></div>
 <div itemprop="aggregateRating" itemscope itemtype="http://schema.org/AggregateRating">
  <span itemprop="ratingValue">4.6</span></div></div>
<div vocab="https://schema.org/" typeof="FAQPage"><div property="mainEntity" typeof="Question">
 <span property="name">Is it legal?</span>
 <div property="acceptedAnswer" typeof="Answer"><span property="text">Yes, under 0.3 % THC.</span></div></div></div>
</main><script type="application/ld+json">{"@context": "https://schema.org", "@type": "Organization",
 "name": "Hemp Co", "review": {"@type": "Review", "author": {"@type": "Person"}}}</script></body></html>"""


def read(html: str) -> classify.Verdict:
    config = onpage_config(None)
    doc = {"rawHtml": html, "metadata": {"statusCode": 200}}
    return classify.classify(PageOutcome("https://shop.example/oil", doc=doc), min_words=1, limits=config.corpus)


def test_every_syntax_is_read_and_its_schema_org_types_listed():
    v = read(PRODUCT)
    assert v.status == "ok" and v.warning is None
    assert v.onpage.schema_types == [
        "Organization", "Review", "Person",  # JSON-LD, nested ones too
        "Product", "Offer", "AggregateRating",  # microdata (http and https IRIs)
        "FAQPage", "Question", "Answer",  # RDFa
    ]  # fmt: skip
    assert v.onpage.structured_data == {"jsonLd": 1, "microdata": 1, "rdfa": 4, "openGraph": 1, "dublinCore": 1}
    on = v.onpage.to_json()
    assert on["schemaTypes"] == v.onpage.schema_types and on["structuredData"]["microdata"] == 1
    sel = onpage.selector(PRODUCT)
    data = structured.read(sel, PRODUCT, "https://shop.example/oil")
    product = data.microdata[0]["properties"]
    assert product["name"] == "CBD Oil 10%" and product["offers"]["properties"]["price"] == "39.90"
    assert data.opengraph[0]["properties"] == [("og:title", "CBD Oil"), ("og:type", "product")]
    assert {e["name"]: e["content"] for e in data.dublincore[0]["elements"]} == {
        "DC.title": "CBD Oil 10%",
        "dcterms.creator": "Hemp Co",
    }


def test_a_page_without_markup_runs_no_extractor_and_says_nothing():
    v = read('<html lang="en"><body><main><p>Plain hemp text.</p></main></body></html>')
    assert v.onpage.schema_types == [] and set(v.onpage.structured_data.values()) == {0} and v.warning is None


def test_types_of_other_vocabularies_are_not_schema_org_types():
    assert [structured.schema_type(t) for t in ("schema:Offer", "https://www.schema.org/Review", "Product")] == [
        "Offer",
        "Review",
        "Product",
    ]
    assert [structured.schema_type(t) for t in ("og:product", "http://xmlns.com/foaf/0.1/Person", "", 3, "a b")] == [
        None
    ] * 5


def test_hostile_markup_leaves_its_syntax_out_and_the_page_ok():
    text = "<main><p>Hemp oil, a guide.</p></main>"
    # twice the bound is as hostile to the bound as 40,000 (2 s of CPU to build and parse)
    many = "".join(f'<span itemscope itemtype="https://schema.org/Thing">{i}</span>' for i in range(4_000))
    deep = '<div itemscope itemtype="https://schema.org/Thing"><div itemprop="p">' * 1500 + "</div></div>" * 1500
    pages = {
        "many": f'<html lang="en"><body>{text}{many}</body></html>',
        "deep": f'<html lang="en"><body>{text}{deep}</body></html>',
    }
    verdicts = {name: read(html) for name, html in pages.items()}
    assert verdicts["many"].status == "ok"
    assert verdicts["many"].warning == "structured data left out: microdata: 4000 elements, more than 2000"
    assert verdicts["deep"].status == "ok" and verdicts["deep"].onpage.structured_data["microdata"] == 0
    assert verdicts["deep"].warning == "structured data left out: microdata: nested more than 16 levels"


def test_the_profile_counts_the_schema_org_types_its_pages_use():
    pages = {
        u: ProfilePage(u, "en", "CBD oil", "cbd oil", [])
        for u in ("https://a.example/", "https://b.example/", "https://c.example/")
    }
    types = {"https://a.example/": ["Product", "Offer"], "https://b.example/": ["Product", "FAQPage"]}
    competitors = [
        {"url": u, "position": i, "crawlStatus": "ok", "onpage": {"schemaTypes": types.get(u, [])}}
        for i, u in enumerate(pages, 1)
    ] + [{"url": "https://d.example/", "position": 4, "crawlStatus": "blocked", "onpage": {"schemaTypes": ["Offer"]}}]
    p = compute("en-US", competitors, pages, min_pages=2, max_terms=10)
    assert p["schemaTypes"] == [
        {"type": "Product", "pages": 2, "positions": [1, 2]},
        {"type": "FAQPage", "pages": 1, "positions": [2]},
        {"type": "Offer", "pages": 1, "positions": [1]},  # the blocked page's is not read
    ]


def test_structured_data_is_read_in_the_parser_processes_within_their_bounds():
    from tests.firecrawl.test_parser_pool import document, pool_of

    async def scenario():
        pool = pool_of(workers=1)
        try:
            return await pool.read(document(PRODUCT))
        finally:
            pool.close()

    v = asyncio.run(scenario())
    assert v.status == "ok" and "FAQPage" in v.onpage.schema_types and v.onpage.structured_data["rdfa"] == 4
