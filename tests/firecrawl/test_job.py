"""One keyword's job against the sandbox's Firecrawl and the real database: statuses, totals,
the merge, items, and the job failing only when Firecrawl itself fails."""

from __future__ import annotations

import asyncio
import logging

import pytest

from cannaspider.firecrawl import api
from cannaspider.firecrawl.job import OnpageJobError
from tests.firecrawl.conftest import add_keyword, competitors, run_jobs, serp_of


def statuses(serp: dict, locale: str) -> dict:
    return {
        c["url"].rsplit("/", 1)[-1]: (c.get("crawlStatus"), c.get("crawlHttpStatus"))
        for c in serp[locale]["competitors"]
    }


@pytest.mark.integration
def test_mixed_batch_gets_every_status_and_the_totals(db, firecrawl):
    firecrawl.slow(3)
    names = [
        "page-a.html",
        "blocked.html",
        "ratelimited.html",
        "incapsula.html",
        "no-text.html",
        "missing.html",
        "error.html",
        "slow.html",
        "empty.html",
    ]
    urls = [firecrawl.page(n) for n in names] + ["http://127.0.0.1:9/refused.html", "http://localhost/not-valid"]
    k = add_keyword(db, "widgets", {"en-US": competitors(*urls)})
    results, items, stats = run_jobs(db, firecrawl.url, [k], page_timeout_ms=1000)
    assert statuses(serp_of(db, k), "en-US") == {
        "page-a.html": ("ok", 200),
        "blocked.html": ("blocked", 403),  # Cloudflare challenge with a 403
        "ratelimited.html": ("blocked", 429),
        "incapsula.html": ("blocked", 200),  # a challenge page answered with 200
        "no-text.html": ("empty", 200),
        "missing.html": ("fetch_error", 404),
        "error.html": ("fetch_error", 500),
        "slow.html": ("timeout", None),  # SCRAPE_TIMEOUT from /errors
        "empty.html": ("fetch_error", None),  # SCRAPE_ALL_ENGINES_FAILED: indistinguishable from unreachable
        "refused.html": ("fetch_error", None),
        "not-valid": ("fetch_error", None),  # dropped by ignoreInvalidURLs
    }
    assert results[k] == {"crawled": 1, "blocked": 3, "failed": 7}
    assert len(items) == 11 and {i.locale for i in items} == {"en-US"}
    assert stats["cannaspider/onpage/keywords_done"] == 1 and stats["cannaspider/onpage/status/blocked"] == 3
    by_name = {i.url.rsplit("/", 1)[-1]: i for i in items}
    assert by_name["incapsula.html"].error == "incapsula challenge page"
    assert by_name["blocked.html"].error == "cloudflare challenge page (HTTP 403)"
    assert by_name["slow.html"].error == "SCRAPE_TIMEOUT: Scrape timed out"
    assert by_name["page-a.html"].onpage.title == "Competitor A - Best Widgets 2025"
    assert by_name["page-a.html"].position == 1 and by_name["page-a.html"].keyword == "widgets"


@pytest.mark.integration
def test_merge_keeps_competitor_fields_and_other_locales(db, firecrawl):
    fr = competitors(firecrawl.page("page-a.html"), firecrawl.page("blocked.html"))
    fr["competitors"][0]["snippet"] = "kept as is"
    fr["fetchedAt"] = "2026-11-01"
    other = {"competitors": [{"position": 1, "title": "no URL: not crawled"}], "note": "x"}
    k = add_keyword(db, "widgets", {"fr-FR": fr, "de-DE": other})
    results, _, _ = run_jobs(db, firecrawl.url, [k])
    serp = serp_of(db, k)
    assert serp["de-DE"] == other and serp["fr-FR"]["fetchedAt"] == "2026-11-01"
    first = serp["fr-FR"]["competitors"][0]
    assert {k: first[k] for k in ("url", "position", "title", "snippet")} == {
        "url": firecrawl.page("page-a.html"),
        "position": 1,
        "title": "result 1",
        "snippet": "kept as is",
    }
    assert first["crawlStatus"] == "ok" and first["crawledAt"].endswith("Z")
    assert first["onpage"]["headings"] == [{"level": 1, "text": "Best Widgets 2025"}, {"level": 2, "text": "Pricing"}]
    assert "crawlError" not in first
    assert results[k] == {"crawled": 1, "blocked": 1, "failed": 0}


