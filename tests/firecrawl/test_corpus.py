"""A page's corpus: the main text without the site's frame, on pages Firecrawl rendered (the
captured documents and the sandbox's article pages), the language and its terms, JSON-LD
objects, and the bounds (a 20 MB page is cut, not a crash)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from cannaspider.firecrawl import classify, corpus, language, onpage, terms
from cannaspider.firecrawl.batch import PageOutcome
from sandbox.websites import COMPETITOR_PAGES
from tests.firecrawl.conftest import fixture, onpage_config

CONFIG = onpage_config(None)


def corpus_of(html: str, url: str = "https://example.com/page", **kwargs):
    sel = onpage.selector(html)
    return corpus.extract(sel, url, onpage.parse(html, url, sel), **{"limits": CONFIG.corpus, **kwargs})


def rendered(capture: str, url_end: str) -> dict:
    return next(d for d in fixture(capture)["data"] if d["metadata"]["sourceURL"].endswith(url_end))


def test_captured_firecrawl_page_gives_its_text_without_navigation_or_footer():
    doc = rendered("03_get_completed.json", "page-a.html")
    c = corpus_of(doc["rawHtml"], doc["metadata"]["sourceURL"])
    assert c.text.splitlines() == [
        "Best Widgets 2025",
        "Widgets are great. This is page A with enough text to count as content.",
        "Pricing",
        "From $10.",
    ]
    assert "Home" not in c.text and "Footer A" not in c.text  # <nav> and <footer>
    assert c.lang == "en" and c.title == "Competitor A - Best Widgets 2025"
    assert [(h.level, h.text) for h in c.headings] == [(1, "Best Widgets 2025"), (2, "Pricing")]
    assert [(a.text, a.href) for a in c.anchors] == [("Home", "http://127.0.0.1:8765/")]
    assert c.words == len(terms.tokens(c.text)) and not c.truncated


def test_captured_page_rendered_by_javascript_keeps_the_rendered_text():
    doc = rendered("03_get_completed.json", "page-b.html")
    c = corpus_of(doc["rawHtml"], doc["metadata"]["sourceURL"])
    assert "Page B explains widgets in depth." in c.text.splitlines()
    assert "rendered-by-js" in c.text  # inserted by the page's script: only a rendering browser has it


def test_sandbox_article_drops_menu_cookie_banner_and_footer():
    c = corpus_of(COMPETITOR_PAGES["en-guide.html"][1])
    assert c.text.startswith("CBD oil: the complete guide\nWhat is CBD oil?\nCBD oil is extracted from hemp.")
    for frame in ("Shop", "Contact", "cookies", "Legal notice", "Sitemap"):
        assert frame not in c.text
    assert c.alt_texts == ["A bottle of CBD oil"]
    assert [a.text for a in c.anchors] == ["Home", "Shop", "Blog", "Contact", "The benefits of CBD oil"]
    assert [a.href for a in c.anchors][-1] == "https://example.org/study"


def test_french_and_english_pages_give_their_languages_terms():
    fr = corpus_of(COMPETITOR_PAGES["fr-guide.html"][1])
    en = corpus_of(COMPETITOR_PAGES["en-guide.html"][1])
    assert (fr.lang, en.lang) == ("fr", "en")  # <html lang="fr-FR">, <html lang="en">
    fr_terms, _ = terms.count_terms(fr.text, terms.stop_words_for(fr.lang))
    en_terms, _ = terms.count_terms(en.text, terms.stop_words_for(en.lang))
    assert {"huile", "chanvre", "cannabidiol", "huile de cbd", "sommeil"} <= set(fr_terms)
    # the h1, two h2s, five sentences of the paragraphs and the source link's text (l'huile → l, huile)
    assert fr_terms["huile de cbd"] == 9
    assert not {"de", "le", "la", "les", "des", "une", "qu"} & set(fr_terms)  # French stop words
    assert {"cbd oil", "hemp", "cannabidiol", "dosage", "sleep"} <= set(en_terms)
    assert not {"the", "is", "of", "and", "it"} & set(en_terms)  # English stop words
    assert "cbd oil" not in fr_terms and "huile" not in en_terms


def test_language_from_firecrawl_then_from_the_text_when_the_html_says_nothing():
    french = "<html><body><main><p>Le chanvre est une plante cultivée depuis des siècles pour ses fibres.</p></main>"
    assert corpus_of(french, firecrawl_language="fr-CA").lang == "fr"
    assert corpus_of(french).lang == "fr"  # detected (language.py)
    assert corpus_of("<html><body><main><p>Zyx qwv 1234 plm.</p></main>").lang is None
    # the HTML's word first, even when the text is in another language (the page says it)
    assert corpus_of(french.replace("<html>", '<html lang="de">')).lang == "de"


def test_detected_languages_of_short_texts_and_none_when_it_cannot_tell():
    english = "<html><head><title>CBD oil for sleep</title></head><body><main><p>{}</p></main>"
    assert corpus_of(english.format("Many people take it in the evening, a few drops under the tongue.")).lang == "en"
    polish = "Olejek CBD jest ekstrahowany z konopi i nie powoduje efektu odurzenia."
    assert corpus_of(english.replace("CBD oil for sleep", "Olejek CBD").format(polish)).lang == "pl"
    assert language.detect("CBD 10 %") is None  # too short to carry its language
    assert language.detect("") is None


def test_json_ld_objects_round_trip():
    product = {
        "@context": "https://schema.org",
        "@type": "Product",
        "name": "Huile 10 % — « bio »",
        "offers": {"@type": "Offer", "price": 29.9, "priceCurrency": "EUR", "inStock": True},
        "review": [{"@type": "Review", "reviewRating": {"ratingValue": 5}}, None],
    }
    graph = {"@context": "https://schema.org", "@graph": [{"@type": "Organization", "name": "Chanvre & Co"}]}
    html = (
        "<html><body><main><p>Une huile de chanvre.</p></main>"
        f'<script type="application/ld+json">{json.dumps(product, ensure_ascii=False)}</script>'
        '<script type="application/ld+json">{not json</script>'
        f'<script type="application/ld+json"><!--{json.dumps(graph)}--></script></body></html>'
    )
    c = corpus_of(html)
    assert c.json_ld == [product, graph]
    assert c.json_ld_invalid == 1
    assert json.loads(json.dumps(c.to_json()["jsonLd"])) == [product, graph]


def test_nul_characters_and_nan_are_made_storable():
    html = (
        '<html lang="en"><body><main><p>Hemp\x00 oil</p></main>'
        '<script type="application/ld+json">{"name": "a\\u0000b", "rating": NaN}</script></body></html>'
    )
    c = corpus_of(html)
    assert "\x00" not in c.text and c.json_ld == [{"name": "ab", "rating": None}]


def test_limits_cut_text_and_lists_and_say_so():
    paragraphs = "".join(f"<p>Paragraph {i} about hemp oil and its many uses in daily life.</p>" for i in range(300))
    images = "".join(f'<img src="/{i}.png" alt="image {i}">' for i in range(50))
    html = f'<html lang="en"><body><main><h1>Hemp</h1>{paragraphs}{images}</main></body></html>'
    limits = replace(CONFIG.corpus, max_text_chars=1000, max_items=10, max_item_chars=5)
    c = corpus_of(html, limits=limits)
    assert c.truncated and 900 <= len(c.text) <= 1000 and not c.text.endswith(" ")
    assert c.alt_texts == ["image"] * 10  # 50 distinct alts, 10 kept, each cut at 5 characters
    assert not corpus_of(html).truncated


def test_a_20_mb_page_is_cut_and_classified_not_a_crash():
    filler = "<p>" + "hemp oil and cannabidiol " * 40 + "</p>"
    html = '<html lang="en"><head><title>Huge</title></head><body><main><h1>Huge page</h1>'
    html += filler * (20_000_000 // len(filler) + 1) + "</main></body></html>"
    assert len(html) >= 20_000_000
    doc = {"rawHtml": html, "metadata": {"statusCode": 200, "sourceURL": "https://huge.example/"}}
    limits = replace(CONFIG.corpus, max_html_chars=2_000_000)
    verdict = classify.classify(
        PageOutcome("https://huge.example/", doc=doc), min_words=CONFIG.min_words, limits=limits
    )
    assert verdict.status == "ok" and verdict.corpus is not None
    assert verdict.corpus.truncated and verdict.corpus.html_chars == len(html)
    assert 0 < len(verdict.corpus.text) <= limits.max_text_chars
    assert verdict.corpus.text.startswith("Huge page\nhemp oil and cannabidiol")


def test_only_ok_pages_get_a_corpus():
    blocked = {"rawHtml": COMPETITOR_PAGES["blocked.html"][1], "metadata": {"statusCode": 403}}
    empty = {"rawHtml": COMPETITOR_PAGES["no-text.html"][1], "metadata": {"statusCode": 200}}
    config = {"min_words": CONFIG.min_words, "limits": CONFIG.corpus}
    assert classify.classify(PageOutcome("https://a.example/", doc=blocked), **config).corpus is None
    assert classify.classify(PageOutcome("https://b.example/", doc=empty), **config).corpus is None


OFFLINE = """
import socket
def no_network(*args, **kwargs):
    raise AssertionError("network used")
