"""`scrapy crawl crawl_onpage` end to end: the sandbox's Firecrawl, the real database, feeds."""

from __future__ import annotations

import json
import re

import pytest

from cannaspider.commands.crawl import EXIT_INCOMPLETE
from cannaspider.firecrawl.job import MISSING_URL
from tests.firecrawl.conftest import Firecrawl, add_keyword, competitors, serp_of
from tests.helpers import run_scrapy

pytestmark = pytest.mark.integration  # spawns (tests/tiers.py)


def onpage_env(scrapy_env: dict, sandbox, **extra) -> dict:
    return {**scrapy_env, "FIRECRAWL_API_URL": sandbox.urls.firecrawl, **extra}


def crawl_onpage(env: dict, *args: str, timeout: float = 120):
    return run_scrapy("crawl", "crawl_onpage", "-s", "FIRECRAWL_POLL_INTERVAL_S=0.3", *args, env=env, timeout=timeout)


def test_crawl_writes_the_merge_and_the_feed(scrapy_env, db, sandbox, tmp_path):
    fc = Firecrawl(sandbox)
    fc.state(reset=True)
    k = add_keyword(
        db,
        "widgets",
        {
            "en-US": competitors(fc.page("page-a.html"), fc.page("blocked.html")),
            "fr-FR": competitors(fc.page("page-b.html")),
        },
    )
    out = tmp_path / "onpage.json"
    result = crawl_onpage(onpage_env(scrapy_env, sandbox), "-a", f"keyword_id={k}", "-O", str(out))
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    assert f"keyword {k} ('widgets'): 2 crawled, 1 blocked, 0 failed" in result.stderr
    items = json.loads(out.read_text())
    assert sorted((i["locale"], i["url"].rsplit("/", 1)[-1], i["status"]) for i in items) == [
        ("en-US", "blocked.html", "blocked"),
        ("en-US", "page-a.html", "ok"),
        ("fr-FR", "page-b.html", "ok"),
    ]
    page_b = next(i for i in items if i["url"].endswith("page-b.html"))
    assert page_b["keyword"] == "widgets" and page_b["keyword_id"] == k and page_b["http_status"] == 200
    assert page_b["onpage"]["title"] == "Competitor B - Widget Guide"
    assert page_b["corpus_id"] == serp_of(db, k)["fr-FR"]["competitors"][0]["corpusId"] is not None
    assert page_b["onpage"]["headings"] == [{"level": 1, "text": "Widget Guide"}]
    serp = serp_of(db, k)
    assert [c["crawlStatus"] for c in serp["en-US"]["competitors"]] == ["ok", "blocked"]
    assert serp["fr-FR"]["competitors"][0]["onpage"]["wordCount"] == 8  # <main> only: the JS paragraph lands after it
    # -O replaces the default dated feed; without it, the default feed has them (its item_classes)
    assert not list((tmp_path / "feeds").rglob("*.jsonl"))
    again = crawl_onpage(onpage_env(scrapy_env, sandbox), "-a", f"keyword_id={k}")
    assert again.returncode == 0, again.stderr[-3000:]
    feeds = list((tmp_path / "feeds" / "crawl_onpage").rglob("*.jsonl"))
    assert len(feeds) == 1 and len(feeds[0].read_text().splitlines()) == 3


def test_hostile_pages_end_ok_or_empty_with_their_reasons_and_the_crawl_completes(scrapy_env, db, sandbox, tmp_path):
    """Issue 28, points 10 and 15, through `scrapy crawl`: JSON-LD nested 1000 deep used to fail
    the keyword; a page past ONPAGE_PARSE_TIMEOUT_S is `empty` (its parser process killed)."""
    from tests.firecrawl.hostile import DEEP_ARRAY, DEEP_GRAPH, HEADINGS, SURROGATES, hostile_site, page_with

    fc = Firecrawl(sandbox)
    fc.state(reset=True)
    pages = {"/h/json-ld.html": page_with(DEEP_ARRAY, DEEP_GRAPH, SURROGATES), "/h/headings.html": HEADINGS}
    with hostile_site(pages) as site:
        k = add_keyword(db, "hemp", {"en-US": competitors(fc.page("page-a.html"), *(site + p for p in pages))})
        out = tmp_path / "onpage.json"
        args = ("-a", f"keyword_id={k}", "-O", str(out), "-s", "ONPAGE_PARSE_TIMEOUT_S=2")
        result = crawl_onpage(onpage_env(scrapy_env, sandbox), *args)
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert f"keyword {k} ('hemp'): 2 crawled, 0 blocked, 1 failed" in result.stderr
    items = {i["url"].rsplit("/", 1)[-1]: i for i in json.loads(out.read_text())}
    assert (items["page-a.html"]["status"], items["page-a.html"]["warning"]) == ("ok", None)
    assert (items["json-ld.html"]["status"], items["json-ld.html"]["warning"]) == (
        "ok",
        "2 JSON-LD block(s) left out: nested deeper than 64 levels",
    )
    assert (items["headings.html"]["status"], items["headings.html"]["error"]) == (
        "empty",
        "not read: parsing took longer than 2 s",
    )


