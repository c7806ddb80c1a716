"""Our page against the SERP (cannaspider/firecrawl/gap.py) on pages written for the test: the
weights by the formula, what is missing, under- and over-used, heading terms with the headings
that carry them, schema.org types, word counts, and a page of ours that cannot be compared."""

from __future__ import annotations

import math

import pytest

from cannaspider.firecrawl import gap, profile
from cannaspider.firecrawl.profile import ProfilePage

A = ProfilePage(
    "https://a.example/",
    "fr",
    "Huile de CBD : guide",
    "L'huile de CBD calme le stress. Posologie de l'huile de CBD. Les effets du chanvre.",
    ["Posologie de l'huile", "Effets du chanvre"],
)
B = ProfilePage(
    "https://b.example/",
    "fr",
    "Huiles de CBD bio",
    "Nos huiles de CBD bio. La posologie conseillée. Le chanvre bio et ses effets.",
    ["Posologie conseillée"],
)
OURS = ProfilePage(
    "https://ours.example/",
    "fr",
    "Boutique huile CBD",
    "Huile de CBD. Huile de CBD. Huile de CBD. Acheter en ligne. Chanvre.",
    ["Acheter"],
)
COMPETITORS = [
    {"url": A.url, "position": 1, "crawlStatus": "ok", "onpage": {"schemaTypes": ["Article", "FAQPage"]}},
    {"url": B.url, "position": 2, "crawlStatus": "ok", "onpage": {"schemaTypes": ["Product", "FAQPage"]}},
]
SETTINGS = gap.GapSettings(min_share=0.5, under_ratio=0.5, max_terms=30, min_pages=2)


def serp_gap(ours: ProfilePage | None, crawl: dict, *, settings: gap.GapSettings = SETTINGS) -> dict:
    computed = profile.compute("fr-FR", COMPETITORS, {A.url: A, B.url: B}, min_pages=2, max_terms=200)
    serp = [gap.SerpPage(A.url, 1, A, 14, [2, 2]), gap.SerpPage(B.url, 2, B, 13, [2])]
    own = gap.OwnPage("https://ours.example/", crawl)
    if ours is not None:
        own.page, own.words, own.levels = ours, 12, [1]
    return gap.compute(computed, serp, own, settings)


OK = {"crawlStatus": "ok", "crawlHttpStatus": 200, "onpage": {"schemaTypes": ["Product"]}}


def test_each_term_has_its_weight_in_the_serp_and_in_ours():
    g = serp_gap(OURS, OK)
    assert g["available"] is True and g["reason"] is None and g["weighed"] == 2
    terms = {t["term"]: t for t in g["terms"]}
    # ours: 3 title tokens + 9 + 3 + 1 = 16 tokens; `cbd` 4 times; both pages use it: idf = ln(3/3) + 1 = 1
    assert terms["cbd"]["ourWeight"] == round(1 * 4 / 16, 6) == 0.25
    assert terms["cbd"]["ratio"] == round(0.25 / terms["cbd"]["serpWeight"], 3)
    assert terms["cbd"]["ourOccurrences"] == 4 and terms["cbd"]["inOurTitle"] is True
    # the lemma is what is compared: `huiles` (B) and `huile` (ours) are one term
    assert terms["huile de cbd"]["lemma"] == "huile de cbd" and terms["huile de cbd"]["used"] is True
    assert {t["term"] for t in g["terms"]} == {
        t["term"]
        for t in profile.compute("fr-FR", COMPETITORS, {A.url: A, B.url: B}, min_pages=2, max_terms=200)["terms"]
    }


def test_what_most_pages_use_and_ours_lacks_heaviest_first():
    g = serp_gap(OURS, OK)
    assert [t["term"] for t in g["missing"]] == ["effets", "posologie"]  # same weight: alphabetical, as the profile
    assert all(t["status"] == "missing" and t["ourWeight"] == 0 and t["ratio"] == 0 for t in g["missing"])
    assert g["summary"] == {"terms": 6, "missing": 2, "underUsed": 0, "overUsed": 0}


def test_under_and_over_use_by_the_ratio_of_the_weights():
    padded = ProfilePage(
        OURS.url, "fr", "Boutique", "Chanvre. " + ". ".join(["Acheter en ligne boutique livraison rapide"] * 10), []
    )
    g = serp_gap(padded, OK)
    under = {t["term"]: t for t in g["underUsed"]}
    assert "chanvre" in under and under["chanvre"]["ratio"] < 0.5 and under["chanvre"]["ourOccurrences"] == 1
    # our page says `cbd` four times in 16 tokens, the SERP about half as often: over-used past 1 / 0.5
    loud = ProfilePage(OURS.url, "fr", "CBD", "CBD CBD CBD CBD. Huile de CBD. Chanvre, posologie, effets.", [])
    over = {t["term"] for t in serp_gap(loud, OK)["overUsed"]}
    assert "cbd" in over


