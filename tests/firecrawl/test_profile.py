"""The semantic profile of a fixed SERP of 5 pages (and 2 that failed), checked against weights
computed here by hand from the formula in docs/onpage.md: the counts below were made by reading
the texts, not by calling the code."""

from __future__ import annotations

import math
from typing import Any

from cannaspider import settings
from cannaspider.firecrawl import profile as profiles
from cannaspider.firecrawl import terms
from cannaspider.firecrawl.profile import RETRY_THROUGH_PROXY, ProfilePage

# English stop words among these texts: "the", "and", "of" (the others are not in the list)
PAGES = [
    ProfilePage("https://p1.example/", "en", "CBD Oil", "cbd oil dosage.\nhemp extract", ["Hemp oil guide"]),
    ProfilePage("https://p2.example/", "en", "Hemp Oil", "the hemp oil tincture", ["CBD dosage"]),
    ProfilePage("https://p3.example/", "en", "CBD Gummies", "cbd gummies and cbd oil", []),
    ProfilePage("https://p4.example/", "en", "Dosage", "cbd dosage of oil", []),
    ProfilePage("https://p5.example/", "en", "Tincture", "hemp tincture", []),
]
COMPETITORS = [{"url": p.url, "position": i, "crawlStatus": "ok"} for i, p in enumerate(PAGES, 1)] + [
    {"url": "https://blocked.example/", "position": 6, "crawlStatus": "blocked", "crawlHttpStatus": 403},
    {"url": "https://slow.example/", "position": 7, "crawlStatus": "timeout", "crawlError": "SCRAPE_TIMEOUT: x"},
]
N = 5
# L(d), tokens of title + main text, stop words included:
#   p1: cbd oil | cbd oil dosage hemp extract        = 2 + 5 = 7
#   p2: hemp oil | the hemp oil tincture            = 2 + 4 = 6
#   p3: cbd gummies | cbd gummies and cbd oil       = 2 + 5 = 7
#   p4: dosage | cbd dosage of oil                  = 1 + 4 = 5
#   p5: tincture | hemp tincture                    = 1 + 2 = 3
L = {1: 7, 2: 6, 3: 7, 4: 5, 5: 3}


def idf(df: int) -> float:
    return math.log((1 + N) / (1 + df)) + 1


def weight(df: int, counts: dict[int, int]) -> float:
    """counts: page → n(t, d) in its title + main text."""
    return round(idf(df) * sum(n / L[d] for d, n in counts.items()) / N, 6)


def compute(locale: str, competitors: list[dict[str, Any]], pages: dict[str, ProfilePage]) -> dict[str, Any]:
    """As the job computes it: the project's PROFILE_MIN_PAGES and PROFILE_MAX_TERMS."""
    return profiles.compute(
        locale, competitors, pages, min_pages=settings.PROFILE_MIN_PAGES, max_terms=settings.PROFILE_MAX_TERMS
    )


def profile() -> dict:
    return compute("en-US", COMPETITORS, {p.url: p for p in PAGES})


def test_weights_match_the_formula_computed_by_hand():
    terms = {t["term"]: t for t in profile()["terms"]}
    expected = {
        # oil: p1 title+body 2, p2 title+body 2, p3 1, p4 1; df 4
        "oil": weight(4, {1: 2, 2: 2, 3: 1, 4: 1}),
        # cbd: p1 2, p3 3 (title 1, body 2), p4 1, and p2 uses it in a heading only (df 4, tf 0 there)
        "cbd": weight(4, {1: 2, 3: 3, 4: 1}),
        # hemp: p1 1 (body), p2 2, p5 1; df 3
        "hemp": weight(3, {1: 1, 2: 2, 5: 1}),
        # dosage: p1 1, p4 2 (title, body), and p2's heading; df 3
        "dosage": weight(3, {1: 1, 4: 2}),
        # tincture: p2 1, p5 2; df 2
        "tincture": weight(2, {2: 1, 5: 2}),
        # cbd oil: p1 2 (title, body), p3 1; df 2
        "cbd oil": weight(2, {1: 2, 3: 1}),
        # hemp oil: p2 2 (title, body), and p1's heading "hemp oil guide"; df 2
        "hemp oil": weight(2, {2: 2}),
        # cbd dosage: p4 1, and p2's heading; df 2
        "cbd dosage": weight(2, {4: 1}),
        # gummies: p3 only (title, body): df 1, not shared
    }
    assert {t: terms[t]["weight"] for t in expected} == expected
    # every term used by one page only is left out: gummies, extract, guide, the phrases of one page
    for single in ("gummies", "extract", "guide", "cbd gummies", "gummies and cbd", "dosage of oil", "oil tincture"):
        assert single not in terms
    # and nothing else is shared: "hemp tincture" is p5's only (p2 says "hemp oil tincture")
    assert set(terms) == set(expected)


def test_terms_are_ordered_heaviest_first_with_their_coverage():
    p = profile()
    weights = [t["weight"] for t in p["terms"]]
    assert weights == sorted(weights, reverse=True)
    oil = next(t for t in p["terms"] if t["term"] == "oil")
    assert (oil["pages"], oil["inTitle"], oil["inHeadings"], oil["inBody"], oil["occurrences"]) == (4, 2, 1, 4, 6)
    cbd = next(t for t in p["terms"] if t["term"] == "cbd")
    assert (cbd["pages"], cbd["inTitle"], cbd["inHeadings"], cbd["inBody"]) == (4, 2, 1, 3)
    assert oil["words"] == 1 and next(t for t in p["terms"] if t["term"] == "cbd oil")["words"] == 2


