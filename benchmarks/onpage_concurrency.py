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
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import subprocess
import sys
import urllib.request
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.ingest import bench_database  # noqa: E402
from sandbox.catalog import CatalogConfig  # noqa: E402
from sandbox.server import Sandbox  # noqa: E402

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keywords", type=int, nargs="+", default=[3])
    parser.add_argument("--slow", type=float, default=3.0, help="seconds the slow competitor takes")
    parser.add_argument("--poll", type=float, default=3.0, help="FIRECRAWL_POLL_INTERVAL_S")
    args = parser.parse_args()
    db_url = bench_database()
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
