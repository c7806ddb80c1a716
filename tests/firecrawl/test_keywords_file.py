"""`scrapy keywords import FILE.json`: validation with one-line errors, idempotent import by
keyword + locale, crawl fields carried over for URLs that stay."""

from __future__ import annotations

import json

import psycopg
import pytest

from cannaspider.firecrawl import keywords_file
from tests.firecrawl.conftest import serp_of
from tests.helpers import run_scrapy

GOOD = [
    {
        "keyword": "  CBD   oil ",
        "locale": "en-us",
        "fetchedAt": "2026-11-29",
        "competitors": [
            {"url": "https://a.example/cbd", "position": 1, "title": "A"},
            {"url": "https://b.example/", "position": 2, "title": "B", "snippet": "kept"},
        ],
    },
    {"keyword": "cbd oil", "locale": "fr-FR", "competitors": [{"url": "https://c.example/huile", "position": 1}]},
    {"keyword": "gummies", "locale": "en-US", "competitors": []},
]


def write(tmp_path, data, name="kw.json"):
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def test_valid_file_is_normalized():
    snaps, problems = keywords_file.validate(GOOD)
    assert problems == []
    assert [(s.keyword, s.locale) for s in snaps] == [("CBD oil", "en-US"), ("cbd oil", "fr-FR"), ("gummies", "en-US")]
    assert snaps[0].value == {"fetchedAt": "2026-11-29", "competitors": GOOD[0]["competitors"]}
    assert keywords_file.validate({"keywords": GOOD})[1] == []


@pytest.mark.parametrize(
    "data, problem",
    [
        ({"a": 1}, 'the file must hold a JSON array of {"keyword", "locale", "competitors"} objects'),
        (["x"], "entry 1: must be an object, got str"),
        ([{"keyword": "", "locale": "en-US", "competitors": []}], "entry 1 (''): keyword: must be a non-empty string"),
        ([{"keyword": "k", "locale": "english", "competitors": []}], "locale: must look like 'fr-FR'"),
        ([{"keyword": "k", "locale": "en-US"}], "entry 1 ('k'): competitors: must be an array, got NoneType"),
        (
            [{"keyword": "k", "locale": "en-US", "competitors": [{"url": "ftp://x.example/"}]}],
            "entry 1 ('k'): competitors[0].url: must be an absolute http(s) URL, got 'ftp://x.example/'",
        ),
        (
            [{"keyword": "k", "locale": "en-US", "competitors": [{"url": "https://x.example/", "position": 0}]}],
            "competitors[0].position: must be an integer >= 1, got 0",
        ),
        (
            [{"keyword": "k", "locale": "en-US", "competitors": [{"url": "https://x.example/", "crawlStatus": "meh"}]}],
            "competitors[0].crawlStatus: must be one of ok, blocked, timeout, empty, fetch_error, got 'meh'",
        ),
        (
            [
                {"keyword": "K", "locale": "en-US", "competitors": []},
                {"keyword": "k ", "locale": "en-us", "competitors": []},
            ],
            "entry 2 ('k '): keyword 'k ' in locale en-US is already entry 1",
        ),
    ],
)
def test_problems(data, problem):
    problems = keywords_file.validate(data)[1]
    assert problems and problem in problems[0], problems


def test_load_reports_one_line_and_counts_the_rest(tmp_path):
    bad = [{"keyword": "k", "locale": "xx-yy-zz", "competitors": [{"url": 1}, {"url": "https://ok.example/"}, 3]}]
    with pytest.raises(keywords_file.KeywordsFileError) as exc:
        keywords_file.load(write(tmp_path, bad))
    assert "\n" not in str(exc.value) and str(exc.value).endswith("(and 2 more problems; nothing imported)")
    with pytest.raises(keywords_file.KeywordsFileError, match=r"is not valid JSON: .* at line 1 column 2"):
        keywords_file.load(write(tmp_path, "[oops"))
    with pytest.raises(keywords_file.KeywordsFileError, match="cannot read"):
        keywords_file.load(tmp_path / "missing.json")