def test_crawl_databases_corpora_and_a_semantic_profile(scrapy_env, db, sandbox, sql):
    fc = Firecrawl(sandbox)
    fc.state(reset=True)
    k = add_keyword(
        db,
        "huile de cbd",
        {
            "fr-FR": competitors(fc.page("fr-guide.html"), fc.page("fr-guide.html?v=2"), fc.page("blocked.html")),
            "en-US": competitors(fc.page("en-guide.html")),
        },
    )
    result = crawl_onpage(onpage_env(scrapy_env, sandbox), "-a", f"keyword_id={k}")
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert f"keyword {k} fr-FR: semantic profile of " in result.stderr
    assert "from 2 of 3 page(s) (1 blocked: to retry through a proxy)" in result.stderr
    corpora = sql("SELECT locale, lang, main_text FROM onpage_corpora WHERE keyword_id = %s ORDER BY url", (k,))
    assert [(loc, lang) for loc, lang, _ in corpora] == [("en-US", "en"), ("fr-FR", "fr"), ("fr-FR", "fr")]
    assert all("Mentions légales" not in text and "Accueil" not in text for _, _, text in corpora)
    profiles = dict(sql("SELECT locale, profile FROM keyword_profiles WHERE keyword_id = %s", (k,)))
    fr = profiles["fr-FR"]
    assert fr["completeness"]["ok"] == 2 and fr["completeness"]["blocked"][0]["url"] == fc.page("blocked.html")
    top = {t["term"]: t for t in fr["terms"]}
    assert top["huile de cbd"]["pages"] == 2 and top["huile de cbd"]["inTitle"] == 2
    assert fr["terms"][0]["weight"] >= top["huile de cbd"]["weight"] > 0
    serp = serp_of(db, k)
    assert [bool(c.get("corpusId")) for c in serp["fr-FR"]["competitors"]] == [True, True, False]


def test_missing_url_is_one_line_and_a_non_zero_exit(scrapy_env, db):
    env = {k: v for k, v in scrapy_env.items() if k != "FIRECRAWL_API_URL"}
    k = add_keyword(db, "nourl", {"en-US": competitors("https://example.com/")})
    result = run_scrapy("crawl", "crawl_onpage", "-a", f"keyword_id={k}", env=env)
    assert result.returncode != 0
    assert "FIRECRAWL_API_URL is not set" in result.stderr and "Traceback" not in result.stderr
    assert len([ln for ln in result.stderr.splitlines() if "FIRECRAWL_API_URL" in ln]) == 1, result.stderr
    assert "crawlStatus" not in json.dumps(serp_of(db, k))


def test_firecrawl_down_fails_the_keyword_and_says_so(scrapy_env, db, sandbox):
    k = add_keyword(db, "down", {"en-US": competitors("https://example.com/")})
    env = onpage_env(scrapy_env, sandbox, FIRECRAWL_API_URL="http://127.0.0.1:9")
    result = crawl_onpage(env, "-a", f"keyword_id={k}")
    assert "Traceback" not in result.stderr
    assert f"keyword {k}: on-page crawl FAILED: Firecrawl is unreachable at http://127.0.0.1:9" in result.stderr
    assert "'finish_reason': 'onpage_failed'" in result.stderr
    # the keyword is a unit of the lifecycle (units/lifecycle.py), as a queued one: closed, and incomplete
    assert "'cannaspider/units_closed': 1," in result.stderr and "'cannaspider/units_incomplete': 1," in result.stderr
    assert result.returncode == EXIT_INCOMPLETE  # cron and Scrapyd see that the keyword was not crawled
    assert "crawlStatus" not in json.dumps(serp_of(db, k))