@pytest.mark.integration
def test_recrawl_replaces_crawl_fields_as_a_group(db, firecrawl, sql):
    url = firecrawl.page("page-a.html")
    k = add_keyword(db, "widgets", {"en-US": competitors(url)})
    run_jobs(db, firecrawl.url, [k])
    assert serp_of(db, k)["en-US"]["competitors"][0]["onpage"]["wordCount"] > 0
    # the page now answers 403 (stand-in: the competitor URL changed to the blocked page's)
    sql(
        "UPDATE keywords SET serp = jsonb_set(serp, '{en-US,competitors,0,url}', to_jsonb(%s::text))",
        (firecrawl.page("blocked.html"),),
    )
    run_jobs(db, firecrawl.url, [k])
    comp = serp_of(db, k)["en-US"]["competitors"][0]
    assert comp["crawlStatus"] == "blocked" and "onpage" not in comp and comp["title"] == "result 1"


@pytest.mark.integration
def test_completion_order_and_shrinking_total_match_by_url(db, firecrawl):
    firecrawl.slow(1.0)
    urls = [firecrawl.page(n) for n in ("slow.html", "empty.html", "page-b.html", "page-a.html")]
    k = add_keyword(db, "order", {"en-US": competitors(*urls)})
    run_jobs(db, firecrawl.url, [k], poll_interval_s=0.1)
    comps = serp_of(db, k)["en-US"]["competitors"]
    assert [c["url"] for c in comps] == urls  # snapshot order kept
    assert [c["crawlStatus"] for c in comps] == ["ok", "fetch_error", "ok", "ok"]
    assert comps[2]["onpage"]["title"] == "Competitor B - Widget Guide"  # not A's, though B finished first
    assert comps[0]["onpage"]["headings"] == [{"level": 1, "text": "Slow"}]


@pytest.mark.integration
def test_budget_ends_the_batch_keeps_what_arrived_and_cancels(db, firecrawl):
    firecrawl.slow(5)
    k = add_keyword(db, "budget", {"en-US": competitors(firecrawl.page("page-a.html"), firecrawl.page("slow.html"))})
    results, items, _ = run_jobs(db, firecrawl.url, [k], budget_s=1.0)
    assert statuses(serp_of(db, k), "en-US") == {"page-a.html": ("ok", 200), "slow.html": ("timeout", None)}
    assert results[k] == {"crawled": 1, "blocked": 0, "failed": 1}
    assert [i.error for i in items if i.status == "timeout"] == ["no result within the batch budget"]


@pytest.mark.integration
def test_firecrawl_down_fails_the_job_and_writes_nothing(db, firecrawl):
    serp = {"en-US": competitors(firecrawl.page("page-a.html"))}
    k = add_keyword(db, "down", serp)
    results, items, stats = run_jobs(db, "http://127.0.0.1:9", [k])
    err = results[k]
    assert isinstance(err, OnpageJobError) and err.retryable
    assert str(err).startswith("Firecrawl is unreachable at http://127.0.0.1:9: ")
    assert serp_of(db, k) == serp and items == [] and stats["cannaspider/onpage/keywords_failed"] == 1


@pytest.mark.integration
def test_redis_down_500_is_a_retryable_failure_with_firecrawls_message(db, firecrawl):
    k = add_keyword(db, "500", {"en-US": competitors(firecrawl.page("page-a.html"))})
    firecrawl.state(down=True)
    err = run_jobs(db, firecrawl.url, [k])[0][k]
    assert isinstance(err, OnpageJobError) and err.retryable
    assert str(err) == (
        "Firecrawl answered HTTP 500 to POST /v2/batch/scrape: UNKNOWN_ERROR; An unexpected error occurred."
    )