socket.socket.connect = socket.socket.connect_ex = socket.create_connection = socket.getaddrinfo = no_network
from cannaspider.firecrawl import corpus, onpage, profile, terms  # trafilatura, stop-words imported here
from cannaspider.firecrawl.job import OnpageConfig
from cannaspider.project_settings import project_settings
from sandbox.websites import COMPETITOR_PAGES
cfg = OnpageConfig.from_settings(project_settings())
html = COMPETITOR_PAGES["fr-guide.html"][1]
sel = onpage.selector(html)
c = corpus.extract(sel, "https://fr.example/", onpage.parse(html, "https://fr.example/", sel), limits=cfg.corpus)
page = profile.ProfilePage(c.url, c.lang, c.title, c.text, [h.text for h in c.headings])
bounds = {"min_pages": cfg.profile_min_pages, "max_terms": cfg.profile_max_terms}
p = profile.compute("fr-FR", [{"url": c.url, "crawlStatus": "ok"}], {c.url: page}, **bounds)
assert c.lang == "fr" and "chanvre" in {t["term"] for t in p["terms"]}, p
assert terms.stop_words_for("en") and terms.stop_words_for("fr")
from cannaspider.firecrawl import language  # py3langid's model, simplemma's dictionaries: in their wheels
assert language.detect("Many people take it in the evening, a few drops under the tongue.") == "en"
assert terms.lemmatizer_for("fr")("huiles") == "huile" and terms.lemmatizer_for("de")("Blüten") == "blüte"
print("offline ok")
"""


@pytest.mark.integration
def test_extraction_and_profile_need_no_network(tmp_path):
    """trafilatura, the stop-word lists, the lemmas and the language model run on what their
    packages ship: with every socket refused (from before their import), a page still gives its
    corpus and profile."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    result = subprocess.run(
        [sys.executable, "-c", OFFLINE], cwd=root, capture_output=True, text=True, timeout=120, env={"PATH": "/usr/bin"}
    )
    assert result.returncode == 0 and "offline ok" in result.stdout, result.stderr[-2000:]


def test_limits_come_from_the_settings_and_refuse_zero():
    import pytest
    from scrapy.settings import Settings

    from cannaspider.firecrawl.job import OnpageConfig

    settings = Settings()
    settings.setmodule("cannaspider.settings")
    config = OnpageConfig.from_settings(settings)
    assert config.corpus == corpus.CorpusLimits(5_000_000, 200_000, 500, 500)
    assert (config.profile_min_pages, config.profile_max_terms) == (2, 200)
    settings.set("ONPAGE_CORPUS_MAX_CHARS", 0)
    with pytest.raises(ValueError, match="ONPAGE_CORPUS_MAX_CHARS must be a positive integer, got 0"):
        OnpageConfig.from_settings(settings)
    settings.set("ONPAGE_CORPUS_MAX_CHARS", 1000)
    settings.set("PROFILE_MAX_TERMS", "many")
    with pytest.raises(ValueError, match="PROFILE_MAX_TERMS must be a positive integer, got 'many'"):
        OnpageConfig.from_settings(settings)