def test_the_api_key_is_sent_and_never_logged(scrapy_env, db, sandbox, tmp_path):
    fc = Firecrawl(sandbox)
    fc.state(reset=True, api_key="k-very-secret")
    try:
        k = add_keyword(db, "auth", {"en-US": competitors(fc.page("page-a.html"))})
        env = onpage_env(scrapy_env, sandbox, FIRECRAWL_API_KEY="k-very-secret")
        out = tmp_path / "o.json"
        result = crawl_onpage(env, "-a", f"keyword_id={k}", "-O", str(out), "-s", "LOG_LEVEL=DEBUG")
        assert "1 crawled, 0 blocked, 0 failed" in result.stderr, result.stderr[-3000:]
        assert "k-very-secret" not in result.stderr + result.stdout + out.read_text()
    finally:
        fc.state(reset=True)


def test_three_keywords_run_their_batch_jobs_at_once(scrapy_env, db, sandbox):
    """Each keyword waits ~3 s for a slow page; run serially they would take 9 s or more."""
    fc = Firecrawl(sandbox)
    fc.state(reset=True)
    fc.slow(3)
    ids = [
        add_keyword(db, f"kw{i}", {"en-US": competitors(fc.page(f"slow.html?k={i}"), fc.page("page-a.html"))})
        for i in range(3)
    ]
    result = crawl_onpage(onpage_env(scrapy_env, sandbox), "-a", "keyword_id=" + ",".join(map(str, ids)))
    assert result.returncode == 0 and result.stderr.count("2 crawled, 0 blocked, 0 failed") == 3, result.stderr[-3000:]
    # the three batch jobs ran at once: each was created before any of them finished (one by one,
    # each would start after the one before it ended); and the slow page was slow
    spans = fc.state()["job_spans"]
    assert len(spans) == 3 and all(finished is not None for _, finished in spans), spans
    assert max(created for created, _ in spans) < min(finished for _, finished in spans), spans
    elapsed = float(re.search(r"'elapsed_time_seconds': ([0-9.]+)", result.stderr).group(1))
    assert elapsed >= 3, elapsed


# -- the crawl_onpage queue ------------------------------------------------------------------------------------
def test_enqueued_keywords_are_drained_and_a_queued_job_is_reused(scrapy_env, db, sandbox, sql):
    fc = Firecrawl(sandbox)
    fc.state(reset=True)
    k = add_keyword(db, "queued", {"en-US": competitors(fc.page("page-a.html"), fc.page("blocked.html"))})
    env = onpage_env(scrapy_env, sandbox)
    first = run_scrapy("enqueue", "crawl_onpage", "--keyword-id", str(k), env=env)
    again = run_scrapy("enqueue", "crawl_onpage", "--keyword-id", str(k), env=env)
    assert first.returncode == again.returncode == 0, first.stderr + again.stderr
    assert first.stdout.startswith("queued task") and again.stdout.startswith("already queued: task")
    assert run_scrapy("enqueue", "crawl_onpage", "--keyword-id", "999", env=env).returncode == 2
    result = crawl_onpage(env)
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr[-3000:]
    [(status, payload, res)] = sql("SELECT status, payload, result FROM worker_tasks")
    assert status == "completed" and payload == {"keyword_id": k}
    assert res["crawled"] == 1 and res["blocked"] == 1 and res["failed"] == 0 and res["pages"] == 2
    assert [c["crawlStatus"] for c in serp_of(db, k)["en-US"]["competitors"]] == ["ok", "blocked"]