@pytest.mark.integration
def test_a_400_is_a_clear_failure_not_retried(db, firecrawl, monkeypatch):
    # a Firecrawl whose strict schema no longer knows one of our options
    monkeypatch.setitem(api.BATCH_OPTIONS, "waitForTimeout", 5)
    k = add_keyword(db, "400", {"en-US": competitors(firecrawl.page("page-a.html"))})
    err = run_jobs(db, firecrawl.url, [k])[0][k]
    assert isinstance(err, OnpageJobError) and not err.retryable
    assert "HTTP 400" in str(err) and "Unrecognized key in body" in str(err) and "waitForTimeout" in str(err)


@pytest.mark.integration
def test_bad_key_is_a_401_failure_and_the_key_is_never_logged(db, firecrawl, caplog):
    firecrawl.state(api_key="right-key")
    k = add_keyword(db, "auth", {"en-US": competitors(firecrawl.page("page-a.html"))})
    with caplog.at_level(logging.DEBUG):
        err = run_jobs(db, firecrawl.url, [k], api_key="wrong-key-s3cr3t")[0][k]
        ok = run_jobs(db, firecrawl.url, [k], api_key="right-key")[0][k]
    assert isinstance(err, OnpageJobError) and not err.retryable and "HTTP 401" in str(err)
    assert ok == {"crawled": 1, "blocked": 0, "failed": 0}
    assert "s3cr3t" not in caplog.text and "right-key" not in caplog.text and "s3cr3t" not in str(err)


def test_missing_url_fails_with_one_line(db):
    k = add_keyword(db, "nourl", {"en-US": competitors("https://example.com/")})
    err = run_jobs(db, None, [k])[0][k]
    assert isinstance(err, OnpageJobError) and not err.retryable
    assert str(err).startswith("FIRECRAWL_API_URL is not set") and "\n" not in str(err)


@pytest.mark.integration
def test_unknown_keyword_and_keyword_without_competitors(db, firecrawl):
    k = add_keyword(db, "nothing", {"en-US": {"competitors": []}})
    results = run_jobs(db, firecrawl.url, [k, 999999])[0]
    assert results[k] == {"crawled": 0, "blocked": 0, "failed": 0}
    assert isinstance(results[999999], OnpageJobError) and str(results[999999]) == "keyword 999999 does not exist"


@pytest.mark.integration
@pytest.mark.parametrize("stalls, ok", [(1, True), (2, False)])
def test_one_retry_on_a_network_timeout_only(db, firecrawl, stalls, ok):
    k = add_keyword(db, "stall", {"en-US": competitors(firecrawl.page("page-a.html"))})
    firecrawl.state(stall={"seconds": 1.5, "count": stalls})
    result = run_jobs(db, firecrawl.url, [k], request_timeout_s=0.5)[0][k]
    if ok:
        assert result == {"crawled": 1, "blocked": 0, "failed": 0}
    else:
        assert isinstance(
            result, OnpageJobError
        ) and "did not answer POST /v2/batch/scrape within 0.5 s (twice)" in str(result)


@pytest.mark.integration
def test_locales_are_batches_of_their_own(db, firecrawl):
    k = add_keyword(
        db,
        "two",
        {
            "en-US": competitors(firecrawl.page("page-a.html")),
            "fr-FR": competitors(firecrawl.page("blocked.html"), firecrawl.page("page-b.html")),
        },
    )
    results, items, _ = run_jobs(db, firecrawl.url, [k])
    assert results[k] == {"crawled": 2, "blocked": 1, "failed": 0}
    assert firecrawl.state()["jobs"] == 2
    assert sorted((i.locale, i.status) for i in items) == [("en-US", "ok"), ("fr-FR", "blocked"), ("fr-FR", "ok")]


@pytest.mark.integration
def test_a_database_failure_fails_the_job_with_one_line(firecrawl):
    from cannaspider.db.errors import DatabaseSetupError
    from cannaspider.firecrawl.job import OnpageJobs
    from tests.firecrawl.conftest import aiohttp_download, firecrawl_client, onpage_config

    async def no_database():
        raise DatabaseSetupError("cannot connect to PostgreSQL at postgresql://u:***@h/db: refused")

    config = onpage_config(firecrawl.url)
    jobs = OnpageJobs(config, firecrawl_client(aiohttp_download, firecrawl.url), no_database, print)
    with pytest.raises(OnpageJobError) as exc:
        asyncio.run(jobs.crawl_keyword(1))
    assert str(exc.value) == "DatabaseSetupError: cannot connect to PostgreSQL at postgresql://u:***@h/db: refused"
    assert exc.value.retryable


