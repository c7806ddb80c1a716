"""Every benchmark runs at HEAD: each script's smallest configuration, as a subprocess against the
test database server and the sandbox, must exit 0 and print its figures.

A benchmark is a script run by hand, so nothing else would notice when a change breaks one (two
did: `task_queue_e2e.py` and `stealth.py` called `bench_database()` without the name it had come
to need, `market.py` built the service without its pool size, and `stealth.py`'s "off" variant
replaced the project's whole middleware dicts, so no store's crawl ever closed). The figures at
this scale mean nothing; the point is that the code path runs end to end.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BENCHMARKS = ROOT / "benchmarks"

# (a test's name, its runs in turn: script, arguments, a line the run must print). Runs that
# share a database name are one test (market.py builds history.py's); the others spread over the
# suite's workers (ingest.py's five modes take separate databases for that).
ING = ["--stores", "1", "--products", "5", "--crawls", "1", "--repeats", "1"]
TIERS = ["--stores", "3", "--products", "10", "--crawls", "2", "--months", "3", "--hot", "1", "--samples", "5"]
CASES: list[tuple[str, list[tuple[str, list[str], str]]]] = [
    ("conversion", [("conversion.py", ["--rounds", "1", "--images", "4"], r"Pillow")]),
    (
        "analyst",
        [
            (
                "analyst.py",
                ["--stores", "3", "--products", "10", "--crawls", "2", "--samples", "5"],
                r"/api/specials .*p95",
            )
        ],
    ),
    (
        "history+market",
        [
            (
                "history.py",
                ["--stores", "3", "--products", "10", "--crawls", "2", "--samples", "5", "--old-layout"],
                "p95",
            ),
            (
                "market.py",
                ["--stores", "3", "--products", "10", "--crawls", "2", "--samples", "5"],
                r"/api/market .*p95",
            ),
        ],
    ),
    (
        "images",
        [
            (
                "images.py",
                ["--sources", "3", "--side", "200", "--requests", "10", "--cold-variants", "3"]
                + ["--concurrency", "2", "--threads", "1", "--no-sharp"],
                r"/img cached .*x cold",
            )
        ],
    ),
    (
        "history-tiers",
        [
            ("history_tiers.py", TIERS, r"cold \+ 1 hot .*p95 .*answers identical"),
            # one month archived, one copied from its file (the full scale's affordable mode)
            (
                "history_tiers.py",
                ["--clone-months", *TIERS],
                r"cold \(1 copied\) \+ 1 hot .*p95 .*answers identical .* copied months' \d+ rows",
            ),
        ],
    ),
    (
        "export",
        [("export.py", ["--stores", "2", "--products", "10", "--crawls", "2"], r"snapshots, both months .* rows/s")],
    ),
    ("ingest", [("ingest.py", ING, r"full pipeline")]),
    ("ingest-market-cost", [("ingest.py", [*ING, "--market-cost", "--database", "cannaspider_bench_mc"], "without")]),
    ("ingest-converters", [("ingest.py", [*ING, "--converters", "--database", "cannaspider_bench_cv"], "Pillow")]),
    (
        "ingest-metrics-cost",
        [("ingest.py", [*ING, "--metrics-cost", "--database", "cannaspider_bench_mx"], "with metrics / without")],
    ),
    (
        "ingest-platforms",
        [("ingest.py", [*ING, "--platforms", "--database", "cannaspider_bench_pl"], "Jane / Dutchie")],
    ),
    ("matching", [("matching.py", ["--stores", "1", "--products", "20"], r"across platforms")]),
    ("normalize", [("normalize.py", ["--stores", "2", "--products", "10", "--repeats", "1"], "products")]),
    (
        "onpage_concurrency",
        [
            (
                "onpage_concurrency.py",
                ["--keywords", "1", "--slow", "0.2", "--poll", "0.2", "--parse-repeats", "1"],
                "alone",
            )
        ],
    ),
    (
        "proxy_bytes",
        [("proxy_bytes.py", ["--stores", "1", "--products", "5"], r"resync through the proxy / brotli minimum")],
    ),
    ("stealth", [("stealth.py", ["--stores", "2", "--products", "10", "--repeats", "1"], "TLS impersonated / off")]),
    (
        "drain_soak",
        [
            (
                "drain_soak.py",
                ["--minutes", "0.3", "--stores", "2", "--products", "5", "--every", "5", "--sample", "2"],
                "RSS",
            )
        ],
    ),
    (
        "image_sources",
        [("image_sources.py", ["--stores", "2", "--products", "3"], r"repeated image downloads across stores: 0")],
    ),
    ("img_worst", [("img_worst.py", ["--sides", "200"], "worst")]),
    (
        "onpage_terms",
        [
            ("onpage_terms.py", ["--top", "5"], r"widget: widgets / widget"),
            # a saved page goes through the job's classifier: a challenge page joins no SERP
            ("onpage_terms.py", ["--page", "sandbox/cloudflare_403.html", "--pages-only"], r"403\.html: blocked"),
        ],
    ),
    ("langid_short_pages", [("langid_short_pages.py", [], r"language\.detect \(the job's\) .* 0 wrong")]),
    ("img_contention", [("img_contention.py", ["--heavy", "1"], "thumbnail: HTTP 200")]),
    ("convert_budget", [("convert_budget.py", ["--images", "2", "--budget", "50000000"], "peak RSS")]),
    ("task_queue", [("task_queue.py", ["--tasks", "40", "--baseline-tasks", "10", "--processes", "1"], "tasks/s")]),
    ("task_queue_e2e", [("task_queue_e2e.py", ["--stores", "2", "--products", "10", "--repeats", "1"], "overhead")]),
    ("startup", [("startup.py", ["--runs", "1", "--warmup", "0"], r"scrapy list .* x import scrapy")]),
]
AS_MODULE = {"normalize.py"}  # run as a module: it imports the package by its dotted name


def scripts() -> list[str]:
    return sorted(p.name for p in BENCHMARKS.glob("*.py") if 'if __name__ == "__main__"' in p.read_text())


def test_every_benchmark_script_has_a_smallest_configuration() -> None:
    covered = {script for _, runs in CASES for script, _, _ in runs}
    assert scripts() == sorted(covered), "a benchmark without a run in CASES is never checked"


@pytest.mark.integration
@pytest.mark.parametrize("runs", [runs for _, runs in CASES], ids=[name for name, _ in CASES])
def test_benchmark_runs_at_its_smallest(runs: list[tuple[str, list[str], str]], admin_url: str, tmp_path: Path) -> None:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("SCRAPY_")},
        "DATABASE_URL": admin_url,  # each benchmark makes (and drops) databases of its own there
        "CANNASPIDER_DATA_DIR": str(tmp_path / "data"),
        "CANNASPIDER_FEED_DIR": str(tmp_path / "feeds"),
        "PYTHONPATH": str(ROOT),
    }
    for script, args, expected in runs:
        command = [sys.executable, "-m", f"benchmarks.{script[:-3]}"]
        if script not in AS_MODULE:
            command = [sys.executable, str(BENCHMARKS / script)]
        result = subprocess.run([*command, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=540)
        output = result.stdout + result.stderr
        assert result.returncode == 0, f"{script} {' '.join(args)} exited {result.returncode}:\n{output[-3000:]}"
        assert re.search(expected, result.stdout), f"{script} printed no {expected!r}:\n{result.stdout[-3000:]}"
