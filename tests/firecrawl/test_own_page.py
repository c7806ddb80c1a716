"""Our page crawled with the competitors, against the sandbox's Firecrawl and the real database:
one batch per locale with our URL in it (rawHtml, maxAge 0), classified the same way, its crawl
fields and corpus kept, the gap computed with the profile; and the job's progress row as the
batches are polled."""

from __future__ import annotations

import json

import psycopg
import pytest

from tests.firecrawl.conftest import add_keyword, aiohttp_download, competitors, run_jobs

pytestmark = pytest.mark.integration  # the sandbox, parser processes (tests/tiers.py)


def set_own(db: str, k: int, locale: str, url: str) -> None:
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute("INSERT INTO keyword_own_pages (keyword_id, locale, url) VALUES (%s, %s, %s)", (k, locale, url))


def own_row(db: str, k: int, locale: str) -> tuple[dict | None, dict | None]:
    with psycopg.connect(db) as conn:
        return conn.execute(
            "SELECT crawl, gap FROM keyword_own_pages WHERE keyword_id = %s AND locale = %s", (k, locale)
        ).fetchone()


def recording(batches: list[dict]):
    async def download(request):
        if request.method == "POST" and request.url.endswith("/v2/batch/scrape"):
            batches.append(json.loads(request.body))
        return await aiohttp_download(request)

    return download


def test_our_page_goes_in_the_locales_batch_and_is_compared(db, firecrawl, sql):
    a, b, ours = firecrawl.page("page-a.html"), firecrawl.page("page-b.html"), firecrawl.page("en-guide.html")
    k = add_keyword(db, "widgets", {"en-US": competitors(a, b)})
    set_own(db, k, "en-US", ours)
    batches: list[dict] = []
    results, items, _ = run_jobs(db, firecrawl.url, [k], download=recording(batches))
    # one batch for the locale, our URL after the competitors; the seed's request unchanged
    assert len(batches) == 1 and batches[0]["urls"] == [a, b, ours]
    assert batches[0]["formats"] == ["rawHtml"] and batches[0]["maxAge"] == 0 and batches[0]["proxy"] == "basic"
    assert results[k] == {"crawled": 3, "blocked": 0, "failed": 0}
    assert [i.own_page for i in items if i.url == ours] == [True]
    crawl, gap = own_row(db, k, "en-US")
    assert crawl["crawlStatus"] == "ok" and crawl["onpage"]["title"] == "CBD oil: the complete guide"
    # its corpus is kept beside the competitors', and it is not a page of the SERP's profile
    assert sql("SELECT count(*) FROM onpage_corpora WHERE id = %s", (crawl["corpusId"],)) == [(1,)]
    profile = sql("SELECT profile FROM keyword_profiles WHERE keyword_id = %s", (k,))[0][0]
    assert [p["url"] for p in profile["pages"]] == [a, b]
    assert gap["available"] is True and gap["computedAt"] == profile["computedAt"]
    assert gap["ownPage"]["url"] == ours and gap["weighed"] == 2
    # page A says `widgets`, page B `widget`: one lemma both use, which our CBD guide never says
    missing = {t["lemma"]: t for t in gap["missing"]}
    assert missing["widget"]["pages"] == 2 and missing["widget"]["ourWeight"] == 0
    assert gap["wordCount"]["ours"] > max(p["words"] for p in gap["wordCount"]["pages"])
    assert "Article" in gap["schemaTypes"]["ours"]


def test_a_blocked_page_of_ours_says_so_instead_of_a_gap(db, firecrawl):
    a, b = firecrawl.page("page-a.html"), firecrawl.page("page-b.html")
    k = add_keyword(db, "widgets", {"en-US": competitors(a, b)})
    set_own(db, k, "en-US", firecrawl.page("blocked.html"))
    results, _, _ = run_jobs(db, firecrawl.url, [k])
    assert results[k] == {"crawled": 2, "blocked": 1, "failed": 0}
    crawl, gap = own_row(db, k, "en-US")
    assert crawl["crawlStatus"] == "blocked" and crawl["crawlHttpStatus"] == 403
    assert gap["available"] is False
    assert gap["reason"] == (
        "our page is blocked (HTTP 403): cloudflare challenge page (HTTP 403): to retry through a proxy"
    )


def test_a_page_of_ours_that_ranks_is_sent_once(db, firecrawl):
    a, b = firecrawl.page("page-a.html"), firecrawl.page("page-b.html")
    k = add_keyword(db, "widgets", {"en-US": competitors(a, b)})
    set_own(db, k, "en-US", b)
    batches: list[dict] = []
    results, _, _ = run_jobs(db, firecrawl.url, [k], download=recording(batches))
    assert batches[0]["urls"] == [a, b] and results[k] == {"crawled": 2, "blocked": 0, "failed": 0}
    crawl, gap = own_row(db, k, "en-US")
    assert crawl["crawlStatus"] == "ok" and gap["available"] is True


def test_progress_is_written_as_the_batch_polls(db, firecrawl, sql):
    firecrawl.slow(3)  # slow.html arrives 3 s after page-a.html
    k = add_keyword(db, "widgets", {"en-US": competitors(firecrawl.page("page-a.html"), firecrawl.page("slow.html"))})
    seen: list[tuple[str, int, int]] = []

    async def download(request):
        if request.method == "GET" and "/v2/batch/scrape/" in request.url:
            with psycopg.connect(db) as conn:
                seen.append(conn.execute("SELECT state, pages_done, pages_total FROM onpage_progress").fetchone())
        return await aiohttp_download(request)

    results, _, _ = run_jobs(db, firecrawl.url, [k], download=download, poll_interval_s=0.2)
    assert results[k] == {"crawled": 2, "blocked": 0, "failed": 0}
    assert seen[0] == ("running", 0, 2)
    assert ("running", 1, 2) in seen  # page A done, the slow page not yet
    assert [done for _, done, _ in seen] == sorted(done for _, done, _ in seen)
    row = sql("SELECT state, pages_done, pages_total, locales_done, crawled, blocked, failed FROM onpage_progress")
    assert row == [("done", 2, 2, 1, 2, 0, 0)]


def test_a_failed_job_says_so_in_its_progress(db, firecrawl, sql):
    k = add_keyword(db, "widgets", {"en-US": competitors(firecrawl.page("page-a.html"))})
    firecrawl.state(down=True)
    results, _, _ = run_jobs(db, firecrawl.url, [k])
    assert isinstance(results[k], Exception)
    ((state, error),) = sql("SELECT state, error FROM onpage_progress")
    assert state == "failed" and "Firecrawl answered HTTP 500" in error