# -- the corpus and the semantic profile --------------------------------------------------------------------------
def _json_ld_of(name: str) -> list:
    """The page's JSON-LD as its source writes it, read without our parser."""
    import json
    import re

    from sandbox.websites import COMPETITOR_PAGES

    html = COMPETITOR_PAGES[name][1]
    return [json.loads(m) for m in re.findall(r'<script type="application/ld\+json">(.*?)</script>', html, re.S)]


@pytest.mark.integration
def test_ok_pages_get_a_corpus_row_the_snapshot_points_to_and_a_profile(db, firecrawl, sql):
    en = competitors(
        firecrawl.page("en-guide.html"),
        firecrawl.page("en-guide.html?copy=1"),
        firecrawl.page("page-a.html"),
        firecrawl.page("blocked.html"),
    )
    k = add_keyword(db, "cbd oil", {"en-US": en, "fr-FR": competitors(firecrawl.page("fr-guide.html"))})
    results, _, _ = run_jobs(db, firecrawl.url, [k])
    assert results[k] == {"crawled": 4, "blocked": 1, "failed": 0}
    serp = serp_of(db, k)
    rows = {
        (loc, url.rsplit("/", 1)[-1]): (cid, lang, text, json_ld)
        for cid, loc, url, lang, text, json_ld in sql(
            "SELECT id, locale, url, lang, main_text, json_ld FROM onpage_corpora WHERE keyword_id = %s", (k,)
        )
    }
    assert set(rows) == {
        ("en-US", "en-guide.html"),
        ("en-US", "en-guide.html?copy=1"),
        ("en-US", "page-a.html"),
        ("fr-FR", "fr-guide.html"),
    }
    pointers = {c["url"].rsplit("/", 1)[-1]: c.get("corpusId") for c in serp["en-US"]["competitors"]}
    assert pointers["blocked.html"] is None
    assert pointers["en-guide.html"] == rows[("en-US", "en-guide.html")][0]
    assert serp["fr-FR"]["competitors"][0]["corpusId"] == rows[("fr-FR", "fr-guide.html")][0]
    _, lang, text, json_ld = rows[("en-US", "en-guide.html")]
    assert lang == "en" and text.startswith("CBD oil: the complete guide\n")
    assert "Legal notice" not in text and "cookies" not in text and "Shop" not in text  # footer, banner, menu
    assert json_ld == _json_ld_of("en-guide.html")  # the objects themselves, through jsonb
    assert rows[("fr-FR", "fr-guide.html")][1] == "fr"
    page_a = rows[("en-US", "page-a.html")][2]  # rendered by the sandbox's Firecrawl
    assert page_a.startswith("Best Widgets 2025\n") and "Home" not in page_a and "Footer A" not in page_a

    profiles = dict(sql("SELECT locale, profile FROM keyword_profiles WHERE keyword_id = %s", (k,)))
    en_profile, fr_profile = profiles["en-US"], profiles["fr-FR"]
    assert en_profile["keyword"] == "cbd oil" and en_profile["keywordId"] == k
    assert en_profile["completeness"]["competitors"] == 4 and en_profile["completeness"]["ok"] == 3
    assert [b["url"] for b in en_profile["completeness"]["blocked"]] == [firecrawl.page("blocked.html")]
    cbd_oil = next(t for t in en_profile["terms"] if t["term"] == "cbd oil")
    assert cbd_oil["pages"] == 2 and cbd_oil["inTitle"] == 2 and cbd_oil["inHeadings"] == 2
    assert "widgets" not in {t["term"] for t in en_profile["terms"]}  # page A's alone: not shared
    assert {"huile de cbd", "chanvre"} <= {t["term"] for t in fr_profile["terms"]}  # one page: all its terms
    assert fr_profile["language"] == "fr" and "de" not in {t["term"] for t in fr_profile["terms"]}


