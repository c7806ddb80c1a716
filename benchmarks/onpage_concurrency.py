"""On-page crawl concurrency: N keyword jobs in one `scrapy crawl crawl_onpage` process against
the sandbox's Firecrawl, compared with one keyword alone and with the N run one after another
(a serial worker, one keyword at a time).

    python benchmarks/onpage_concurrency.py                    # 3 keywords, slow page 3 s, poll 3 s
    python benchmarks/onpage_concurrency.py --keywords 3 24 --slow 3 --poll 1

Each keyword has two locales of five competitors, one of which answers after --slow seconds.
The figures are the crawls' own durations (Scrapy's elapsed_time_seconds, start-up excluded).
The sandbox's Firecrawl, like a real worker process, renders 8 pages at a time: past 4 keywords
the floor is Firecrawl's queue (ceil(2N / 8) × slow: two slow pages a keyword), not the spider.
With a 3 s poll, a batch is seen done up to 3 s after it is: compare with --poll 0.5.

Before the crawls, the cost of reading the pages, in this process: a SERP of ten rendered pages
(the captured Firecrawl documents, the sandbox's article pages and full-size article pages with
a site frame: menus, cookie banner, sidebar, footer, scripts, JSON-LD, up to 130 KB of HTML),
classified the way the job did before the corpus (challenge check + on-page parser: the baseline)
and the way it does now (plus the corpus and the locale's semantic profile). It prints the time
added per page; --parse-only stops there.

    python benchmarks/onpage_concurrency.py --parse-only
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.ingest import bench_database  # noqa: E402
from cannaspider.firecrawl import classify, onpage, profile  # noqa: E402
from cannaspider.firecrawl.batch import PageOutcome  # noqa: E402
from cannaspider.firecrawl.job import OnpageConfig  # noqa: E402
from cannaspider.project_settings import project_settings  # noqa: E402
from sandbox.catalog import CatalogConfig  # noqa: E402
from sandbox.server import Sandbox  # noqa: E402
from sandbox.websites import ARTICLES, COMPETITOR_PAGES  # noqa: E402

PAGES = ("page-a.html", "page-b.html", "blocked.html", "incapsula.html")


def post(url: str, body: dict) -> None:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"content-type": "application/json"})
    urllib.request.urlopen(req, timeout=30).read()


def seed(db_url: str, base: str, n: int, tag: str) -> list[int]:
    ids = []
    with psycopg.connect(db_url, autocommit=True) as conn:
        for i in range(n):
            serp = {
                locale: {
                    "competitors": [
                        {"url": f"{base}/competitors/{name}?kw={tag}{i}&l={locale}", "position": p}
                        for p, name in enumerate(("slow.html", *PAGES), 1)
                    ]
                }
                for locale in ("en-US", "fr-FR")
            }
            ids.append(
                conn.execute(
                    "INSERT INTO keywords (keyword, serp) VALUES (%s, %s::jsonb) RETURNING id",
                    (f"bench {tag} {i}", json.dumps(serp)),
                ).fetchone()[0]
            )
    return ids


def crawl(env: dict, ids: list[int], poll: float) -> float:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "scrapy",
            "crawl",
            "crawl_onpage",
            "-a",
            "keyword_id=" + ",".join(map(str, ids)),
            "-s",
            f"FIRECRAWL_POLL_INTERVAL_S={poll}",
            "-s",
            "LOG_LEVEL=INFO",
        ],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    done = result.stderr.count(" crawled, ")
    if result.returncode != 0 or done != len(ids):
        raise SystemExit(f"crawl failed ({done}/{len(ids)} keywords done):\n{result.stderr[-3000:]}")
    return float(re.search(r"'elapsed_time_seconds': ([0-9.]+)", result.stderr).group(1))


def full_size_page(lang: str, seed: int) -> str:
    """A competitor article as big as real ones: the site frame around ~2,000 words of text."""
    a = ARTICLES[lang]
    menu = "".join(f'<li><a href="/c/{i}">{a.menu[i % 4]} {i}</a></li>' for i in range(150))
    body = []
    for i in range(40):
        heading, text = a.sections[(i + seed) % 3]
        body.append(f"<h{2 + i % 2}>{heading} ({i})</h{2 + i % 2}><p>{text} {text}</p>")
        body.append(f'<figure><img src="/img/{i}.jpg" alt="{a.alt} {i}"><figcaption>{a.alt}</figcaption></figure>')
    footer = "".join(f'<a href="/f/{i}">{a.footer[:20]} {i}</a> ' for i in range(80))
    script = "<script>" + "var x=1;" * 6000 + "</script>"
    return (
        f'<!DOCTYPE html><html lang="{lang}"><head><title>{a.h1} #{seed}</title>{script}</head><body>'
        f'<header><nav><ul>{menu}</ul></nav></header><div class="cookie-banner"><p>{a.cookies}</p></div>'
        f"<main><article><h1>{a.h1}</h1>{''.join(body)}</article></main>"
        f"<aside><h3>Related</h3><ul>{menu[:3000]}</ul></aside>{COMPETITOR_PAGES[f'{lang}-guide.html'][1][-600:]}"
        f"<footer>{footer}</footer>{script}</body></html>"
    )


def serp_pages() -> list[PageOutcome]:
    captured = json.loads((ROOT / "tests" / "fixtures" / "firecrawl-v2" / "03_get_completed.json").read_text())
    docs = [(d["metadata"]["sourceURL"], d["rawHtml"]) for d in captured["data"]]
    docs += [(f"https://guide.example/{n}", COMPETITOR_PAGES[n][1]) for n in ("fr-guide.html", "en-guide.html")]
    docs += [(f"https://big{i}.example/", full_size_page("fr" if i % 2 else "en", i)) for i in range(6)]
    return [PageOutcome(url, doc={"rawHtml": html, "metadata": {"statusCode": 200}}) for url, html in docs]


def baseline(page: PageOutcome) -> None:
    """What the job did with a rendered page before the corpus: challenge check + on-page parser."""
    assert page.doc is not None
    html = page.doc["rawHtml"]
    sel = onpage.selector(html)
    classify.detect_challenge(sel)
    onpage.parse(html, page.url, sel)


def with_corpus(pages: list[PageOutcome]) -> None:
    config = OnpageConfig.from_settings(project_settings())
    verdicts = {p.url: classify.classify(p, min_words=config.min_words, limits=config.corpus) for p in pages}
    corpora = {
        u: profile.ProfilePage(u, v.corpus.lang, v.corpus.title, v.corpus.text, [h.text for h in v.corpus.headings])
        for u, v in verdicts.items()
        if v.corpus is not None
    }
    competitors = [{"url": p.url, "crawlStatus": "ok"} for p in pages]
    profile.compute(
        "en-US", competitors, corpora, min_pages=config.profile_min_pages, max_terms=config.profile_max_terms
    )


def parse_cost(repeats: int) -> None:
    """CPU time (this process's: the machine is shared, and other processes' load inflates wall
    time without costing us anything) and wall time, per page, median of the rounds."""
    pages = serp_pages()
    with_corpus(pages)  # first use: trafilatura's and the stop lists' one-time loading
    runs: dict[str, list[tuple[float, float]]] = {"base": [], "full": []}
    for _ in range(repeats):  # interleaved, so that both see the same machine load
        for name, work in (("base", lambda: [baseline(p) for p in pages]), ("full", lambda: with_corpus(pages))):
            cpu, wall = time.process_time(), time.perf_counter()
            work()
            runs[name].append(((time.process_time() - cpu) / len(pages), (time.perf_counter() - wall) / len(pages)))

    def ms(name: str, i: int) -> float:
        return statistics.median(r[i] for r in runs[name]) * 1000

    sizes = sorted(len(p.doc["rawHtml"]) // 1000 for p in pages if p.doc)
    print(f"parsing a SERP of {len(pages)} rendered pages ({sizes[0]}-{sizes[-1]} KB of HTML), median of {repeats}:")
    print("                                               CPU ms/page   wall ms/page")
    print(f"  baseline (challenge check + on-page parser): {ms('base', 0):8.1f}      {ms('base', 1):8.1f}")
    print(f"  with the corpus and the semantic profile:    {ms('full', 0):8.1f}      {ms('full', 1):8.1f}")
    print(
        f"  added by the corpus and the profile:         {ms('full', 0) - ms('base', 0):8.1f}      "
        f"{ms('full', 1) - ms('base', 1):8.1f}   (budget 50 ms; {ms('full', 0) / ms('base', 0):.2f}x the CPU)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keywords", type=int, nargs="+", default=[3])
    parser.add_argument("--slow", type=float, default=3.0, help="seconds the slow competitor takes")
    parser.add_argument("--poll", type=float, default=3.0, help="FIRECRAWL_POLL_INTERVAL_S")
    parser.add_argument("--parse-repeats", type=int, default=15, help="rounds of the parsing measurement")
    parser.add_argument("--parse-only", action="store_true", help="measure the parsing cost only")
    args = parser.parse_args()
    parse_cost(args.parse_repeats)
    if args.parse_only:
        return
    db_url = bench_database("cannaspider_bench_onpage")
    with Sandbox(CatalogConfig(), proxy=False) as sandbox:
        urls = sandbox.urls
        post(urls.base + "/_sandbox/slow", {"seconds": args.slow})
        env = {
            **os.environ,
            "DATABASE_URL": db_url,
            "FIRECRAWL_API_URL": urls.firecrawl,
            "CANNASPIDER_FEED_DIR": str(ROOT / ".data" / "bench-feeds"),
        }
        one = crawl(env, seed(db_url, urls.base, 1, "single"), args.poll)
        print(f"slow page {args.slow:g} s, poll every {args.poll:g} s, 2 locales x 5 competitors per keyword")
        print(f"  1 keyword alone: {one:6.2f} s")
        for n in args.keywords:
            together = crawl(env, seed(db_url, urls.base, n, f"c{n}-"), args.poll)
            serial = sum(crawl(env, [k], args.poll) for k in seed(db_url, urls.base, n, f"s{n}-")) if n <= 5 else None
            floor = math.ceil(2 * n / 8) * args.slow  # two slow pages per keyword
            line = f"  {n:>3} keywords at once: {together:6.2f} s ({together / one:4.2f}x one keyword"
            line += f"; Firecrawl's 8-worker floor {floor:g} s)"
            if serial is not None:
                line += f"; one after another: {serial:6.2f} s"
            print(line)


if __name__ == "__main__":
    main()