def test_firecrawl_down_fails_the_queued_job_for_a_retry(scrapy_env, db, sandbox, sql):
    k = add_keyword(db, "down", {"en-US": competitors("https://example.com/")})
    run_scrapy("enqueue", "crawl_onpage", "--keyword-id", str(k), env=scrapy_env)
    env = onpage_env(scrapy_env, sandbox, FIRECRAWL_API_URL="http://127.0.0.1:9")
    result = crawl_onpage(env)
    assert result.returncode == EXIT_INCOMPLETE and "Traceback" not in result.stderr, result.stderr[-3000:]
    [(status, attempts, error)] = sql("SELECT status, attempts, error FROM worker_tasks")
    assert (status, attempts) == ("pending", 1) and "Firecrawl is unreachable" in error
    assert result.stderr.strip().splitlines()[-1] == (
        "error: 1 of the 1 crawl_onpage task(s) it took not completed (the crawl ended: finished)"
    )


def test_without_firecrawl_url_queued_jobs_fail_with_the_reason(scrapy_env, db, sql):
    """A node without FIRECRAWL_API_URL used to refuse to start, leaving the task pending for the
    dispatcher to start it again forever: the draining spider fails what it claims, saying why."""
    k = add_keyword(db, "nourl-queued", {"en-US": competitors("https://example.com/")})
    env = {key: v for key, v in scrapy_env.items() if key != "FIRECRAWL_API_URL"}
    assert run_scrapy("enqueue", "crawl_onpage", "--keyword-id", str(k), env=env).returncode == 0
    result = crawl_onpage(env, "-s", "TASK_RETRY_BACKOFF_S=3600")
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert result.stderr.strip().splitlines()[-1] == f"error: {MISSING_URL}"
    [(status, attempts, error, due)] = sql(
        "SELECT status, attempts, error, run_after > now() + interval '20 minutes' FROM worker_tasks"
    )
    assert (status, attempts, due) == ("pending", 1, True) and error == f"attempt 1/5: {MISSING_URL}"


def test_a_hostile_firecrawl_fails_the_job_and_the_drain_goes_on(scrapy_env, db, sandbox, sql):
    """Every answer nested 5000 levels deep: json.loads raises RecursionError (not ValueError) in
    the job; the task fails with it, its attempt counted, and the drain ends."""
    fc = Firecrawl(sandbox)
    fc.state(reset=True, hostile=True)
    try:
        k = add_keyword(db, "hostile", {"en-US": competitors(fc.page("page-a.html"))})
        env = onpage_env(scrapy_env, sandbox)
        assert run_scrapy("enqueue", "crawl_onpage", "--keyword-id", str(k), env=env).returncode == 0
        result = crawl_onpage(env, "-s", "TASK_RETRY_BACKOFF_S=3600")
    finally:
        fc.state(reset=True)
    assert result.returncode == EXIT_INCOMPLETE, result.stderr[-3000:]
    [(status, attempts, error)] = sql("SELECT status, attempts, error FROM worker_tasks")
    assert (status, attempts) == ("pending", 1) and "RecursionError" in error, error
    assert "crawlStatus" not in json.dumps(serp_of(db, k))


def test_our_page_is_crawled_compared_and_the_progress_recorded(scrapy_env, db, sandbox, sql, tmp_path):
    fc = Firecrawl(sandbox)
    fc.state(reset=True)
    k = add_keyword(db, "widgets", {"en-US": competitors(fc.page("page-a.html"), fc.page("page-b.html"))})
    sql(
        "INSERT INTO keyword_own_pages (keyword_id, locale, url) VALUES (%s, 'en-US', %s)",
        (k, fc.page("en-guide.html")),
    )
    out = tmp_path / "onpage.json"
    result = crawl_onpage(onpage_env(scrapy_env, sandbox), "-a", f"keyword_id={k}", "-O", str(out))
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"keyword {k} ('widgets'): 3 crawled, 0 blocked, 0 failed" in result.stderr
    items = {i["url"].rsplit("/", 1)[-1]: i for i in json.loads(out.read_text())}
    assert items["en-guide.html"]["own_page"] is True and items["page-a.html"]["own_page"] is False
    [(crawl, gap)] = sql("SELECT crawl, gap FROM keyword_own_pages")
    assert crawl["crawlStatus"] == "ok" and crawl["corpusId"] == items["en-guide.html"]["corpus_id"]
    assert gap["available"] is True and "widget" in {t["lemma"] for t in gap["missing"]}
    assert sql(
        "SELECT state, pages_done, pages_total, locales_done, crawled, blocked, failed FROM onpage_progress"
    ) == [("done", 3, 3, 1, 3, 0, 0)]