@pytest.mark.integration
def test_a_page_no_longer_ok_loses_its_corpus_and_other_locales_keep_theirs(db, firecrawl, sql):
    k = add_keyword(
        db,
        "cbd oil",
        {
            "en-US": competitors(firecrawl.page("en-guide.html"), firecrawl.page("page-a.html")),
            "fr-FR": competitors(firecrawl.page("fr-guide.html")),
            "de-DE": {"competitors": [{"position": 1, "title": "no URL: not crawled"}]},
        },
    )
    run_jobs(db, firecrawl.url, [k])
    # another locale's rows, written by someone else: a crawl of en-US and fr-FR never touches them
    sql(
        "INSERT INTO onpage_corpora (keyword_id, locale, url, crawled_at, main_text)"
        " VALUES (%s, 'de-DE', 'x', now(), 't')",
        (k,),
    )
    sql("INSERT INTO keyword_profiles (keyword_id, locale, profile) VALUES (%s, 'de-DE', '{\"mine\": 1}')", (k,))
    before = dict(sql("SELECT url, id FROM onpage_corpora WHERE keyword_id = %s", (k,)))
    # page A now answers 403 (the snapshot re-imported with the blocked page at its place)
    sql(
        "UPDATE keywords SET serp = jsonb_set(serp, '{en-US,competitors,1,url}', to_jsonb(%s::text)) WHERE id = %s",
        (firecrawl.page("blocked.html"), k),
    )
    fr_profile_before = sql("SELECT computed_at FROM keyword_profiles WHERE keyword_id = %s AND locale = 'fr-FR'", (k,))
    run_jobs(db, firecrawl.url, [k])
    after = dict(sql("SELECT url, id FROM onpage_corpora WHERE keyword_id = %s", (k,)))
    assert firecrawl.page("page-a.html") not in after  # nothing points to it any more
    assert after[firecrawl.page("en-guide.html")] == before[firecrawl.page("en-guide.html")]  # same row, updated
    assert after[firecrawl.page("fr-guide.html")] == before[firecrawl.page("fr-guide.html")]
    [(en_profile,)] = sql("SELECT profile FROM keyword_profiles WHERE keyword_id = %s AND locale = 'en-US'", (k,))
    assert en_profile["completeness"]["ok"] == 1 and len(en_profile["completeness"]["blocked"]) == 1
    assert fr_profile_before and len(sql("SELECT 1 FROM keyword_profiles WHERE keyword_id = %s", (k,))) == 3
    assert sql("SELECT profile FROM keyword_profiles WHERE keyword_id = %s AND locale = 'de-DE'", (k,)) == [
        ({"mine": 1},)
    ]
    assert after["x"] == before["x"]


@pytest.mark.integration
def test_a_keyword_deleted_during_the_crawl_ends_its_job_quietly(db, firecrawl, sql, caplog):
    """Its corpora used to hit the foreign key and fail the keyword's job."""
    import psycopg

    from tests.firecrawl.conftest import aiohttp_download

    k = add_keyword(db, "gone", {"en-US": competitors(firecrawl.page("en-guide.html"))})

    async def delete_on_first_poll(request):
        if request.method == "GET" and "/v2/batch/scrape/" in request.url:
            with psycopg.connect(db, autocommit=True) as conn:
                conn.execute("DELETE FROM keywords WHERE id = %s", (k,))
        return await aiohttp_download(request)

    with caplog.at_level(logging.WARNING):
        results, items, _ = run_jobs(db, firecrawl.url, [k], download=delete_on_first_poll)
    assert results[k] == {"crawled": 1, "blocked": 0, "failed": 0}
    assert "the keyword or its locale was removed during the crawl" in caplog.text
    assert sql("SELECT count(*) FROM onpage_corpora") == [(0,)] and sql("SELECT count(*) FROM keyword_profiles") == [
        (0,)
    ]
    assert items[0].corpus_id is None


