"""Hostile JSON-LD (issue 28, point 10): blocks nested a thousand levels deep, nested `@graph`s,
`\\ud800` and `\\u0000` escapes, non-finite numbers. The page is read without the blocks it cannot
hold, says so, and everything it keeps is storable; it used to raise RecursionError or
UnicodeEncodeError and fail every page of its keyword."""

from __future__ import annotations

import json

from cannaspider.firecrawl import classify, json_ld
from cannaspider.firecrawl.batch import PageOutcome
from tests.firecrawl.conftest import onpage_config
from tests.firecrawl.hostile import DEEP_ARRAY, DEEP_GRAPH, NUL_AND_INFINITY, SURROGATES, page_with

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
    at_bound = "[" * json_ld.MAX_DEPTH + "]" * json_ld.MAX_DEPTH
    past_bound = "[" * (json_ld.MAX_DEPTH + 1) + "]" * (json_ld.MAX_DEPTH + 1)
    graph = '{"@graph": [' * 30 + '{"@type": "Offer"}' + "]}" * 30  # 60 levels: a @graph in a @graph…
    v = verdict_of(page_with(at_bound, past_bound, graph))
    assert v.onpage.json_ld_types == ["Offer"] and v.onpage.json_ld_invalid == 1
    assert v.warning == "1 JSON-LD block(s) left out: nested deeper than 64 levels"
    assert len(v.corpus.json_ld) == 2


def test_a_page_without_hostile_json_ld_has_no_warning():
    v = verdict_of(page_with('{"@type": "Article"}', "{not json"))
    assert v.warning is None and v.onpage.json_ld_invalid == 1 and v.onpage.json_ld_types == ["Article"]