def test_completeness_names_the_blocked_pages_to_retry_through_a_proxy():
    c = profile()["completeness"]
    assert (c["competitors"], c["ok"], c["share"]) == (7, 5, round(5 / 7, 4))
    assert c["statuses"] == {"blocked": 1, "ok": 5, "timeout": 1}
    assert c["blocked"] == [{"url": "https://blocked.example/", "httpStatus": 403, "action": RETRY_THROUGH_PROXY}]
    assert RETRY_THROUGH_PROXY == "to retry through a proxy"
    assert c["missing"] == [{"url": "https://slow.example/", "status": "timeout", "error": "SCRAPE_TIMEOUT: x"}]
    assert [pg["tokens"] for pg in profile()["pages"]] == [L[d] for d in range(1, 6)]


def test_a_single_page_is_its_own_profile_and_no_page_is_an_empty_one():
    one = compute("en-US", COMPETITORS[:1], {PAGES[0].url: PAGES[0]})
    assert {t["term"] for t in one["terms"]} >= {"cbd", "oil", "cbd oil", "hemp extract"}
    none = compute("fr-FR", COMPETITORS[5:], {})
    assert none["terms"] == [] and none["completeness"]["ok"] == 0 and none["language"] == "fr"


def test_each_page_is_read_with_its_own_languages_stop_words():
    fr = ProfilePage("https://fr.example/", "fr", "Huile de chanvre", "les huiles de chanvre", [])
    fr2 = ProfilePage("https://fr2.example/", "fr", "Chanvre", "le chanvre et la santé", [])
    comps = [{"url": fr.url, "crawlStatus": "ok"}, {"url": fr2.url, "crawlStatus": "ok"}]
    terms = {t["term"] for t in compute("fr-FR", comps, {fr.url: fr, fr2.url: fr2})["terms"]}
    assert terms == {"chanvre"}  # "de", "les", "le", "et", "la" are French stop words


def test_inflected_forms_count_as_one_lemma_shown_by_their_most_frequent_form():
    # the pairs: "huile"/"huiles", "fleur"/"fleurs" were two terms each, half as heavy
    p1 = ProfilePage("https://a.example/", "fr", "Huiles de CBD", "les huiles de cbd et les fleurs", [])
    p2 = ProfilePage("https://b.example/", "fr", "Huile de CBD", "une huile de cbd, une fleur", ["Nos fleurs"])
    comps = [{"url": p.url, "crawlStatus": "ok"} for p in (p1, p2)]
    pages = {p.url: p for p in (p1, p2)}
    by_lemma = {t["lemma"]: t for t in compute("fr-FR", comps, pages)["terms"]}
    surface = {
        t["term"]: t for t in profiles.compute("fr-FR", comps, pages, min_pages=2, max_terms=200, lemmas=False)["terms"]
    }
    # tokens: p1 3 + 7 = 10, p2 3 + 6 = 9; huile: p1 2, p2 2, df 2
    assert by_lemma["huile"]["weight"] == round((math.log(3 / 3) + 1) * (2 / 10 + 2 / 9) / 2, 6)
    assert by_lemma["huile"]["occurrences"] == 4 and by_lemma["huile"]["forms"] == ["huile", "huiles"]
    assert by_lemma["huile de cbd"]["pages"] == 2 and by_lemma["huile de cbd"]["occurrences"] == 4
    assert by_lemma["fleur"]["pages"] == 2 and by_lemma["fleur"]["inHeadings"] == 1
    # by surface form, "huile", "huiles", "fleur" are each one page's: only cbd and fleurs are shared
    assert set(surface) == {"cbd", "fleurs"}
    assert surface["cbd"]["weight"] == by_lemma["cbd"]["weight"]  # a word without inflection is unchanged
    # shown as its most frequent surface form (ties: alphabetical)
    assert by_lemma["huile"]["term"] == "huile" and by_lemma["fleur"]["term"] == "fleur"


def test_a_language_without_a_lemmatizer_counts_surface_forms():
    assert terms.lemmatizer_for("xx") is terms.as_is and terms.lemmatizer_for(None) is terms.as_is
    assert terms.lemmatizer_for("en")("Widgets") == "widget"


def test_a_page_in_another_language_is_listed_flagged_and_left_out_of_the_weights():
    fr = [
        ProfilePage("https://a.example/", "fr", "Huile de CBD", "l'huile de cbd bio", []),
        ProfilePage("https://b.example/", "fr-CA", "Huile de CBD", "une huile de cbd", []),
        ProfilePage("https://c.example/", None, "Huile", "huile de cbd naturelle", []),  # unknown: counted
    ]
    en = ProfilePage("https://brand.example/", "en", "CBD Oil", "the best cbd oil, cbd oil for sleep", [])
    comps = [{"url": p.url, "crawlStatus": "ok", "position": i} for i, p in enumerate([*fr, en], 1)]
    with_en = compute("fr-FR", comps, {p.url: p for p in [*fr, en]})
    without = compute("fr-FR", comps[:3], {p.url: p for p in fr})
    assert with_en["terms"] == without["terms"]  # the English page changes no weight
    assert "oil" not in {t["term"] for t in with_en["terms"]}
    c = with_en["completeness"]
    assert (c["ok"], c["weighed"], c["otherLanguage"]) == (4, 3, 1)
    assert [(pg["url"], pg["otherLanguage"]) for pg in with_en["pages"]] == [
        ("https://a.example/", False),
        ("https://b.example/", False),
        ("https://c.example/", False),
        ("https://brand.example/", True),
    ]
    assert with_en["pages"][3]["terms"] > 0  # read in its own language, for the list