# -- hostile pages (issue 28, points 10 and 15): that page alone is degraded, with its reason -----------------------
@pytest.mark.integration
def test_a_page_with_hostile_json_ld_is_ok_without_it_and_its_keyword_completes(db, firecrawl, sql):
    """Nested 1000 deep, a nested @graph, \\ud800 and \\u0000: RecursionError / UnicodeEncodeError
    used to fail all four pages of the keyword (no status, corpus or profile)."""
    from tests.firecrawl.hostile import DEEP_ARRAY, DEEP_GRAPH, NUL_AND_INFINITY, SURROGATES, hostile_site, page_with

    html = page_with(DEEP_ARRAY, SURROGATES, DEEP_GRAPH, NUL_AND_INFINITY)
    with hostile_site({"/cbd/hostile.html": html}) as site:
        hostile = f"{site}/cbd/hostile.html"
        urls = [firecrawl.page("en-guide.html"), firecrawl.page("en-guide.html?copy=1"), firecrawl.page("page-a.html")]
        k = add_keyword(db, "cbd oil", {"en-US": competitors(*urls, hostile)})
        results, items, _ = run_jobs(db, firecrawl.url, [k])
    assert results[k] == {"crawled": 4, "blocked": 0, "failed": 0}
    comps = {c["url"]: c for c in serp_of(db, k)["en-US"]["competitors"]}
    assert all(c["crawlStatus"] == "ok" and isinstance(c["corpusId"], int) for c in comps.values())
    bad = comps[hostile]
    assert bad["crawlWarning"] == "2 JSON-LD block(s) left out: nested deeper than 64 levels"
    assert "crawlError" not in bad and all("crawlWarning" not in comps[u] for u in urls)
    assert bad["onpage"]["jsonLdTypes"] == ["Product", "Article"] and bad["onpage"]["jsonLdInvalid"] == 2
    [(json_ld,)] = sql("SELECT json_ld FROM onpage_corpora WHERE id = %s", (bad["corpusId"],))
    assert json_ld == [
        {"@type": "Product", "name": "Hemp \ufffd oil", "\ufffd": "key"},
        {"@type": "Article", "rating": None, "low": None},
    ]
    [(profile,)] = sql("SELECT profile FROM keyword_profiles WHERE keyword_id = %s AND locale = 'en-US'", (k,))
    assert profile["completeness"]["ok"] == 4 and profile["terms"]
    assert {i.url: i.warning for i in items}[hostile] == bad["crawlWarning"]


@pytest.mark.integration
def test_a_page_past_the_parse_deadline_is_empty_and_the_others_keep_corpus_and_profile(db, firecrawl, sql):
    """The page of 40,000 headings blocked the loop 68 s: now its reading stops at the deadline."""
    from dataclasses import replace

    from tests.firecrawl.conftest import onpage_config
    from tests.firecrawl.hostile import HEADINGS, hostile_site

    with hostile_site({"/cbd/headings.html": HEADINGS}) as site:
        hostile = f"{site}/cbd/headings.html"
        urls = [firecrawl.page("en-guide.html"), firecrawl.page("en-guide.html?copy=1"), firecrawl.page("page-a.html")]
        k = add_keyword(db, "cbd oil", {"en-US": competitors(*urls, hostile)})
        parse = replace(onpage_config(None).parse, timeout_s=2.0)
        results, items, _ = run_jobs(db, firecrawl.url, [k], parse=parse)
    assert results[k] == {"crawled": 3, "blocked": 0, "failed": 1}
    comps = {c["url"]: c for c in serp_of(db, k)["en-US"]["competitors"]}
    bad = comps.pop(hostile)
    assert (bad["crawlStatus"], bad["crawlHttpStatus"]) == ("empty", 200)
    assert bad["crawlError"] == "not read: parsing took longer than 2 s"
    assert "onpage" not in bad and "corpusId" not in bad
    assert all(c["crawlStatus"] == "ok" and isinstance(c["corpusId"], int) for c in comps.values())
    assert sql("SELECT count(*) FROM onpage_corpora WHERE keyword_id = %s", (k,)) == [(3,)]
    [(profile,)] = sql("SELECT profile FROM keyword_profiles WHERE keyword_id = %s AND locale = 'en-US'", (k,))
    assert profile["completeness"]["ok"] == 3 and profile["terms"]
    assert profile["completeness"]["missing"] == [
        {"url": hostile, "status": "empty", "error": "not read: parsing took longer than 2 s"}
    ]
    assert {i.url: i.status for i in items}[hostile] == "empty"
