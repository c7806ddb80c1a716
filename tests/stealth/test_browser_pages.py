"""Without Chromium, ./dev's warning says what a crawl then does (stealth/browser_pages.py): the
check and its words are the crawl's own. The Chromium part of ./dev's setup runs as is (its lines,
from the script), with CHROMIUM_PATH at a file that does not exist and at one that does."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from tests.helpers import ROOT

pytestmark = pytest.mark.integration  # spawns (tests/tiers.py)


def chromium_setup_lines() -> str:
    """./dev's Chromium step, as the script has it (the rest of setup installs packages: not here)."""
    script = (ROOT / "dev").read_text()
    found = re.search(r"\n  # Chromium for scrapy-playwright.*?\n  fi\n", script, re.S)
    assert found, "./dev has no Chromium step"
    return found.group(0)


def run_setup_step(chromium_path: str) -> subprocess.CompletedProcess[str]:
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("SCRAPY_")}, "CHROMIUM_PATH": chromium_path}
    # .venv/bin/python, as ./dev calls it: this interpreter's
    step = chromium_setup_lines().replace(".venv/bin/python", sys.executable)
    return subprocess.run(["bash", "-euo", "pipefail", "-c", step], cwd=ROOT, env=env, capture_output=True, text=True)


def test_without_chromium_dev_says_exactly_which_stores_fail_and_with_what(tmp_path):
    missing = tmp_path / "no-chromium"
    result = run_setup_step(str(missing))
    assert result.returncode == 0  # a warning, not a failed setup
    assert "installing" not in result.stdout  # CHROMIUM_PATH is the operator's: nothing installed for it
    reason = f"Chromium not found at CHROMIUM_PATH ({missing})"
    assert result.stderr.strip() == (
        f"warning: {reason}: only the stores whose menu is on their own website will not resolve, each with "
        f'resolution_error "{reason}"; the other stores resolve and crawl as usual (install chromium, or set '
        "CHROMIUM_PATH)"
    )


def test_with_a_browser_at_chromium_path_dev_says_nothing(tmp_path):
    browser = tmp_path / "chromium"
    browser.write_text("#!/bin/sh\necho 'Chromium 140.0.0.1'\n")
    browser.chmod(0o755)
    result = run_setup_step(str(browser))
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


def test_the_module_exits_1_when_missing_and_0_when_present(tmp_path):
    env = {**os.environ, "CHROMIUM_PATH": str(tmp_path / "none")}
    cmd = [sys.executable, "-m", "cannaspider.stealth.browser_pages", "--quiet"]
    assert subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True).returncode == 1
    env["CHROMIUM_PATH"] = "sh"  # a name on PATH, as CHROMIUM_PATH may be
    assert subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True).returncode == 0