def test_most_pages_is_a_share_of_the_weighed_pages():
    # with a share above 1 no term is used by "most" pages: the lists are empty, the terms still listed
    g = serp_gap(OURS, OK, settings=gap.GapSettings(min_share=1.01, under_ratio=0.5, max_terms=30, min_pages=2))
    assert g["missing"] == [] and len(g["terms"]) == 6


def test_heading_terms_theirs_have_and_ours_lack_with_their_headings():
    g = serp_gap(OURS, OK)
    missing = {h["term"]: h for h in g["headings"]["missingTerms"]}
    assert set(missing) == {"posologie"}  # `effets` is in one page's headings only
    assert missing["posologie"]["pages"] == 2
    assert missing["posologie"]["examples"] == [
        {"url": A.url, "position": 1, "level": 2, "text": "Posologie de l'huile"},
        {"url": B.url, "position": 2, "level": 2, "text": "Posologie conseillée"},
    ]
    assert g["headings"]["ours"] == [{"level": 1, "text": "Acheter"}]
    assert g["headings"]["levels"]["ours"]["h1"] == 1 and g["headings"]["levels"]["serpMedian"]["h2"] == 1.5


def test_schema_types_they_share_and_ours_lacks():
    g = serp_gap(OURS, OK)
    assert g["schemaTypes"]["ours"] == ["Product"]
    # FAQPage: both pages; Product and Article: one page each, not shared by the SERP
    assert g["schemaTypes"]["missing"] == [{"type": "FAQPage", "pages": 2, "positions": [1, 2]}]
    with_faq = serp_gap(OURS, {**OK, "onpage": {"schemaTypes": ["FAQPage"]}})
    assert with_faq["schemaTypes"]["missing"] == [] and with_faq["schemaTypes"]["shared"][0]["type"] == "FAQPage"


def test_word_counts_side_by_side():
    wc = serp_gap(OURS, OK)["wordCount"]
    assert wc["ours"] == 12
    assert wc["serp"] == {"median": 13.5, "mean": 13.5, "min": 13, "max": 14}
    assert [p["words"] for p in wc["pages"]] == [14, 13]


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        (
            {"crawlStatus": "blocked", "crawlHttpStatus": 403, "crawlError": "cloudflare challenge page (HTTP 403)"},
            "our page is blocked (HTTP 403): cloudflare challenge page (HTTP 403): to retry through a proxy",
        ),
        ({"crawlStatus": "empty", "crawlHttpStatus": 200}, "our page is empty: no main text to compare (HTTP 200)"),
        (
            {"crawlStatus": "timeout", "crawlError": "SCRAPE_TIMEOUT: Scrape timed out"},
            "our page timed out: SCRAPE_TIMEOUT: Scrape timed out",
        ),
        ({"crawlStatus": "fetch_error", "crawlHttpStatus": 404}, "our page could not be fetched (HTTP 404)"),
    ],
)
def test_a_page_of_ours_that_is_not_ok_says_so_instead_of_an_empty_gap(fields, reason):
    g = serp_gap(None, fields)
    assert g["available"] is False and g["reason"] == reason
    assert g["ownPage"]["status"] == fields["crawlStatus"] and "missing" not in g and "terms" not in g


def test_no_competitor_read_is_no_gap():
    computed = profile.compute("fr-FR", [{"url": A.url, "crawlStatus": "blocked"}], {}, min_pages=2, max_terms=200)
    own = gap.OwnPage(OURS.url, OK, OURS, 12, [1])
    g = gap.compute(computed, [], own, SETTINGS)
    assert g["available"] is False and "no competitor page to compare with" in g["reason"]


def test_a_page_of_ours_in_another_language_is_flagged():
    english = ProfilePage(OURS.url, "en", "CBD oil shop", "Buy CBD oil online. Hemp oil.", [])
    g = serp_gap(english, OK)
    assert g["ownPage"]["otherLanguage"] is True and g["ownPage"]["lang"] == "en"
    assert math.isclose(sum(t["ourWeight"] for t in g["missing"]), 0.0)