def test_import_is_idempotent_and_keeps_crawl_fields_of_urls_that_stay(db, sql):
    snaps = keywords_file.validate(GOOD)[0]
    with psycopg.connect(db) as conn:
        first = keywords_file.import_snapshots(conn, snaps)
        again = keywords_file.import_snapshots(conn, snaps)
    assert (first.keywords_created, first.snapshots_changed) == (2, 3)
    assert (again.keywords_created, again.snapshots_changed) == (0, 0)
    (k,) = [r[0] for r in sql("SELECT id FROM keywords WHERE keyword = 'CBD oil'")]
    assert set(serp_of(db, k)) == {"en-US", "fr-FR"}
    # a crawl happened; then a new SERP snapshot drops b, keeps a (moved), adds d
    sql(
        "UPDATE keywords SET serp = jsonb_set(serp, '{en-US,competitors,0}', serp #> '{en-US,competitors,0}' "
        '|| \'{"crawlStatus": "ok", "crawledAt": "2026-11-30T00:00:00Z", "onpage": {"wordCount": 5}}\')'
        " WHERE id = %s",
        (k,),
    )
    new = [
        {
            "keyword": "cbd OIL",
            "locale": "en-US",
            "competitors": [
                {"url": "https://d.example/", "position": 1},
                {"url": "https://a.example/cbd", "position": 2, "title": "A2"},
            ],
        }
    ]
    with psycopg.connect(db) as conn:
        report = keywords_file.import_snapshots(conn, keywords_file.validate(new)[0])
    assert (report.keywords_created, report.snapshots_changed) == (0, 1)
    serp = serp_of(db, k)
    assert serp["en-US"] == {
        "competitors": [
            {"url": "https://d.example/", "position": 1},
            {
                "url": "https://a.example/cbd",
                "position": 2,
                "title": "A2",
                "crawlStatus": "ok",
                "crawledAt": "2026-11-30T00:00:00Z",
                "onpage": {"wordCount": 5},
            },
        ]
    }  # fetchedAt went with the old snapshot: a snapshot is replaced whole
    assert serp["fr-FR"] == {"competitors": [{"url": "https://c.example/huile", "position": 1}]}
    assert sql("SELECT count(*) FROM keywords")[0][0] == 2


@pytest.mark.integration
def test_command(scrapy_env, db, tmp_path):
    ok = run_scrapy("keywords", "import", str(write(tmp_path, GOOD)), env=scrapy_env)
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.strip() == "3 snapshot(s) read: 2 new keyword(s), 3 snapshot(s) written, 0 unchanged"
    again = run_scrapy("keywords", "import", str(write(tmp_path, GOOD)), env=scrapy_env)
    assert again.stdout.strip().endswith("0 snapshot(s) written, 3 unchanged")
    listed = run_scrapy("keywords", "list", env=scrapy_env)
    assert "CBD oil  [en-US: 2 competitor(s), not crawled 2]" in listed.stdout
    ours = [{**GOOD[2], "ownPage": "https://ours.example/gummies"}]
    set_own = run_scrapy("keywords", "import", str(write(tmp_path, ours, "own.json")), env=scrapy_env)
    assert set_own.stdout.strip().endswith("1 unchanged; 1 own page(s) set or removed"), set_own.stdout
    listed = run_scrapy("keywords", "list", env=scrapy_env)
    assert (
        "gummies  [en-US: 0 competitor(s), none; our page https://ours.example/gummies (not crawled)]" in listed.stdout
    )
    bad = run_scrapy("keywords", "import", str(write(tmp_path, [{"keyword": 3}], "bad.json")), env=scrapy_env)
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr.strip().splitlines() == [bad.stderr.strip()]  # one line
    assert bad.stderr.startswith("error: ") and "entry 1: keyword: must be a non-empty string, got 3" in bad.stderr
    usage = run_scrapy("keywords", "import", env=scrapy_env)
    assert usage.returncode == 2 and "usage: scrapy keywords import FILE.json" in usage.stderr


def test_own_page_is_set_kept_and_removed_by_the_file(db, sql):
    entry = {"keyword": "cbd oil", "locale": "fr-FR", "competitors": [], "ownPage": " https://ours.example/huile "}
    snaps, problems = keywords_file.validate([entry])
    assert problems == [] and snaps[0].own_page == "https://ours.example/huile" and "ownPage" not in snaps[0].value
    with psycopg.connect(db) as conn:
        first = keywords_file.import_snapshots(conn, snaps)
        again = keywords_file.import_snapshots(conn, snaps)
    assert (first.own_pages_changed, again.own_pages_changed) == (1, 0)
    assert sql("SELECT locale, url FROM keyword_own_pages") == [("fr-FR", "https://ours.example/huile")]
    # the field left out leaves the page set (by the API, say) alone; null removes it
    with psycopg.connect(db) as conn:
        without = {k: v for k, v in entry.items() if k != "ownPage"}
        keywords_file.import_snapshots(conn, keywords_file.validate([without])[0])
        conn.commit()
        assert sql("SELECT count(*) FROM keyword_own_pages") == [(1,)]
        removed = keywords_file.import_snapshots(conn, keywords_file.validate([{**entry, "ownPage": None}])[0])
    assert removed.own_pages_changed == 1 and sql("SELECT count(*) FROM keyword_own_pages") == [(0,)]


def test_a_bad_own_page_is_a_problem():
    problems = keywords_file.validate([{"keyword": "x", "locale": "fr", "competitors": [], "ownPage": "/huile"}])[1]
    assert problems == ["entry 1 ('x'): ownPage: must be an absolute http(s) URL, got '/huile'"]
