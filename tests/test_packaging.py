"""What the project installs and ships: the development environment's one known `pip check` line,
a Scrapyd node's runtime-only environment (built from the lock, crawling the sandbox), the egg
`scrapyd-deploy` builds (no stand-in in it), zstd answers without the zstandard package."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from importlib.util import find_spec
from pathlib import Path

import backports.zstd
import pytest
from scrapy.downloadermiddlewares.httpcompression import HttpCompressionMiddleware
from scrapy.http import HtmlResponse, Request
from scrapy.utils.test import get_crawler

from tests.helpers import ROOT, add_store, products_of, runs_of

# test, lint and type-check tools, and the sandbox's own dependencies: none belongs on a node
NOT_ON_A_NODE = (
    "pytest",
    "xdist",
    "ruff",
    "mypy",
    "moto",
    "flask",
    "pyftpdlib",
    "gcp_storage_emulator",
    "schemathesis",
)


@pytest.mark.integration
def test_pip_check_reports_only_the_typing_and_jstyleson_declarations():
    # scrapy-rotating-proxies declares the PyPI `typing` backport, and extruct jstyleson (a source
    # archive only; cannaspider/firecrawl/structured.py stands in): the lock excludes both on purpose
    result = subprocess.run([sys.executable, "-m", "pip", "check"], capture_output=True, text=True)
    assert result.stdout.strip().splitlines() == [
        "extruct 0.18.0 requires jstyleson, which is not installed.",
        "scrapy-rotating-proxies 0.6.2 requires typing, which is not installed.",
    ]
    # not installed: asked in a fresh interpreter (this one may hold structured.py's stand-in)
    probe = "import importlib.util, sys; sys.exit(importlib.util.find_spec('jstyleson') is not None)"
    assert subprocess.run([sys.executable, "-c", probe]).returncode == 0
    assert find_spec("typing").origin.startswith(sys.base_prefix)  # the standard library's


def test_zstd_answers_decode_without_the_zstandard_package():
    assert find_spec("zstandard") is None  # not in the lock: Scrapy 2.19 uses backports.zstd
    mw = HttpCompressionMiddleware.from_crawler(get_crawler())
    body = b"<html><body>" + b"menu " * 2000 + b"</body></html>"
    request = Request("https://dutchie.com/embedded-menu/x")
    mw.process_request(request)
    assert b"zstd" in request.headers[b"Accept-Encoding"]
    zstd_body = backports.zstd.compress(body)
    response = HtmlResponse(request.url, body=zstd_body, headers={"Content-Encoding": "zstd"}, request=request)
    assert mw.process_response(request, response).body == body


def _node_environment(folder: Path) -> None:
    """`./dev node-env FOLDER`, offline from uv's cache when it holds every package (it does after
    ./dev setup), else from the index."""
    cmd = [str(ROOT / "dev"), "node-env", str(folder)]
    offline = subprocess.run(cmd, env={**os.environ, "UV_OFFLINE": "1"}, capture_output=True, text=True)
    if offline.returncode != 0:
        online = subprocess.run(cmd, capture_output=True, text=True)
        assert online.returncode == 0, online.stderr[-3000:]


@pytest.mark.integration
def test_a_node_environment_holds_no_dev_tool_and_crawls_the_sandbox(tmp_path, db, sandbox, scrapy_env):
    node = tmp_path / "node"
    _node_environment(node)
    python = node / "bin" / "python"
    probe = "import importlib.util as u, sys; print(' '.join(m for m in sys.argv[1:] if u.find_spec(m)))"
    outside = tmp_path  # not the checkout: only what the environment installed is importable
    present = subprocess.run(
        [python, "-c", probe, *NOT_ON_A_NODE, "sandbox", "scrapy", "botocore", "google.cloud.storage"],
        cwd=outside,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert present == ["scrapy", "botocore", "google.cloud.storage"]  # runtime and the s3/gcs extras only
    commands = subprocess.run([node / "bin" / "scrapy"], cwd=ROOT, capture_output=True, text=True).stdout
    assert " crawl " in commands and " demo " not in commands and " sandbox " not in commands

    # a real crawl from the node's environment (the sandbox serving it comes from the checkout)
    store = sandbox.stores("AZ")[0]
    d = add_store(db, store)
    result = subprocess.run(
        [python, "-m", "scrapy", "crawl", "product_discovery", "-a", f"dispensary_id={d}"],
        cwd=ROOT,
        env=scrapy_env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    assert set(products_of(db, d)) == set(sandbox.menu(store["id"], 0))
    assert runs_of(db, d)[0][0] == "complete"


@pytest.mark.integration
def test_the_egg_scrapyd_deploy_builds_holds_cannaspider_and_no_stand_in(tmp_path):
    # what scrapyd-deploy runs (scrapyd_client.deploy: `setup.py clean -a`, then `bdist_egg -d`)
    subprocess.run([sys.executable, "setup.py", "clean", "-a"], cwd=ROOT, capture_output=True, check=True)
    subprocess.run(
        [sys.executable, "setup.py", "bdist_egg", "-d", str(tmp_path)], cwd=ROOT, capture_output=True, check=True
    )
    (egg,) = tmp_path.glob("*.egg")
    with zipfile.ZipFile(egg) as z:
        names = z.namelist()
        entry_points = z.read("EGG-INFO/entry_points.txt").decode()
    assert {n.split("/")[0] for n in names} == {"cannaspider", "EGG-INFO"}
    assert not [n for n in names if "sandbox" in n or n.startswith("tests/")]
    assert "cannaspider/platforms/geodata/us_places.json.gz" in names
    assert "cannaspider/web/templates/base.html" in names
    assert "[scrapy]\nsettings = cannaspider.settings" in entry_points


@pytest.mark.integration
def test_scrapy_starts_outside_the_checkout_with_the_sandbox_commands_installed(tmp_path):
    # Scrapy loads every `scrapy.commands` entry point on each start: the sandbox's import cannaspider.
    # A user's shell has no SCRAPY_* variables; this process may (get_project_settings() in an
    # earlier test of this worker sets SCRAPY_SETTINGS_MODULE), and a child would inherit them.
    clean = {k: v for k, v in os.environ.items() if not k.startswith("SCRAPY_")}
    result = subprocess.run(
        [Path(sys.executable).parent / "scrapy", "version"], cwd=tmp_path, capture_output=True, text=True, env=clean
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.startswith("Scrapy 2.19")


@pytest.mark.integration
def test_the_lock_check_that_lint_runs_fails_when_a_declaration_changes(tmp_path):
    # `./dev lint` runs `uv lock --check`: the lock must follow pyproject.toml, or CI fails
    uv = next((ROOT / ".data" / "tools").glob("uv-*/bin/uv"))  # ./dev installed it
    for name in ("pyproject.toml", "uv.lock", "sandbox/pyproject.toml"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text((ROOT / name).read_text())
    check = [str(uv), "lock", "--check", "--offline", "--python", sys.executable]
    assert subprocess.run(check, cwd=tmp_path, capture_output=True, text=True).returncode == 0
    declared = (tmp_path / "pyproject.toml").read_text()
    (tmp_path / "pyproject.toml").write_text(declared.replace('  "us>=4.0",\n', ""))
    stale = subprocess.run([*check, "-v"], cwd=tmp_path, capture_output=True, text=True)
    # with the index pages in uv's cache it resolves offline and says the lock needs an update;
    # on a machine whose cache holds wheels only, the resolution it starts cannot run offline, but
    # it has found the mismatch first (its debug line) — either way the check fails, for that reason
    assert stale.returncode != 0, stale.stderr[-2000:]
    assert (
        "needs to be updated" in stale.stderr
        or "Resolving despite existing lockfile due to mismatched requirements for: `cannaspider" in stale.stderr
    ), stale.stderr[-2000:]
