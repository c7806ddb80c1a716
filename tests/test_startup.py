"""What a `scrapy` process imports: only what its command uses.

Scrapy imports every module of COMMANDS_MODULE, every `scrapy.commands` entry point (the sandbox's
commands) and every spider module on each start, whatever the command; a crawl also imports the
classes of its settings' components. A heavy package one command or spider needs (pyarrow for the
exports, the on-page parser's trafilatura and extruct, Playwright for the browser pages, the
sandbox's servers) is imported where that command or spider uses it, never at the top of a module
every process imports: each `scrapy crawl`, each Scrapyd job and each of the suite's crawls would
pay for it (docs/architecture.md, "Start-up").

Each run is `scrapy.cmdline.execute` in a fresh interpreter that writes the names in sys.modules
when it exits; the test reads them. No timing: benchmarks/startup.py measures the start-up.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import ROOT, add_store, scrapy_environment

pytestmark = pytest.mark.integration

# `scrapy ARGS…` in this interpreter; at exit, sorted(sys.modules) as JSON to the file argv[1] names
PROBE = """
import atexit, json, sys

def write_modules(path=sys.argv[1]):
    with open(path, "w", encoding="utf-8") as out:
        json.dump(sorted(sys.modules), out)

atexit.register(write_modules)
sys.argv = ["scrapy", *sys.argv[2:]]
from scrapy.cmdline import execute
execute()
"""

# what no start imports: the history's cold tier and the exports (pyarrow, its numpy, DuckDB), the
# on-page parser (firecrawl/classify.py: trafilatura, extruct and its mf2py and bs4, simplemma),
# the browser pages' handler (scrapy-playwright, Playwright), the HTTP service, the sandbox's
# servers and the proxy re-prober (`scrapy schedule`)
NEVER_AT_START = (
    "pyarrow",
    "numpy",
    "duckdb",
    "trafilatura",
    "extruct",
    "mf2py",
    "bs4",
    "simplemma",
    "scrapy_playwright",
    "playwright",
    "fastapi",
    "cannaspider.web",
    "cannaspider.history.archive",
    "cannaspider.history.reader",
    "cannaspider.analytics.exports",
    "cannaspider.firecrawl.classify",
    "cannaspider.firecrawl.job",
    "cannaspider.firecrawl.keywords_file",
    "cannaspider.stealth.browser_handler",
    "cannaspider.stealth.probe",
    "sandbox.server",
)
# and what a command that starts no crawl has no use for: the crawl's download handler
# (curl_cffi), aiohttp (webhooks' posting, the sandbox; a crawl imports it with Scrapy's
# RemoteControl extension), the crawl's health (Spidermon, jsonschema)
NOT_WITHOUT_A_CRAWL = ("curl_cffi", "aiohttp", "spidermon", "jsonschema", "cannaspider.stealth.tls")


def imported(args: list[str], env: dict[str, str], tmp_path: Path) -> tuple[subprocess.CompletedProcess, set[str]]:
    out = tmp_path / "modules.json"
    result = subprocess.run(
        [sys.executable, "-c", PROBE, str(out), *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert out.exists(), result.stderr[-3000:]
    return result, set(json.loads(out.read_text()))


def found(modules: set[str], names: tuple[str, ...]) -> list[str]:
    """The names (a package or a module) of which a module was imported."""
    return [n for n in names if any(m == n or m.startswith(n + ".") for m in modules)]


def test_scrapy_list_imports_no_command_or_spider_dependency(tmp_path):
    # as a user's shell runs it (no SCRAPY_* variable: tests/helpers.py, scrapy_environment)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCRAPY_")}
    env["CANNASPIDER_DATA_DIR"] = str(tmp_path / "data")
    result, modules = imported(["list"], env, tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "product_resync" in result.stdout.split()  # every spider module was imported
    assert "cannaspider.spiders.crawl_onpage" in modules and "sandbox.commands.demo" in modules
    assert found(modules, NEVER_AT_START + NOT_WITHOUT_A_CRAWL) == []


def test_a_product_crawl_imports_none_of_the_other_commands_dependencies(db, sandbox, sandbox_proxy, tmp_path):
    store = sandbox.stores("AZ")[0]
    d = add_store(db, store)
    env = scrapy_environment(db, sandbox.urls, tmp_path)
    result, modules = imported(["crawl", "product_resync", "-a", f"dispensary_id={d}"], env, tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    with_products = "'item_scraped_count'" in result.stderr
    assert with_products, result.stderr[-3000:]  # the whole crawl ran: a store's menu written
    assert "cannaspider.stealth.tls" in modules  # its download handler
    assert found(modules, NEVER_AT_START) == []
